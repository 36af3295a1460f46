package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/playbook"
)

// ordered is a module with a name, what it requires, and one param.
type ordered struct {
	name     string
	requires []string
}

type orderedParams struct{ X expr.Value }

func (m ordered) Name() string       { return m.name }
func (m ordered) Requires() []string { return m.requires }
func (ordered) NewParams() any       { return &orderedParams{} }
func (ordered) Validate(any) error   { return nil }
func (m ordered) Check(context.Context, *Target, any) (*plan.ModulePlan, error) {
	return &plan.ModulePlan{Module: m.name}, nil
}
func (ordered) Apply(context.Context, *Target, *plan.ModulePlan) error  { return nil }
func (ordered) Verify(context.Context, *Target, *plan.ModulePlan) error { return nil }

// TestValidateOutputsPlannedLaterOnSomeHost: a module may use only the
// outputs of modules planned before it on every host it runs on. Here
// alpha uses beta's; on db1 a second play's aardvark (which requires beta)
// puts beta first, but db2 has only the first play, where alpha comes
// first by name: the use fails there, so validate refuses it. One order
// over every play's modules passed it.
func TestValidateOutputsPlannedLaterOnSomeHost(t *testing.T) {
	mods, _ := Registry(ordered{name: "alpha"}, ordered{name: "beta"}, ordered{name: "aardvark", requires: []string{"beta"}})
	x, err := expr.Parse("${beta.out}", "p.yml", 5, 10)
	if err != nil {
		t.Fatal(err)
	}
	book := &playbook.Playbook{File: "p.yml", Plays: []*playbook.Play{
		{Name: "both", Hosts: "all", Sections: []string{"alpha", "beta"},
			Policy: map[string]any{"alpha": &orderedParams{X: x}, "beta": &orderedParams{}}},
		{Name: "db1 only", Hosts: "db1", Sections: []string{"aardvark"},
			Policy: map[string]any{"aardvark": &orderedParams{}}},
	}}
	inv, err := inventory.Parse("inv.yml", []byte("all:\n  hosts:\n    db1:\n    db2:\n"))
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := InventoryHosts(inv, book, inv.Hosts)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		hosts *PolicyHosts
	}{{"with the inventory", hosts}, {"without one", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidatePolicyOn(book, mods, tc.hosts)
			if err == nil || !strings.Contains(err.Error(), "p.yml:5:12: beta is planned after alpha (order: alpha → beta)") {
				t.Fatalf("err = %v", err)
			}
		})
	}
	// With only db1 selected, every host plans beta first.
	only, err := InventoryHosts(inv, book, inv.Hosts[:1])
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidatePolicyOn(book, mods, only); err != nil {
		t.Errorf("db1 alone: %v", err)
	}
}
