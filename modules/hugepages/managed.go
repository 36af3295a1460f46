package hugepages

import (
	"regexp"
	"strconv"
	"strings"

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
	// The files check reads at their default paths: read in the
	// gather's round trip (another path is read on its own).
	return facts.Set{Name: Name, Sysctls: []string{key}, Files: []string{DefaultSysctlFile, DefaultTmpfilesFile}}
}

// Manages says what rollback may put back for this module: the pool's
// kernel values (vm.nr_hugepages, any size's and any node's sysfs
// nr_hugepages), sysctl configuration files and tmpfiles.d files.
func (*Module) Manages(_ *engine.Target, kind, target string) bool {
	switch kind {
	case "sysctl":
		return target == key
	case "sysfs":
		return poolSysfsPath.MatchString(target)
	case "file":
		return sysctlconf.ManagedFile(target) || managedTmpfilesFile(target)
	}
	return false
}

// poolSysfsPath matches the nr_hugepages of a page size, globally or on
// one NUMA node.
var poolSysfsPath = regexp.MustCompile(`^/sys/(kernel/mm|devices/system/node/node[0-9]+)/hugepages/hugepages-[0-9]+kB/nr_hugepages$`)

var _ engine.CapacityGrower = (*Module)(nil)

// GrowsCapacity says which of rollback's steps grow a pool: those go
// before every other module's undo, so that pgconf's restart onto the
// restored settings finds the pool they need (engine.CapacityGrower).
func (m *Module) GrowsCapacity(kind, target, from, to string) bool {
	if kind != "sysctl" && kind != "sysfs" || !m.Manages(nil, kind, target) {
		return false
	}
	a, errA := strconv.ParseInt(strings.TrimSpace(from), 10, 64)
	b, errB := strconv.ParseInt(strings.TrimSpace(to), 10, 64)
	return errA == nil && errB == nil && b > a
}
