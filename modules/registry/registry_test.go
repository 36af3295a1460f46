package registry

import (
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/playbooks"
)

// TestAll: the modules have distinct names, their declared facts can be
// gathered side by side, and the default policy loads against them.
func TestAll(t *testing.T) {
	mods := All()
	seen := map[string]bool{}
	for _, m := range mods {
		if seen[m.Name()] {
			t.Errorf("module %s registered twice", m.Name())
		}
		seen[m.Name()] = true
		if _, ok := m.(engine.TargetManager); !ok {
			t.Errorf("module %s does not say what it manages: rollback could not undo its changes", m.Name())
		}
	}
	byName, reg := engine.Registry(mods...)
	if err := facts.CheckSets(engine.FactSets(byName)); err != nil {
		t.Error(err)
	}
	book, err := playbook.Parse(playbooks.DefaultName, playbooks.Default, reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.ValidatePolicy(book, byName); err != nil {
		t.Errorf("default policy: %v", err)
	}
}
