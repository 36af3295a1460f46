package hugepages

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/modules/internal/fakehost"
)

// The order pools change in around PostgreSQL's restart, through the
// real engine (plan, apply, rollback) on the fake host: a pool must grow
// before the restart that maps it and shrink after the restart that frees
// it. The fake's server (fakehost.Server) fails to start when its pool is
// short, as PostgreSQL does ("could not map anonymous shared memory").

const (
	serverUnit = "postgresql@15-main.service"
	serverConf = "/etc/postgresql/15/main/conf.d/002-hugepages.conf"
)

// server stands in for pgconf: it requires hugepages, writes the page size
// and page count hugepages planned into the server's configuration, and
// restarts the server; when the restart fails it puts the configuration
// back and restarts on it (the journaled restart runs again), as pgconf
// recovers. Rollback restarts it the same way, after its file is back.
type server struct{}

type serverParams struct {
	// Refuse writes a setting the server rejects: the restart fails
	// whatever the pools.
	Refuse bool `yaml:"refuse"`
}

func (server) Name() string       { return "server" }
func (server) Requires() []string { return []string{Name} }
func (server) NewParams() any     { return &serverParams{} }
func (server) Validate(any) error { return nil }
func (server) Manages(_ *engine.Target, kind, target string) bool {
	return kind == "file" && target == serverConf || kind == "service" && target == serverUnit
}

func (server) Check(ctx context.Context, t *engine.Target, params any) (*plan.ModulePlan, error) {
	size, _ := t.Int64Output(Name, "page_size")
	pages, _ := t.Int64Output(Name, "pages")
	want := fmt.Sprintf("huge_page_size_kb = %d\npages = %d\n", size>>10, pages)
	if params.(*serverParams).Refuse {
		want += "refuse = yes\n"
	}
	p := &plan.ModulePlan{Module: "server", State: want}
	cur, _, err := t.ReadFile(ctx, serverConf)
	if err != nil {
		return nil, err
	}
	if string(cur) != want {
		p.Add(plan.Change{Kind: plan.KindFile, Target: serverConf, Before: string(cur), After: want})
		p.Add(plan.Change{Kind: plan.KindRestart, Target: "restart " + serverUnit})
	}
	return p, nil
}

func (server) Apply(ctx context.Context, t *engine.Target, p *plan.ModulePlan) error {
	mark := t.Mark()
	if err := t.WriteFile(ctx, serverConf, []byte(p.State.(string)), transport.WriteOptions{}); err != nil {
		return err
	}
	err := t.Service(ctx, serverUnit, "restart")
	if err == nil {
		return nil
	}
	if uerr := t.UndoSince(ctx, mark); uerr != nil {
		return fmt.Errorf("%w; restoring the previous configuration: %v", err, uerr)
	}
	return fmt.Errorf("%w; previous configuration restored, server running again on it", err)
}

func (server) Verify(context.Context, *engine.Target, *plan.ModulePlan) error { return nil }

// gigHost offers 1 GiB pages beside 2 MiB ones, no pool yet, and runs
// the server off huge pages (pages = 0).
func gigHost() (*fakehost.Host, *fakehost.Server) {
	h := fakehost.New()
	withGig(h)
	h.Files[serverConf] = "huge_page_size_kb = 2048\npages = 0\n"
	return h, h.AddServer(serverUnit, serverConf)
}

// plays: a 1 GiB pool in 1 GiB pages, and the same pool in the default
// size.
func gigPlay(refuse bool) map[string]any {
	p := DefaultParams()
	p.Pool = expr.MustParse(fmt.Sprint(GiB))
	p.PageSize = expr.MustParse("1GiB")
	return map[string]any{Name: p, "server": &serverParams{Refuse: refuse}}
}

func defaultPlay(refuse bool) map[string]any {
	p := DefaultParams()
	p.Pool = expr.MustParse(fmt.Sprint(GiB))
	return map[string]any{Name: p, "server": &serverParams{Refuse: refuse}}
}

// fleet runs the engine on the fake host as the CLI does.
type fleet struct {
	t     *testing.T
	h     *fakehost.Host
	runs  int
	inv   *inventory.Inventory
	hosts []*inventory.Host
}

func newFleet(t *testing.T, h *fakehost.Host) *fleet {
	inv, err := inventory.Parse("inv.yml", []byte("all:\n  hosts:\n    db1:\n"))
	if err != nil {
		t.Fatal(err)
	}
	return &fleet{t: t, h: h, inv: inv, hosts: inv.Hosts}
}

func (f *fleet) runner() *engine.Runner {
	f.runs++
	mods, _ := engine.Registry(New(), server{})
	return &engine.Runner{Modules: mods, Forks: 1, RunID: fmt.Sprintf("20261201T0000%02dZ-order0", f.runs),
		Log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Dial: func(context.Context, *inventory.Host) (transport.Transport, error) { return f.h, nil }}
}

// apply plans and applies policy; it returns the run id and the host's
// error ("" when it is ok).
func (f *fleet) apply(policy map[string]any) (string, string) {
	f.t.Helper()
	book := &playbook.Playbook{File: "p.yml", Plays: []*playbook.Play{{
		Name: "p", Hosts: "db1", Sections: []string{Name, "server"}, Policy: policy,
	}}}
	r := f.runner()
	s, err := r.Plan(context.Background(), f.inv, book, f.hosts)
	if err != nil {
		f.t.Fatal(err)
	}
	defer s.Close()
	if rep := s.Report("check"); rep.Hosts[0].Error != nil {
		f.t.Fatalf("plan: %s", *rep.Hosts[0].Error)
	}
	s.Apply(context.Background())
	return r.RunID, hostError(s.Report("apply"))
}

// rollback undoes run to ("": everything).
func (f *fleet) rollback(to string) string {
	f.t.Helper()
	s := f.runner().PlanRollback(context.Background(), f.hosts, to)
	defer s.Close()
	if rep := s.Report("check"); rep.Hosts[0].Error != nil {
		f.t.Fatalf("plan rollback: %s", *rep.Hosts[0].Error)
	}
	s.Apply(context.Background())
	return hostError(s.Report("rollback"))
}

func hostError(rep *report.Report) string {
	if e := rep.Hosts[0].Error; e != nil {
		return *e
	}
	return ""
}

func TestPoolsAroundRestart(t *testing.T) {
	const (
		gigTo1     = "sysfs " + gigSysfs + "=1"
		gigTo0     = "sysfs " + gigSysfs + "=0"
		restart    = "service restart " + serverUnit
		defTo512   = "sysctl vm.nr_hugepages=512"
		defTo0     = "sysctl vm.nr_hugepages=0"
		gigRestore = "write " + tmpfiles
	)
	type state struct {
		sizeKB, pages int64 // the server's segment
		gig, def      int64 // persistent pages of the 1 GiB and 2 MiB pools
		boot          bool  // pgtune's tmpfiles.d file is there
	}
	onGig := state{sizeKB: 1 << 20, pages: 1, gig: 1, boot: true}
	onDefault := state{sizeKB: 2048, pages: 512, def: 512}
	offHuge := state{sizeKB: 2048}
	tests := []struct {
		name string
		// run changes the host and returns the host's error; f ran the
		// earlier runs, runIDs are theirs.
		run    func(f *fleet, runIDs []string) string
		before []func(f *fleet) (string, string) // earlier runs (run id, error)
		err    string
		want   state
		// order: each pair's first line comes before its second in
		// the run's log.
		order [][2]string
		// starts: the server's starts during the run.
		starts []string
	}{
		{
			name:   "apply default→1GiB: the 1 GiB pool grows before the restart",
			run:    func(f *fleet, _ []string) string { _, err := f.apply(gigPlay(false)); return err },
			want:   onGig,
			order:  [][2]string{{gigTo1, restart}},
			starts: []string{"up 1×1048576kB"},
		},
		{
			name:   "apply 1GiB→default: the 2 MiB pool grows before the restart, the 1 GiB pool goes after it",
			before: []func(f *fleet) (string, string){func(f *fleet) (string, string) { return f.apply(gigPlay(false)) }},
			run:    func(f *fleet, _ []string) string { _, err := f.apply(defaultPlay(false)); return err },
			want:   onDefault,
			order:  [][2]string{{defTo512, restart}, {restart, gigTo0}, {restart, "remove " + tmpfiles}},
			starts: []string{"up 512×2048kB"},
		},
		{
			name:   "apply 1GiB→default refused by the server: it starts again on the 1 GiB pool, still there",
			before: []func(f *fleet) (string, string){func(f *fleet) (string, string) { return f.apply(gigPlay(false)) }},
			run:    func(f *fleet, _ []string) string { _, err := f.apply(defaultPlay(true)); return err },
			err:    "previous configuration restored, server running again on it",
			// The 2 MiB pool grew and stays (apply failed after it).
			want:   state{sizeKB: 1 << 20, pages: 1, gig: 1, def: 512, boot: true},
			starts: []string{"failed: FATAL:  configuration file \"" + serverConf + "\" contains errors", "up 1×1048576kB"},
		},
		{
			name:   "rollback of default→1GiB: the restart goes back to 2 MiB, then the 1 GiB pool goes",
			before: []func(f *fleet) (string, string){func(f *fleet) (string, string) { return f.apply(gigPlay(false)) }},
			run:    func(f *fleet, ids []string) string { return f.rollback(ids[0]) },
			want:   offHuge,
			order:  [][2]string{{restart, gigTo0}},
			starts: []string{"up 0×2048kB"},
		},
		{
			name: "rollback of 1GiB→default: the 1 GiB pool is back before the restart, the 2 MiB pool goes after it",
			before: []func(f *fleet) (string, string){
				func(f *fleet) (string, string) { return f.apply(gigPlay(false)) },
				func(f *fleet) (string, string) { return f.apply(defaultPlay(false)) },
			},
			run:    func(f *fleet, ids []string) string { return f.rollback(ids[1]) },
			want:   onGig,
			order:  [][2]string{{gigTo1, restart}, {restart, defTo0}, {gigTo1, gigRestore}},
			starts: []string{"up 1×1048576kB"},
		},
		{
			name: "rollback of both: back to no pool at all",
			before: []func(f *fleet) (string, string){
				func(f *fleet) (string, string) { return f.apply(gigPlay(false)) },
				func(f *fleet) (string, string) { return f.apply(defaultPlay(false)) },
			},
			run:    func(f *fleet, _ []string) string { return f.rollback("") },
			want:   offHuge,
			order:  [][2]string{{restart, defTo0}},
			starts: []string{"up 0×2048kB"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, srv := gigHost()
			f := newFleet(t, h)
			var ids []string
			for i, b := range tt.before {
				id, err := b(f)
				if err != "" {
					t.Fatalf("run %d before: %s", i+1, err)
				}
				ids = append(ids, id)
			}
			h.Lock()
			from, starts := len(h.Log), len(srv.Starts)
			h.Unlock()
			err := tt.run(f, ids)
			if tt.err == "" && err != "" || !strings.Contains(err, tt.err) {
				t.Errorf("error %q, want %q", err, tt.err)
			}
			h.Lock()
			log := append([]string(nil), h.Log[from:]...)
			gotStarts := append([]string(nil), srv.Starts[starts:]...)
			h.Unlock()
			for _, o := range tt.order {
				a, b := indexOf(log, o[0]), indexOf(log, o[1])
				if a < 0 || b < 0 || a > b {
					t.Errorf("%q (line %d) must come before %q (line %d):\n%s", o[0], a, o[1], b, strings.Join(hostChanges(log), "\n"))
				}
			}
			if strings.Join(gotStarts, "\n") != strings.Join(tt.starts, "\n") {
				t.Errorf("server starts:\n%s\nwant:\n%s", strings.Join(gotStarts, "\n"), strings.Join(tt.starts, "\n"))
			}
			got := state{sizeKB: srv.SizeKB, pages: srv.Pages, gig: h.NodePages(1 << 20)[0], def: h.NodePages(2048)[0]}
			_, got.boot = h.Files[tmpfiles]
			if !srv.Up {
				t.Errorf("the server is down")
			}
			if got != tt.want {
				t.Errorf("host %+v, want %+v", got, tt.want)
			}
		})
	}
}

// hostChanges are the log lines that change the host.
func hostChanges(log []string) []string {
	var out []string
	for _, l := range log {
		for _, p := range []string{"write ", "remove ", "sysctl ", "sysfs ", "service "} {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return out
}

func indexOf(lines []string, s string) int {
	for i, l := range lines {
		if l == s {
			return i
		}
	}
	return -1
}
