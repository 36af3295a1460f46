package hugepages

import (
	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/modules/internal/sysctlconf"
)

var _ engine.TargetManager = (*Module)(nil)

// Manages says what rollback may put back for this module: the pool's
// kernel value and sysctl configuration files.
func (*Module) Manages(_ *engine.Target, kind, target string) bool {
	switch kind {
	case "sysctl":
		return target == key
	case "file":
		return sysctlconf.ManagedFile(target)
	}
	return false
}
