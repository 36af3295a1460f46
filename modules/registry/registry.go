// Package registry is the one list of the modules pgtune ships: the CLI,
// the benchmarks and the tests all take their modules from All, so adding
// a module means adding it here and nowhere else in the engine or the CLI.
package registry

import (
	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/modules/hugepages"
	"github.com/pgtune/pgtune/modules/oom"
	"github.com/pgtune/pgtune/modules/overcommit"
	"github.com/pgtune/pgtune/modules/pgconf"
	"github.com/pgtune/pgtune/modules/thp"
)

// All returns a new instance of every module. Their order does not
// matter: a playbook's modules run in the order their Requires give.
func All() []engine.Module {
	return []engine.Module{
		hugepages.New(),
		pgconf.New(),
		overcommit.New(),
		thp.New(),
		oom.New(),
	}
}
