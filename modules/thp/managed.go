package thp

import "github.com/pgtune/pgtune/engine"

var (
	_ engine.TargetManager = (*Module)(nil)
	_ engine.FactDeclarer  = (*Module)(nil)
)

// Manages says what rollback may put back for this module: the two
// transparent huge page settings and tmpfiles.d files.
func (*Module) Manages(_ *engine.Target, kind, target string) bool {
	switch kind {
	case "sysfs":
		return target == EnabledPath || target == DefragPath
	case "file":
		return ManagedFile(target)
	}
	return false
}
