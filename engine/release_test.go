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

// secretConf is a line the report masks.
const secretConf = "primary_conninfo = 'host=db0 password=s3cr3t'\n"

// keepsState plans one file change and keeps, for Apply, the content to
// write (plan.State), as the modules do.
type keepsState struct{}

func (keepsState) Name() string       { return "keepsstate" }
func (keepsState) Requires() []string { return nil }
func (keepsState) NewParams() any     { return &struct{}{} }
func (keepsState) Validate(any) error { return nil }
func (keepsState) Check(_ context.Context, t *Target, _ any) (*plan.ModulePlan, error) {
	p := &plan.ModulePlan{Module: "keepsstate", State: []byte("content to write on " + t.Name)}
	p.Add(plan.Change{Kind: plan.KindFile, Target: "/etc/x.conf", Before: secretConf + "a\n", After: secretConf + "b\n"})
	return p, nil
}
func (keepsState) Apply(context.Context, *Target, *plan.ModulePlan) error  { return nil }
func (keepsState) Verify(context.Context, *Target, *plan.ModulePlan) error { return nil }

// TestCheckKeepsOnlyReport: once a host is planned and no Apply follows
// (check), what modules kept for Apply is let go and the plan's values are
// masked; the report shows the same changes. A plan that Apply follows
// keeps both.
func TestCheckKeepsOnlyReport(t *testing.T) {
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
		wantPlan  string // the plan's Before
	}{
		{"check", true, false, "primary_conninfo = 'host=db0 password=(sensitive)'\na\n"},
		{"apply", false, true, secretConf + "a\n"},
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
				if got := p.Changes[0].Before; got != tc.wantPlan {
					t.Errorf("%s: plan's Before %q, want %q", hr.host.Name, got, tc.wantPlan)
				}
			}
			rep := s.Report("check")
			if rep.Summary.Drift != 2 {
				t.Fatalf("summary %+v, want 2 hosts drifting", rep.Summary)
			}
			for _, h := range rep.Hosts {
				masked := "primary_conninfo = 'host=db0 password=(sensitive)'\n"
				if len(h.Changes) != 1 || h.Changes[0].Before != masked+"a\n" || h.Changes[0].After != masked+"b\n" {
					t.Errorf("%s: changes %+v", h.Name, h.Changes)
				}
			}
		})
	}
}
