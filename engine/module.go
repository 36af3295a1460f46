// Package engine plans and applies memory policy across a fleet: it loads
// what to do (inventory, playbook), gathers facts once per host, orders the
// modules by what they declare they need, and runs check → apply → verify.
package engine

import (
	"context"
	"sort"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
)

// Module is one piece of policy, known to the engine only through this
// interface and the optional ones beside it (FactDeclarer, TargetManager,
// RollbackHook).
//
// One code path serves the dry run and the real run: Check computes the
// typed change set without touching the host; Apply does exactly those
// changes (the engine re-runs Check right before Apply and refuses when the
// result moved); Verify reads back from the kernel or the postmaster that
// the changes took.
type Module interface {
	// Name is the module's key in a playbook's policy mapping.
	Name() string
	// Requires names the modules whose planned outputs this one plans
	// from; they run first. The order never comes from YAML position.
	Requires() []string
	// NewParams returns a pointer to the module's parameter struct with
	// defaults filled in; the playbook's section is decoded into it with
	// unknown keys refused.
	NewParams() any
	// Validate checks params without a host: every value that needs no
	// host (plain values, expressions over constants) against its type
	// and bounds, with the error located at the value. Check repeats the
	// checks on the evaluated values.
	Validate(params any) error
	// Check compares the host with the policy. It must not change the host.
	Check(ctx context.Context, t *Target, params any) (*plan.ModulePlan, error)
	// Apply makes the changes of p, which Check returned moments ago.
	Apply(ctx context.Context, t *Target, p *plan.ModulePlan) error
	// Verify confirms the changes of p took effect.
	Verify(ctx context.Context, t *Target, p *plan.ModulePlan) error
}

// FactDeclarer is implemented by modules that read facts beyond the host's
// core ones: the kernel keys they read, and a snippet with its parser
// gathered in the engine's one gather round trip. Check finds them in
// Target.Facts (Sysctl, SysctlFiles, Module(name)); expressions as
// facts.<name>.
type FactDeclarer interface {
	FactSet() facts.Set
}

// FactSets collects the fact sets of every module, in name order: facts
// are gathered for all the runner's modules, whichever the play runs, so
// that a module may plan from another's keys (the live pool when the pool's
// module is not in the play) and rollback sees every module's facts.
func FactSets(mods map[string]Module) []facts.Set {
	names := make([]string, 0, len(mods))
	for n := range mods {
		names = append(names, n)
	}
	sort.Strings(names)
	var sets []facts.Set
	for _, n := range names {
		if d, ok := mods[n].(FactDeclarer); ok {
			sets = append(sets, d.FactSet())
		}
	}
	return sets
}

// OutputDeclarer is implemented by modules that declare the outputs their
// Check plans (plan.ModulePlan.Outputs), which expressions read as
// <module>.<name>: each name with a sample value of its type. validate
// checks expressions against them; a module without it may be read by
// any name.
type OutputDeclarer interface {
	Outputs() map[string]any
}
