package engine

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/fakehost"
)

// reader is fileSetter declaring the files its check reads: appConf,
// which it plans, and one it only looks at.
type reader struct{ fileSetter }

const lookConf = "/etc/look.conf"

func (reader) FactSet() facts.Set {
	return facts.Set{Name: "setter", Files: []string{appConf, lookConf}}
}

func (m reader) Check(ctx context.Context, t *Target, params any) (*plan.ModulePlan, error) {
	if _, _, err := t.ReadFile(ctx, lookConf); err != nil {
		return nil, err
	}
	return m.fileSetter.Check(ctx, t, params)
}

// counting counts a transport's commands, and its file reads apart.
type counting struct {
	transport.Transport
	mu          sync.Mutex
	runs, reads int
}

func (c *counting) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	c.mu.Lock()
	c.runs++
	if cmd.Op == transport.OpReadFile {
		c.reads++
	}
	c.mu.Unlock()
	return c.Transport.Run(ctx, cmd)
}

// prefetchHost is a healthy fake host holding appConf ("old") and no
// lookConf; its gather answers with extra (the files' lines, or none).
func prefetchHost(t *testing.T, extra string) *fakehost.Host {
	gather, err := os.ReadFile("facts/testdata/gather-debian-vm.txt")
	if err != nil {
		t.Fatal(err)
	}
	h := newFakeHost()
	h.Files[appConf] = "old\n"
	h.Other = cannedHost(append(gather, extra...)).Other
	return h
}

// prefetched is what the gather prints for prefetchHost's two files.
const prefetched = "ZF 4 /etc/app.conf\nZL old\nZE\nZN /etc/look.conf\n"

func planWith(t *testing.T, tr transport.Transport, mods map[string]Module) *Session {
	t.Helper()
	inv, err := inventory.Parse("inv.yml", []byte("all:\n  hosts:\n    db1:\n"))
	if err != nil {
		t.Fatal(err)
	}
	book := &playbook.Playbook{File: "p.yml", Plays: []*playbook.Play{{
		Name: "p", Hosts: "all", Sections: []string{"setter"}, Policy: map[string]any{"setter": &struct{}{}},
	}}}
	r := &Runner{Modules: mods, Forks: 1, RunID: "20261130T190000Z-prefe0", Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Dial: func(context.Context, *inventory.Host) (transport.Transport, error) { return tr, nil }}
	hosts, err := Targets(inv, book, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Plan(context.Background(), inv, book, hosts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCheckReadsFilesInOneRoundTrip: the files a module declares come
// with the facts, so its check reads none on its own: as many round
// trips fewer as it reads files, and the same plan.
func TestCheckReadsFilesInOneRoundTrip(t *testing.T) {
	mods, _ := Registry(reader{})
	var plans []string
	var runs, reads []int
	for _, extra := range []string{"", prefetched} {
		c := &counting{Transport: prefetchHost(t, extra)}
		s := planWith(t, c, mods)
		rep := s.Report("check")
		s.Close()
		if h := rep.Hosts[0]; h.Status != report.Drift || len(h.Changes) != 1 || h.Changes[0].Before != "old\n" {
			t.Fatalf("prefetched %v: %+v; want appConf's change from old", extra != "", h)
		}
		plans = append(plans, rep.Hosts[0].Changes[0].After)
		runs, reads = append(runs, c.runs), append(reads, c.reads)
	}
	if reads[0] != 2 || reads[1] != 0 {
		t.Errorf("file reads: %d without the files in the gather, %d with; want 2 and 0", reads[0], reads[1])
	}
	if runs[0]-runs[1] != 2 {
		t.Errorf("round trips: %d without, %d with; want 2 fewer", runs[0], runs[1])
	}
	if plans[0] != plans[1] {
		t.Errorf("plans differ: %q, %q", plans[0], plans[1])
	}
}

// TestReadCache: a dry run's target answers from the prefetched files
// until it changes the host; a journaled target (apply) never does, and
// apply's re-check reads the host.
func TestReadCache(t *testing.T) {
	ctx := context.Background()
	h := prefetchHost(t, "")
	// What the gather read; the host has moved on since ("new").
	h.Files[appConf] = "new\n"
	f := &facts.Facts{Files: map[string]facts.PrefetchedFile{
		appConf:  {Exists: true, Data: []byte("old\n")},
		lookConf: {},
	}}
	read := func(tg *Target, p string) (string, bool) {
		t.Helper()
		b, ok, err := tg.ReadFile(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b), ok
	}
	for _, tc := range []struct {
		name   string
		change func(tg *Target) error
	}{
		{"write", func(tg *Target) error {
			return tg.WriteFile(ctx, "/etc/other.conf", []byte("x\n"), transport.WriteOptions{})
		}},
		{"remove", func(tg *Target) error { return tg.RemoveFile(ctx, "/etc/before.conf") }},
		{"sysctl", func(tg *Target) error { return tg.SetSysctl(ctx, "vm.overcommit_ratio", "60") }},
		{"sysfs", func(tg *Target) error { return tg.writeSysfs(ctx, thpPath, "never") }},
		{"service", func(tg *Target) error { return tg.Service(ctx, "", "daemon-reload") }},
		{"live", func(tg *Target) error {
			return tg.SetLive(ctx, "x:y", "1", func(context.Context) error { return nil })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := &Target{Name: "fake", Transport: h, Facts: f, cache: newReadCache(f)}
			h.Log = nil
			if got, ok := read(tg, appConf); !ok || got != "old\n" {
				t.Errorf("cached read: %q %v, want the prefetched old", got, ok)
			}
			if got, ok := read(tg, lookConf); ok || got != "" {
				t.Errorf("cached absent file: %q %v", got, ok)
			}
			// The caller may change what it was given.
			b, _, _ := tg.ReadFile(ctx, appConf)
			b[0] = 'X'
			if got, _ := read(tg, appConf); got != "old\n" {
				t.Errorf("the cache was changed through a read: %q", got)
			}
			if len(h.Log) != 0 {
				t.Errorf("cached reads reached the host: %q", h.Log)
			}
			if err := tc.change(tg); err != nil {
				t.Fatal(err)
			}
			if got, ok := read(tg, appConf); !ok || got != "new\n" {
				t.Errorf("after a change: %q %v, want the host's new", got, ok)
			}
			if !strings.Contains(strings.Join(h.Log, "\n"), "read "+appConf) {
				t.Errorf("the read after a change did not reach the host: %q", h.Log)
			}
		})
	}
	tg := &Target{Name: "fake", Transport: h, Facts: f, cache: newReadCache(f), Journal: NewJournal("20261130T190000Z-prefe1", "fake", testState, h, false)}
	if got, _ := read(tg, appConf); got != "new\n" {
		t.Errorf("a journaled target read %q, want the host's new", got)
	}

	// Through the runner: the plan comes from the gather (old), apply
	// re-checks on the host (new) and refuses.
	mods, _ := Registry(reader{})
	h = prefetchHost(t, prefetched)
	h.Files[appConf] = "new\n"
	s := planWith(t, h, mods)
	defer s.Close()
	if c := s.Report("check").Hosts[0].Changes; len(c) != 1 || c[0].Before != "old\n" {
		t.Fatalf("plan %+v; want from the prefetched old", c)
	}
	s.Apply(ctx)
	got := s.Report("apply").Hosts[0]
	if got.Status != report.Failed || got.Error == nil || !strings.Contains(*got.Error, "the host changed since the plan") {
		t.Errorf("apply: %s %v; want refused: the re-check reads the host", got.Status, got.Error)
	}
}

// A dry run's Run takes the answer the gather ran ahead for the very same
// command (facts/prerun.go), once; other arguments, other privileges,
// stdin, or a journal (apply) ask the host.
func TestRunTakesWhatRanAhead(t *testing.T) {
	ctx := context.Background()
	args := []string{"sh", "-c", "read state", "sh", "42"}
	for _, tc := range []struct {
		name    string
		run     func(tg *Target) (transport.Result, error)
		journal bool
		hits    int
	}{
		{"same command", func(tg *Target) (transport.Result, error) { return tg.Run(ctx, args...) }, false, 1},
		{"other arguments", func(tg *Target) (transport.Result, error) { return tg.Run(ctx, "sh", "-c", "read state", "sh", "43") }, false, 0},
		{"with stdin", func(tg *Target) (transport.Result, error) { return tg.RunInput(ctx, []byte("x"), args...) }, false, 0},
		{"journaled", func(tg *Target) (transport.Result, error) { return tg.Run(ctx, args...) }, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := &facts.Ran{}
			ran.Keep(args, true, transport.Result{Stdout: []byte("ahead")})
			c := &counting{Transport: prefetchHost(t, "")}
			tg := &Target{Name: "fake", Transport: c, Become: true, Facts: &facts.Facts{Ran: ran}}
			if tc.journal {
				tg.Journal = NewJournal("20261202T110000Z-ahead1", "fake", testState, c, false)
			}
			for i := 0; i < 2; i++ {
				res, _ := tc.run(tg)
				if hit := string(res.Stdout) == "ahead"; hit != (i < tc.hits) {
					t.Errorf("run %d: %q; want the answer run ahead %v", i, res.Stdout, i < tc.hits)
				}
			}
			if want := 2 - tc.hits; c.runs != want {
				t.Errorf("%d runs reached the host; want %d", c.runs, want)
			}
		})
	}
	// Run with the other privileges asks the host.
	ran := &facts.Ran{}
	ran.Keep(args, true, transport.Result{Stdout: []byte("ahead")})
	c := &counting{Transport: prefetchHost(t, "")}
	tg := &Target{Name: "fake", Transport: c, Become: false, Facts: &facts.Facts{Ran: ran}}
	if res, _ := tg.Run(ctx, args...); string(res.Stdout) == "ahead" || c.runs != 1 {
		t.Errorf("without become: %q, %d runs; want the host asked", res.Stdout, c.runs)
	}
}
