package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// countedTransport tracks how many connections the runner holds open.
type countedTransport struct {
	transport.Transport
	open *atomic.Int32
	once sync.Once
}

func (c *countedTransport) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Transport.Close()
}

// probe plans a change on the hosts in changes and records, at each Check,
// how many connections were open.
type probe struct {
	changes map[string]bool
	open    *atomic.Int32
	mu      sync.Mutex
	seen    []int32
	applied []string
}

func (p *probe) Name() string       { return "probe" }
func (p *probe) Requires() []string { return nil }
func (p *probe) NewParams() any     { return &struct{}{} }
func (p *probe) Validate(any) error { return nil }
func (p *probe) Check(ctx context.Context, t *Target, _ any) (*plan.ModulePlan, error) {
	p.mu.Lock()
	p.seen = append(p.seen, p.open.Load())
	p.mu.Unlock()
	if _, err := t.Transport.Run(ctx, transport.Command{Args: []string{"true"}}); err != nil {
		return nil, err
	}
	mp := &plan.ModulePlan{Module: "probe"}
	if p.changes[t.Name] {
		mp.Add(plan.Change{Target: "/probe", Before: "a", After: "b"})
	}
	return mp, nil
}
func (p *probe) Apply(_ context.Context, t *Target, _ *plan.ModulePlan) error {
	p.mu.Lock()
	p.applied = append(p.applied, t.Name)
	p.mu.Unlock()
	return nil
}
func (p *probe) Verify(context.Context, *Target, *plan.ModulePlan) error { return nil }

// TestConnectionsClosedWhenDone runs check and apply over a real sshd and
// counts the connections held, client side at each step and server side
// (sshd's children) after planning.
func TestConnectionsClosedWhenDone(t *testing.T) {
	srv := testhost.SSHD(t)
	testhost.WatchKernel(t) // facts read the kernel's values
	dir := t.TempDir()
	var hosts strings.Builder
	hosts.WriteString("all:\n  hosts:\n")
	for _, h := range []string{"h1", "h2", "h3"} {
		fmt.Fprintf(&hosts, "    %s:\n      ssh_host: 127.0.0.1\n      ssh_port: %d\n      ssh_user: root\n      ssh_private_key_file: %s\n      ssh_known_hosts_file: %s\n",
			h, srv.Port, srv.KeyFile, srv.KnownHostsFile)
	}
	invFile := filepath.Join(dir, "inventory.yml")
	if err := os.WriteFile(invFile, []byte(hosts.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Load(invFile)
	if err != nil {
		t.Fatal(err)
	}
	book := &playbook.Playbook{File: "book.yml", Plays: []*playbook.Play{{
		Name: "p", Hosts: "all", Policy: map[string]any{"probe": &struct{}{}}, Sections: []string{"probe"},
	}}}
	targets, err := Targets(inv, book, "")
	if err != nil {
		t.Fatal(err)
	}

	setup := func(planOnly bool) (*Runner, *probe, *atomic.Int32) {
		open := &atomic.Int32{}
		p := &probe{changes: map[string]bool{"h2": true}, open: open}
		mods, _ := Registry(p)
		return &Runner{
			Modules: mods, Forks: 1, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), RunID: "r1", PlanOnly: planOnly,
			Dial: func(ctx context.Context, h *inventory.Host) (transport.Transport, error) {
				tr, err := Dial(ctx, h)
				if err != nil {
					return nil, err
				}
				open.Add(1)
				return &countedTransport{Transport: tr, open: open}, nil
			},
		}, p, open
	}

	t.Run("check", func(t *testing.T) {
		r, p, open := setup(true)
		s, err := r.Plan(context.Background(), inv, book, targets)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if fmt.Sprint(p.seen) != "[1 1 1]" {
			t.Errorf("connections open at each host's check: %v, want [1 1 1] (the previous host's closed when it was done)", p.seen)
		}
		if n := open.Load(); n != 0 {
			t.Errorf("%d connections open after check, want 0", n)
		}
		if n := srv.WaitSessions(t, 0, 10*time.Second); n != 0 {
			t.Errorf("sshd serves %d connections after check, want 0", n)
		}
		if r := s.Report("check"); r.Summary.Drift != 1 || r.Summary.InPolicy != 2 {
			t.Errorf("summary %+v", r.Summary)
		}
	})
	t.Run("apply keeps only hosts with changes", func(t *testing.T) {
		r, p, open := setup(false)
		s, err := r.Plan(context.Background(), inv, book, targets)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if n := open.Load(); n != 1 {
			t.Errorf("%d connections open after planning, want 1 (h2, the host with changes)", n)
		}
		if n := srv.WaitSessions(t, 1, 10*time.Second); n != 1 {
			t.Errorf("sshd serves %d connections after planning, want 1", n)
		}
		s.Apply(context.Background())
		if fmt.Sprint(p.applied) != "[h2]" {
			t.Errorf("applied on %v, want [h2]", p.applied)
		}
		rep := s.Report("apply")
		for _, h := range rep.Hosts {
			want := report.OK
			if h.Name == "h2" {
				want = report.Changed
			}
			if h.Status != want || h.Error != nil {
				t.Errorf("%s: %s %v, want %s", h.Name, h.Status, h.Error, want)
			}
		}
		s.Close()
		if n := open.Load(); n != 0 {
			t.Errorf("%d connections open after Close", n)
		}
	})
}
