package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
	"github.com/pgtune/pgtune/modules/registry"
	"github.com/pgtune/pgtune/playbooks"
)

var capture = flag.Bool("capture", false, "rewrite "+recordingFile+" from a live plan of this machine")

// recordingFile is a live check of this machine (localhost over the local
// transport, a fresh initdb cluster, the default policy), as TestPlanReplay
// recorded it with -capture.
const recordingFile = "testdata/plan-localhost.json"

// fleet is an inventory of n hosts that all look like the recorded one.
func fleet(tb testing.TB, n int, rec *recording) *inventory.Inventory {
	tb.Helper()
	y := fmt.Sprintf(`all:
  vars:
    connection: local
    pg_data: %q
    pg_bin: %q
    pgtune_state_dir: %q
  hosts:
    db[0000:%04d]:
`, rec.PGData, rec.PGBin, rec.StateDir, n-1)
	inv, err := inventory.Parse("fleet.yml", []byte(y))
	if err != nil {
		tb.Fatal(err)
	}
	if len(inv.Hosts) != n {
		tb.Fatalf("fleet: %d hosts, want %d", len(inv.Hosts), n)
	}
	return inv
}

func defaultBook(tb testing.TB) (map[string]engine.Module, *playbook.Playbook) {
	tb.Helper()
	mods, reg := engine.Registry(registry.All()...)
	book, err := playbook.Parse(playbooks.DefaultName, playbooks.Default, reg)
	if err != nil {
		tb.Fatal(err)
	}
	return mods, book
}

// heldHugePages is the expression for the huge pages other processes
// hold (in use or reserved), in bytes.
const heldHugePages = "(facts.hugepages_total - facts.hugepages_free + facts.hugepages_rsvd) * facts.hugepage_size"

// defaultBookWithoutPreflights is the default policy with hugepages'
// min_available 0 and overcommit's max_committed 1: a live check of this
// machine is then no error path whatever its free memory or load (the
// preflights read nothing more from the host when they pass). Nor
// whatever huge pages other processes hold: the pool grows by them and
// pgconf sizes the cluster to the rest (hugepages refuses a pool below
// them, and a segment the size of the whole pool would not fit beside
// them). Where nothing else holds huge pages, the plan is the default's.
func defaultBookWithoutPreflights(tb testing.TB) (map[string]engine.Module, *playbook.Playbook) {
	tb.Helper()
	mods, reg := engine.Registry(registry.All()...)
	s := string(playbooks.Default)
	for _, kv := range [][2]string{
		{"\n    hugepages:\n      pool: \"${floor(facts.mem_total * 0.25)}\"\n",
			"\n    hugepages:\n      pool: \"${floor(facts.mem_total * 0.25) + " + heldHugePages + "}\"\n      min_available: 0\n"},
		{"\n    pgconf:\n", "\n    pgconf:\n      pool: \"${hugepages.pool - " + heldHugePages + "}\"\n"},
		{"\n    overcommit:\n", "\n    overcommit:\n      max_committed: 1\n"},
	} {
		if strings.Count(s, kv[0]) != 1 {
			tb.Fatalf("the default playbook: %q is not there once", kv[0])
		}
		s = strings.Replace(s, kv[0], kv[1], 1)
	}
	book, err := playbook.Parse(playbooks.DefaultName, []byte(s), reg)
	if err != nil {
		tb.Fatal(err)
	}
	return mods, book
}

func runner(mods map[string]engine.Module, dial engine.DialFunc) *engine.Runner {
	return &engine.Runner{
		Modules:     mods,
		Forks:       20, // the CLI's default
		Dial:        dial,
		Log:         slog.New(slog.NewTextHandler(io.Discard, nil)),
		RunID:       "20260714T080000Z-bench0",
		HostTimeout: time.Minute,
	}
}

// check is `pgtune check` without the CLI: targets, plan, report.
func check(ctx context.Context, r *engine.Runner, inv *inventory.Inventory, book *playbook.Playbook) (*report.Report, error) {
	hosts, err := engine.Targets(inv, book, "")
	if err != nil {
		return nil, err
	}
	s, err := r.Plan(ctx, inv, book, hosts)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.Report("check"), nil
}

// TestPlanReplay checks what BenchmarkPlan rests on: replaying a live
// plan's commands reproduces the live report exactly. With -capture it
// also rewrites the recording the benchmark replays.
func TestPlanReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("plans against a real PostgreSQL cluster")
	}
	// The live check reads this machine's kernel: it must hold still.
	testhost.WatchKernel(t)
	pg := testhost.Postgres(t)
	mods, book := defaultBookWithoutPreflights(t)
	rec := &recording{PGData: pg.DataDir, PGBin: pg.BinDir, StateDir: filepath.Join(pg.Root, "state")}
	inv := fleet(t, 1, rec)
	live := &recorder{inner: transport.NewLocal()}
	ctx := context.Background()
	want, err := check(ctx, runner(mods, func(context.Context, *inventory.Host) (transport.Transport, error) { return live, nil }), inv, book)
	if err != nil {
		t.Fatal(err)
	}
	if h := want.Hosts[0]; h.Error != nil || (h.Status != report.Drift && h.Status != report.InPolicy) {
		t.Fatalf("live check of this machine: %s %v; a replay of it would measure an error path", h.Status, *h.Error)
	}
	rec.Commands = live.log

	base := newReplayer(rec)
	got, err := check(ctx, runner(mods, func(context.Context, *inventory.Host) (transport.Transport, error) { return base.fork(), nil }), inv, book)
	if err != nil {
		t.Fatal(err)
	}
	var wj, gj bytes.Buffer
	if err := report.WriteJSON(&wj, want); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteJSON(&gj, got); err != nil {
		t.Fatal(err)
	}
	if wj.String() != gj.String() {
		t.Fatalf("replayed report differs from the live one:\nlive:\n%s\nreplay:\n%s", wj.String(), gj.String())
	}
	t.Logf("live check: %s, %d changes, %d commands", want.Hosts[0].Status, len(want.Hosts[0].Changes), len(rec.Commands))

	if *capture {
		b, err := json.MarshalIndent(rec, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(recordingFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(recordingFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// replayRunner is a runner of the default policy whose every host replays
// the recording, with the recording and the playbook.
func replayRunner(tb testing.TB) (*engine.Runner, *recording, *playbook.Playbook) {
	tb.Helper()
	rec, err := loadRecording(recordingFile)
	if err != nil {
		tb.Fatal(err)
	}
	mods, book := defaultBook(tb)
	base := newReplayer(rec)
	return runner(mods, func(context.Context, *inventory.Host) (transport.Transport, error) { return base.fork(), nil }), rec, book
}

// TestRecordingCurrent: the recording BenchmarkPlan replays still
// answers every command a check runs. A change to a host script needs a
// new recording (go test ./bench -run TestPlanReplay -capture); without
// it the benchmark fails, which make test would not show. Replay only:
// no cluster, no kernel, the same on any machine.
func TestRecordingCurrent(t *testing.T) {
	r, rec, book := replayRunner(t)
	rep, err := check(context.Background(), r, fleet(t, 1, rec), book)
	if err != nil {
		t.Fatal(err)
	}
	if h := rep.Hosts[0]; h.Error != nil {
		t.Fatalf("the recorded check no longer replays (re-record with go test ./bench -run TestPlanReplay -capture): %s", *h.Error)
	}
}

// BenchmarkPlan is `pgtune check` over a fleet of 1, 100 and 1000 hosts
// (the CLI's 20 forks) that all answer like the recorded machine: targets,
// facts parsing, every module's check, the report. The transport replays
// the recording, so this is the engine's own cost; ns/host divides it by
// the fleet size and stays flat while planning is linear.
func BenchmarkPlan(b *testing.B) {
	r, rec, book := replayRunner(b)
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("hosts-%d", n), func(b *testing.B) {
			inv := fleet(b, n, rec)
			ctx := context.Background()
			// Measured before the loop, reported after it: the loop's first
			// call resets the timer and with it any metric reported so far.
			retained := retainedKB(b, r, inv, book) / float64(n)
			iters := 0
			for b.Loop() {
				rep, err := check(ctx, r, inv, book)
				if err != nil {
					b.Fatal(err)
				}
				if s := rep.Summary; s.Hosts != n || s.Failed+s.Unreachable != 0 {
					b.Fatalf("summary %+v; first host: %+v", s, rep.Hosts[0])
				}
				iters++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(iters*n), "ns/host")
			b.ReportMetric(retained, "retained-kB/host")
		})
	}
}

// retainedKB is the live heap a planned session holds between check and
// apply (plans, facts, file contents for every host), in kB: what decides
// how large a fleet one controller process can plan at once.
func retainedKB(b *testing.B, r *engine.Runner, inv *inventory.Inventory, book *playbook.Playbook) float64 {
	b.Helper()
	hosts, err := engine.Targets(inv, book, "")
	if err != nil {
		b.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, err := r.Plan(context.Background(), inv, book, hosts)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	s.Close()
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / 1024
}

// BenchmarkPlanLive is the same check of one host for real: this machine
// over the local transport (a process per command, /proc, the postgres
// binary's -C answers) against a fresh cluster. Against BenchmarkPlan it
// shows where a plan's time goes: in the round trips, not the engine.
func BenchmarkPlanLive(b *testing.B) {
	if testing.Short() {
		b.Skip("plans against a real PostgreSQL cluster")
	}
	testhost.LockKernel(b) // reads this machine's kernel, which must hold still
	pg := testhost.Postgres(b)
	// Without the preflights, as TestPlanReplay: their verdicts are this
	// machine's free memory and load, and would fail the check.
	mods, book := defaultBookWithoutPreflights(b)
	rec := &recording{PGData: pg.DataDir, PGBin: pg.BinDir, StateDir: filepath.Join(pg.Root, "state")}
	inv := fleet(b, 1, rec)
	live := &recorder{inner: transport.NewLocal()}
	r := runner(mods, func(context.Context, *inventory.Host) (transport.Transport, error) { return live, nil })
	ctx := context.Background()
	iters := 0
	for b.Loop() {
		live.log = live.log[:0]
		rep, err := check(ctx, r, inv, book)
		if err != nil {
			b.Fatal(err)
		}
		if h := rep.Hosts[0]; h.Error != nil {
			b.Fatalf("live check: %s", *h.Error)
		}
		iters++
	}
	b.ReportMetric(float64(len(live.log)), "commands/host")
	// Where the time went in the last check, slowest command first (only
	// the first lines are shown without -v).
	slices.SortFunc(live.log, func(a, b recorded) int { return cmp.Compare(b.took, a.took) })
	for _, c := range live.log {
		b.Logf("%7.1f ms  %s", float64(c.took.Microseconds())/1000, label(c))
	}
}

// label names a recorded command by its script's first telling line and
// its positional arguments.
func label(c recorded) string {
	if len(c.Args) < 3 || c.Args[0] != "sh" || c.Args[1] != "-c" {
		return short(transport.Join(c.Args))
	}
	first := ""
	for _, l := range strings.Split(c.Args[2], "\n") {
		l = strings.TrimSpace(l)
		if l != "" && l != "export LC_ALL=C" && l != "set -eu" {
			first = l
			break
		}
	}
	if len(first) > 40 {
		first = first[:40] + "…"
	}
	args := ""
	if len(c.Args) > 4 {
		args = transport.Join(c.Args[4:])
	}
	if len(args) > 120 {
		args = args[:120] + "…"
	}
	return first + " | " + args
}
