package engine

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/fakehost"
)

// fileSetter plans /etc/app.conf to hold "wanted" and writes it.
type fileSetter struct{}

const appConf = "/etc/app.conf"

func (fileSetter) Name() string       { return "setter" }
func (fileSetter) Requires() []string { return nil }
func (fileSetter) NewParams() any     { return &struct{}{} }
func (fileSetter) Validate(any) error { return nil }

func (fileSetter) Check(ctx context.Context, t *Target, _ any) (*plan.ModulePlan, error) {
	p := &plan.ModulePlan{Module: "setter"}
	cur, _, err := t.ReadFile(ctx, appConf)
	if err != nil {
		return nil, err
	}
	if string(cur) != "wanted\n" {
		p.Add(plan.Change{Kind: plan.KindFile, Target: appConf, Before: string(cur), After: "wanted\n"})
	}
	return p, nil
}

func (fileSetter) Apply(ctx context.Context, t *Target, _ *plan.ModulePlan) error {
	return t.WriteFile(ctx, appConf, []byte("wanted\n"), transport.WriteOptions{})
}

func (fileSetter) Verify(context.Context, *Target, *plan.ModulePlan) error { return nil }

// healthyHost answers the facts gather with a recorded VM's output; the
// fake answers the state directory and the lock as a healthy host.
func healthyHost(t *testing.T, h *fakehost.Host) {
	gather, err := os.ReadFile("facts/testdata/gather-debian-vm.txt")
	if err != nil {
		t.Fatal(err)
	}
	h.Other = cannedHost(gather).Other
}

func TestApplyRefusesDrift(t *testing.T) {
	for _, tc := range []struct {
		name   string
		drift  func(h *fakehost.Host)
		status report.Status
		err    string
		file   string
	}{
		{name: "no drift", drift: func(*fakehost.Host) {}, status: report.Changed, file: "wanted\n"},
		{name: "file edited since the plan", drift: func(h *fakehost.Host) { h.Files[appConf] = "edited\n" },
			status: report.Failed, file: "edited\n",
			err: "db1: setter: the host changed since the plan was shown (/etc/app.conf: planned (file content) → (file content), now (file content) → (file content)); nothing more was applied, run again"},
		{name: "no longer needed", drift: func(h *fakehost.Host) { h.Files[appConf] = "wanted\n" },
			status: report.Failed, file: "wanted\n",
			err: "db1: setter: the host changed since the plan was shown (/etc/app.conf: no longer needed); nothing more was applied, run again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost()
			h.Files[appConf] = "old\n"
			healthyHost(t, h)
			inv, err := inventory.Parse("inv.yml", []byte("all:\n  hosts:\n    db1:\n"))
			if err != nil {
				t.Fatal(err)
			}
			mods, _ := Registry(fileSetter{})
			book := &playbook.Playbook{File: "p.yml", Plays: []*playbook.Play{{
				Name: "p", Hosts: "all", Sections: []string{"setter"}, Policy: map[string]any{"setter": &struct{}{}},
			}}}
			r := &Runner{Modules: mods, Forks: 1, RunID: "20261130T190000Z-drift0", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
				Dial: func(context.Context, *inventory.Host) (transport.Transport, error) { return h, nil }}
			hosts, err := Targets(inv, book, "")
			if err != nil {
				t.Fatal(err)
			}
			s, err := r.Plan(context.Background(), inv, book, hosts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			h.Lock()
			tc.drift(h)
			h.Unlock()
			s.Apply(context.Background())
			rep := s.Report("apply")
			got := rep.Hosts[0]
			msg := ""
			if got.Error != nil {
				msg = *got.Error
			}
			if got.Status != tc.status || msg != tc.err {
				t.Errorf("%s %q\nwant %s %q", got.Status, msg, tc.status, tc.err)
			}
			if h.Files[appConf] != tc.file {
				t.Errorf("%s holds %q, want %q", appConf, h.Files[appConf], tc.file)
			}
			if tc.status == report.Failed {
				if w := h.Commands("write "); len(w) != 0 {
					t.Errorf("a refused apply wrote %q", w)
				}
				if j := h.Commands("journal "); len(j) != 0 {
					t.Errorf("a refused apply journaled %q", j)
				}
			}
		})
	}
}

// TestDriftMessage words each way a re-check can differ from the plan.
func TestDriftMessage(t *testing.T) {
	planned := []plan.Change{{Target: "vm.a", Before: "1", After: "2"}, {Target: "vm.b", Before: "1", After: "2"}}
	now := []plan.Change{{Target: "vm.a", Before: "5", After: "2"}, {Target: "vm.c", Before: "", After: "3"}}
	want := "vm.a: planned 1 → 2, now 5 → 2; vm.b: no longer needed; vm.c: new change (unset) → 3"
	if got := describeMove(planned, now); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := describeMove(planned, []plan.Change{planned[1], planned[0]}); !strings.Contains(got, "reordered") {
		t.Errorf("reordered: %s", got)
	}
}
