package engine

import (
	"reflect"
	"testing"

	"github.com/pgtune/pgtune/engine/facts"
)

// declaring is panicky that declares facts.
type declaring struct {
	panicky
	name string
}

func (d declaring) Name() string { return d.name }
func (d declaring) FactSet() facts.Set {
	return facts.Set{Name: d.name, Sysctls: []string{"kernel." + d.name}}
}

// TestFactSets: every module's declared facts are gathered, whichever the
// play runs, in name order (the gather script is the same on every run).
func TestFactSets(t *testing.T) {
	mods, _ := Registry(declaring{name: "zeta"}, panicky{}, declaring{name: "alfa"})
	var got []string
	for _, s := range FactSets(mods) {
		got = append(got, s.Name)
	}
	if want := []string{"alfa", "zeta"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("sets %q, want %q", got, want)
	}
}
