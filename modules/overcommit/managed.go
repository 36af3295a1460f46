package overcommit

import (
	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/modules/internal/sysctlconf"
)

var (
	_ engine.TargetManager = (*Module)(nil)
	_ engine.LinkedSysctls = (*Module)(nil)
	_ engine.FactDeclarer  = (*Module)(nil)
)

// keyPool is the huge page pool's size in pages: without the hugepages
// module in the play, the limit is computed against the live pool.
const keyPool = "vm.nr_hugepages"

// FactSet declares the kernel keys Check reads: the three overcommit keys
// it sets (ratio because writing kbytes zeroes it) and the live pool.
func (*Module) FactSet() facts.Set {
	// The file check reads at its default path: read in the gather's
	// round trip (another path is read on its own).
	return facts.Set{Name: Name, Sysctls: []string{keyMemory, keyKbytes, keyRatio, keyPool}, Files: []string{DefaultSysctlFile}}
}

// keyRatio is written by the kernel when kbytes is (they zero each other),
// so the engine journals it with the module's changes.
const keyRatio = "vm.overcommit_ratio"

// LinkedSysctls declares that writing vm.overcommit_kbytes zeroes
// vm.overcommit_ratio and the reverse (mm/util.c): the journal records
// both, and undo restores whichever was in force.
func (*Module) LinkedSysctls() map[string][]string {
	return map[string][]string{keyKbytes: {keyRatio}, keyRatio: {keyKbytes}}
}

// Manages says what rollback may put back for this module: the overcommit
// kernel values and sysctl configuration files.
func (*Module) Manages(_ *engine.Target, kind, target string) bool {
	switch kind {
	case "sysctl":
		return target == keyMemory || target == keyKbytes || target == keyRatio
	case "file":
		return sysctlconf.ManagedFile(target)
	}
	return false
}
