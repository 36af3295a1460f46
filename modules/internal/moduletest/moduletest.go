// Package moduletest holds what the modules' tests share: a target on
// this machine as the runner builds one, and a compact view of a plan.
package moduletest

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// LocalTarget gathers this machine's facts through tr, with the facts mods
// declare, and binds them for expressions (file "policy.yml"), as the
// runner does for a host. Its journal (and the backups of what it
// changes) is in a directory the test removes. The facts are machine-wide
// state: the test must hold the kernel lock (testhost.LockKernel or
// WatchKernel), so that no test package changes them mid-read.
func LocalTarget(t *testing.T, tr transport.Transport, mods ...engine.Module) *engine.Target {
	t.Helper()
	if !testhost.HoldsKernel(t) {
		t.Fatal("moduletest.LocalTarget reads this machine's facts: take the kernel lock first (testhost.LockKernel or WatchKernel)")
	}
	byName, _ := engine.Registry(mods...)
	f, err := facts.Gather(context.Background(), tr, facts.Options{Sets: engine.FactSets(byName)})
	if err != nil {
		t.Fatal(err)
	}
	scope := expr.NewScope("policy.yml")
	vars, err := f.ScopeVars()
	if err != nil {
		t.Fatal(err)
	}
	if err := scope.Set("facts", vars); err != nil {
		t.Fatal(err)
	}
	return &engine.Target{Name: "localhost", Transport: tr, Facts: f, Scope: scope,
		Log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		Journal: engine.NewJournal("moduletest", "localhost", t.TempDir(), tr, false)}
}

// Changes renders a plan's changes one per line: "file PATH" for files,
// "TARGET BEFORE→AFTER" otherwise.
func Changes(p *plan.ModulePlan) []string {
	var out []string
	for _, c := range p.Changes {
		if c.Kind == plan.KindFile {
			out = append(out, "file "+c.Target)
			continue
		}
		out = append(out, c.Target+" "+c.Before+"→"+c.After)
	}
	return out
}
