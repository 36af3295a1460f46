package hugepages

import (
	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/modules/internal/sysctlconf"
)

var (
	_ engine.TargetManager = (*Module)(nil)
	_ engine.FactDeclarer  = (*Module)(nil)
)

// FactSet declares the pool's kernel key: its live value and boot-time
// assignments are gathered for Check. The pool's meminfo counts are core
// facts.
func (*Module) FactSet() facts.Set {
	return facts.Set{Name: Name, Sysctls: []string{key}}
}

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
