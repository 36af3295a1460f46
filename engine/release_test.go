package engine

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/transport"
)

// keepsState plans one file change and keeps, for Apply, the content to
// write (plan.State), as the modules do.
type keepsState struct{}

func (keepsState) Name() string       { return "keepsstate" }
func (keepsState) Requires() []string { return nil }
func (keepsState) NewParams() any     { return &struct{}{} }
func (keepsState) Validate(any) error { return nil }
func (keepsState) Check(_ context.Context, t *Target, _ any) (*plan.ModulePlan, error) {
	p := &plan.ModulePlan{Module: "keepsstate", State: []byte("content to write on " + t.Name)}
	p.Add(plan.Change{Kind: plan.KindFile, Target: "/etc/x.conf", Before: "a\n", After: "b\n"})
	return p, nil
}
func (keepsState) Apply(context.Context, *Target, *plan.ModulePlan) error  { return nil }
func (keepsState) Verify(context.Context, *Target, *plan.ModulePlan) error { return nil }

// TestCheckDropsApplyState: once a host is planned and no Apply follows
// (check), what modules kept for Apply is let go; the report still shows
// every change. A plan that Apply follows keeps it.
func TestCheckDropsApplyState(t *testing.T) {
	gather, err := os.ReadFile("facts/testdata/gather-debian-vm.txt")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Parse("inv.yml", []byte("all:\n  hosts:\n    db1:\n    db2:\n"))
	if err != nil {
		t.Fatal(err)
	}
	mods, _ := Registry(keepsState{})
	book := &playbook.Playbook{File: "p.yml", Plays: []*playbook.Play{{
		Name: "p", Hosts: "all", Sections: []string{"keepsstate"}, Policy: map[string]any{"keepsstate": &struct{}{}},
	}}}
	hosts, err := Targets(inv, book, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		planOnly  bool
		wantState bool
	}{
		{"check", true, false},
		{"apply", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Runner{Modules: mods, Forks: 2, RunID: "test", PlanOnly: tc.planOnly,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Dial: func(context.Context, *inventory.Host) (transport.Transport, error) {
					return cannedHost(gather), nil
				},
			}
			s, err := r.Plan(context.Background(), inv, book, hosts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for _, hr := range s.hosts {
				p := hr.steps[0].plan
				if p == nil {
					t.Fatalf("%s: not planned: %v", hr.host.Name, hr.err)
				}
				if kept := p.State != nil; kept != tc.wantState {
					t.Errorf("%s: plan.State kept %t, want %t", hr.host.Name, kept, tc.wantState)
				}
			}
			rep := s.Report("check")
			if rep.Summary.Drift != 2 {
				t.Fatalf("summary %+v, want 2 hosts drifting", rep.Summary)
			}
			for _, h := range rep.Hosts {
				if len(h.Changes) != 1 || h.Changes[0].Before != "a\n" || h.Changes[0].After != "b\n" {
					t.Errorf("%s: changes %+v", h.Name, h.Changes)
				}
			}
		})
	}
}
