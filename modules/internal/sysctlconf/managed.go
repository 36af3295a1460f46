package sysctlconf

import (
	"path"
	"strings"

	"github.com/pgtune/pgtune/engine/facts"
)

// ManagedFile reports whether p is a file the sysctl modules may write: a
// *.conf file in a sysctl.d directory (their own file, or one whose lines
// they commented out) or /etc/sysctl.conf. Those are the only places
// sysctl reads at boot, so a sysctl_file anywhere else would never take
// effect; rollback uses this to refuse journals naming other files.
func ManagedFile(p string) bool {
	if p == facts.SysctlConf {
		return true
	}
	return path.IsAbs(p) && strings.HasSuffix(p, ".conf") && !strings.HasPrefix(path.Base(p), ".") &&
		path.Base(path.Dir(p)) == "sysctl.d"
}
