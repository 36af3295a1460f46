package engine

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/report"
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

// twoHostPlay is a play of module m (named keepsstate) on db1 and db2,
// whose facts gather answers with a Debian VM's.
func twoHostPlay(t *testing.T, m Module) ([]byte, *inventory.Inventory, *playbook.Playbook, []*inventory.Host, map[string]Module) {
	t.Helper()
	gather, err := os.ReadFile("facts/testdata/gather-debian-vm.txt")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Parse("inv.yml", []byte("all:\n  hosts:\n    db1:\n    db2:\n"))
	if err != nil {
		t.Fatal(err)
	}
	mods, _ := Registry(m)
	book := &playbook.Playbook{File: "p.yml", Plays: []*playbook.Play{{
		Name: "p", Hosts: "all", Sections: []string{"keepsstate"}, Policy: map[string]any{"keepsstate": &struct{}{}},
	}}}
	hosts, err := Targets(inv, book, "")
	if err != nil {
		t.Fatal(err)
	}
	return gather, inv, book, hosts, mods
}

// TestCheckKeepsOnlyReport: once a host is planned and no Apply follows
// (check), what modules kept for Apply is let go and the plan's values are
// masked; the report shows the same changes. A plan that Apply follows
// keeps both.
func TestCheckKeepsOnlyReport(t *testing.T) {
	gather, inv, book, hosts, mods := twoHostPlay(t, keepsState{})
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

// clusterRefuser refuses db1 once the cluster is checked, as a switchover
// does that the other members cannot take; it needs its plan's State then.
type clusterRefuser struct{ keepsState }

func (clusterRefuser) Name() string { return "keepsstate" }
func (clusterRefuser) WantsClusterCheck(p *plan.ModulePlan) bool {
	b, _ := p.State.([]byte)
	return string(b) == "content to write on db1"
}
func (clusterRefuser) CheckCluster(_ context.Context, t *Target, p *plan.ModulePlan) error {
	if p.State == nil {
		return errors.New("the plan's State was let go before the cluster check")
	}
	return errors.New("switchover refused: a standby is not streaming")
}

// TestClusterCheckInCheck: in check, a host waiting for its cluster's
// check keeps its plan whole and its one connection until then, and its
// streamed outcome is the final one (the refusal), not an earlier drift.
func TestClusterCheckInCheck(t *testing.T) {
	gather, inv, book, hosts, mods := twoHostPlay(t, clusterRefuser{})
	var mu sync.Mutex
	dials := map[string]int{}
	streamed := map[string]string{}
	r := &Runner{Modules: mods, Forks: 2, RunID: "test", PlanOnly: true,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Dial: func(_ context.Context, h *inventory.Host) (transport.Transport, error) {
			mu.Lock()
			dials[h.Name]++
			mu.Unlock()
			return cannedHost(gather), nil
		},
		HostDone: func(phase string, h report.Host) {
			mu.Lock()
			streamed[h.Name] += string(h.Status) + " "
			mu.Unlock()
		},
	}
	s, err := r.Plan(context.Background(), inv, book, hosts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rep := s.Report("check")
	for _, h := range rep.Hosts {
		if got := streamed[h.Name]; got != string(h.Status)+" " {
			t.Errorf("%s: streamed %q, final %q", h.Name, got, h.Status)
		}
		if dials[h.Name] != 1 {
			t.Errorf("%s: %d connections, want 1", h.Name, dials[h.Name])
		}
	}
	if err := s.hosts[0].err; err == nil || !strings.Contains(err.Error(), "db1: keepsstate: switchover refused") {
		t.Errorf("db1: %v, want the cluster check's refusal", err)
	}
	if s.hosts[1].err != nil {
		t.Errorf("db2: %v", s.hosts[1].err)
	}
	for _, hr := range s.hosts {
		if hr.steps[0].plan.State != nil || hr.tr != nil {
			t.Errorf("%s: kept its plan's State or connection after the check", hr.host.Name)
		}
	}
}
