package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/rollout"
	"github.com/pgtune/pgtune/engine/transport"
)

// mark is an in-memory module for the rollout tests: every host drifts
// until applied; Apply fails on the hosts in fail. It records the order of
// checks and applies across hosts.
type mark struct {
	mu      sync.Mutex
	fail    map[string]bool
	done    map[string]bool
	events  []string
	applied []string
}

func newMark(fail ...string) *mark {
	m := &mark{fail: map[string]bool{}, done: map[string]bool{}}
	for _, h := range fail {
		m.fail[h] = true
	}
	return m
}

func (*mark) Name() string       { return "mark" }
func (*mark) Requires() []string { return nil }
func (*mark) NewParams() any     { return &struct{}{} }
func (*mark) Validate(any) error { return nil }

func (m *mark) Check(_ context.Context, t *engine.Target, _ any) (*plan.ModulePlan, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, "check "+t.Name)
	p := &plan.ModulePlan{Module: "mark"}
	if !m.done[t.Name] {
		p.Add(plan.Change{Kind: plan.KindAction, Target: "mark", Before: "", After: "done"})
	}
	return p, nil
}

func (m *mark) Apply(_ context.Context, t *engine.Target, _ *plan.ModulePlan) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, "apply "+t.Name)
	m.applied = append(m.applied, t.Name)
	if m.fail[t.Name] {
		return errors.New("mark refused")
	}
	m.done[t.Name] = true
	return nil
}

func (m *mark) Verify(context.Context, *engine.Target, *plan.ModulePlan) error { return nil }

// Manages nothing: mark changes no file and no kernel value.
func (m *mark) Manages(*engine.Target, string, string) bool { return false }

// localFacts is a host with made-up facts (the first profile) whose other
// commands (the host lock's) run on this machine: rollout tests need a
// lock and journal directory per host, not a real kernel or cluster.
type localFacts struct {
	*transport.Local
	fake *fakeHost
}

func (h localFacts) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	if isGather(cmd) || isDiscovery(cmd) {
		return h.fake.Run(ctx, cmd)
	}
	if bytes.HasPrefix(cmd.Stdin, []byte("discover\n")) {
		// This machine's facts, but never its PostgreSQL clusters (other
		// tests start and stop them meanwhile): without the request the
		// gather does no discovery, and the separate one the engine then
		// asks goes to the fake host.
		cmd.Stdin = nil
	}
	return h.Local.Run(ctx, cmd)
}

// fleetApp runs the CLI in-process over hosts h1..h5 (localFacts, each with
// its own state directory), with hosts in unreachable failing to connect.
// It returns the run function and the inventory and playbook paths.
func fleetApp(t *testing.T, m *mark, unreachable ...string) (func(args ...string) (int, jsonReport, string), string, string) {
	t.Helper()
	raw, inv, book := fleetAppWith(t, m, nil, unreachable...)
	return func(args ...string) (int, jsonReport, string) {
		t.Helper()
		code, stdout, stderr := raw(append(args, "--format", "json")...)
		var r jsonReport
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatalf("pgtune %s: exit %d, no JSON report (%v):\n%s\n%s", strings.Join(args, " "), code, err, stdout, stderr)
		}
		return code, r, stderr
	}, inv, book
}

// fleetAppWith is fleetApp with the output as written (any --format) and
// setup, when set, called on each App before it runs (a terminal, stdin).
func fleetAppWith(t *testing.T, m engine.Module, setup func(*App), unreachable ...string) (func(args ...string) (code int, stdout, stderr string), string, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the host lock's commands on this machine as root")
	}
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	work := t.TempDir()
	book := filepath.Join(work, "mark.yml")
	writeFile(t, book, "- hosts: ungrouped\n  policy:\n    mark: {}\n")
	var inv strings.Builder
	inv.WriteString("all:\n  hosts:\n")
	for _, h := range []string{"h1", "h2", "h3", "h4", "h5"} {
		fmt.Fprintf(&inv, "    %s:\n      pgtune_state_dir: %s\n", h, filepath.Join(work, h))
	}
	invPath := filepath.Join(work, "inventory.yml")
	writeFile(t, invPath, inv.String())
	transcript := []byte(profiles[0].transcript())
	log := &commandLog{path: filepath.Join(t.TempDir(), "fake.log")}
	return func(args ...string) (int, string, string) {
		t.Helper()
		app, stdout, stderr := testApp(m)
		app.Dial = func(_ context.Context, h *inventory.Host) (transport.Transport, error) {
			if slices.Contains(unreachable, h.Name) {
				return nil, errors.New("connection refused")
			}
			return localFacts{Local: transport.NewLocal(), fake: &fakeHost{name: h.Name, transcript: transcript, log: log}}, nil
		}
		if setup != nil {
			setup(app)
		}
		code := app.Run(args)
		return code, stdout.String(), stderr.String()
	}, invPath, book
}

func statuses(r jsonReport) map[string]string {
	out := map[string]string{}
	for _, h := range r.Hosts {
		out[h.Name] = h.Status
	}
	return out
}

func TestRolloutBudget(t *testing.T) {
	tests := []struct {
		name        string
		flags       []string
		fail        []string
		unreachable []string
		wantApplied []string
		wantCode    int
		wantStopped string // in stderr; "" when the rollout ran to the end
	}{
		{"failed canary stops everything", []string{"--serial", "1,100%", "--max-fail-percentage", "100"}, []string{"h1"}, nil,
			[]string{"h1"}, 1, "every host of batch 1 failed (1 of 1), whatever the failure budget"},
		{"unreachable counts against the budget over the whole run", []string{"--serial", "2", "--max-fail-percentage", "20"}, []string{"h3"}, []string{"h2"},
			[]string{"h1", "h3", "h4"}, 1, "2 of 5 hosts failed (40.0%), more than max_fail_percentage 20%"},
		{"100% lets every batch run", []string{"--serial", "2", "--max-fail-percentage", "100"}, []string{"h2", "h4"}, nil,
			[]string{"h1", "h2", "h3", "h4", "h5"}, 1, ""},
		{"0% stops at the first failure", []string{"--serial", "2", "--max-fail-percentage", "0"}, []string{"h2"}, nil,
			[]string{"h1", "h2"}, 1, "1 of 5 hosts failed (20.0%), more than max_fail_percentage 0%"},
		{"any_errors_fatal", []string{"--serial", "2", "--any-errors-fatal"}, []string{"h2"}, nil,
			[]string{"h1", "h2"}, 1, "any_errors_fatal: 1 host failed"},
		{"no failure, list longer than the fleet", []string{"--serial", "1,1,1,1,1,1,1,1"}, nil, nil,
			[]string{"h1", "h2", "h3", "h4", "h5"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMark(tt.fail...)
			run, inv, book := fleetApp(t, m, tt.unreachable...)
			code, r, stderr := run(append([]string{"apply", "-i", inv, "--yes", "--forks", "1", book}, tt.flags...)...)
			if code != tt.wantCode || !slices.Equal(m.applied, tt.wantApplied) {
				t.Errorf("exit %d, applied %v; want exit %d, applied %v\n%s", code, m.applied, tt.wantCode, tt.wantApplied, stderr)
			}
			if tt.wantStopped == "" && strings.Contains(stderr, "rollout stopped") || !strings.Contains(stderr, tt.wantStopped) {
				t.Errorf("stderr does not say %q:\n%s", tt.wantStopped, stderr)
			}
			st := statuses(r)
			for _, h := range []string{"h1", "h2", "h3", "h4", "h5"} {
				touched := slices.Contains(m.applied, h) || slices.Contains(tt.unreachable, h)
				if !touched && st[h] != "failed" {
					t.Errorf("%s never reached: status %s, want failed (not reached)", h, st[h])
				}
			}
		})
	}
}

func TestRolloutBatchesInOrderAndResume(t *testing.T) {
	m := newMark("h1")
	run, inv, book := fleetApp(t, m)
	code, r, stderr := run("apply", "-i", inv, "--yes", "--serial", "1,50%", book)
	if code != 1 || statuses(r)["h2"] != "failed" || !strings.Contains(stderr, "--resume") {
		t.Fatalf("failed canary: exit %d, %v\n%s", code, statuses(r), stderr)
	}
	for _, h := range r.Hosts {
		if h.Name != "h1" && (h.Error == nil || !strings.HasPrefix(*h.Error, "not reached: the rollout stopped: every host of batch 1 failed")) {
			t.Errorf("%s: error %v, want not reached", h.Name, h.Error)
		}
	}
	// The operator fixes h1 and resumes: all batches run, each applied
	// before the next is checked.
	delete(m.fail, "h1")
	m.events = nil
	code, r, stderr = run("apply", "--resume", "--yes", "--forks", "5")
	if code != 0 {
		t.Fatalf("resume: exit %d, %v\n%s", code, statuses(r), stderr)
	}
	// Batches of 1, 2, 2 (50% of 5, rounded down): every apply of a batch
	// comes before any check of the next.
	batches := [][]string{{"h1"}, {"h2", "h3"}, {"h4", "h5"}}
	pos := func(ev string) int { return slices.Index(m.events, ev) }
	for i := 0; i+1 < len(batches); i++ {
		for _, a := range batches[i] {
			for _, c := range batches[i+1] {
				if pos("apply "+a) < 0 || pos("apply "+a) > pos("check "+c) {
					t.Errorf("batch %d's apply %s came after batch %d's check %s: %v", i+1, a, i+2, c, m.events)
				}
			}
		}
	}
	dir, _ := rollout.Dir()
	st, err := rollout.Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Attempts) != 2 || st.Status != rollout.Finished {
		t.Errorf("state: %d attempts, %s", len(st.Attempts), st.Status)
	}
	for _, h := range st.Hosts {
		if h.State != rollout.Verified || len(h.Planned) != 1 {
			t.Errorf("%s: %s with plan %v; want verified with its plan", h.Name, h.State, h.Planned)
		}
	}
	// A third resume has nothing to do: the run finished, every host
	// verified. --resume alone skips finished runs; named, it says so.
	m.events = nil
	for _, args := range [][]string{{"--resume"}, {"--resume", st.ID}} {
		code, stderr := runBare(m, append([]string{"apply", "--yes"}, args...)...)
		if code != 1 || !strings.Contains(stderr, "nothing to resume") || len(m.events) != 0 {
			t.Errorf("apply %v of a finished run: exit %d, events %v\n%s", args, code, m.events, stderr)
		}
	}
}

// testApp is the CLI in-process with module m alone, no stdin and no
// terminal; its output goes to the buffers returned. The caller sets Dial.
func testApp(m engine.Module) (*App, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	app := newApp()
	if m != nil { // nil: pgtune's own modules
		app.Modules = []engine.Module{m}
	}
	app.Stdin = strings.NewReader("")
	app.Stdout, app.Stderr = &stdout, &stderr
	app.IsTerminal = func() bool { return false }
	return app, &stdout, &stderr
}

// TestApplyNotConfirmedLeavesNoRun: an apply nobody confirmed (no --yes
// and no terminal to ask) changes nothing and leaves no run state: a
// bare --resume then continues the older stopped run, not it.
func TestApplyNotConfirmedLeavesNoRun(t *testing.T) {
	m := newMark("h1")
	run, inv, book := fleetAppWith(t, m, nil)
	if code, _, stderr := run("apply", "-i", inv, "--yes", "--serial", "1,50%", book); code != 1 || !strings.Contains(stderr, "--resume") {
		t.Fatalf("failed canary: exit %d\n%s", code, stderr)
	}
	dir, _ := rollout.Dir()
	first, err := rollout.Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	m.events = nil
	code, _, stderr := run("apply", "-i", inv, "--serial", "1,50%", book)
	if code != 1 || !strings.Contains(stderr, "--yes") || slices.ContainsFunc(m.events, func(e string) bool { return strings.HasPrefix(e, "apply ") }) {
		t.Fatalf("apply without --yes: exit %d, events %v\n%s", code, m.events, stderr)
	}
	if latest, err := rollout.Load(dir, ""); err != nil || latest.ID != first.ID {
		t.Fatalf("latest run after an unconfirmed apply: %v, %v; want %s alone", latest, err, first.ID)
	}
	delete(m.fail, "h1")
	if code, _, stderr := run("apply", "--resume", "--yes"); code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	if st, err := rollout.Load(dir, first.ID); err != nil || len(st.Attempts) != 2 || st.Status != rollout.Finished {
		t.Errorf("bare --resume did not continue %s: %+v, %v", first.ID, st, err)
	}
}

// TestAnyErrorsFatalFlagOverridesPlay: --any-errors-fatal=false turns off
// the play's any_errors_fatal (it could only turn it on), and a resume
// keeps whichever the run was started with.
func TestAnyErrorsFatalFlagOverridesPlay(t *testing.T) {
	for _, tc := range []struct {
		name       string
		play, want bool
		f          fleetOptions
	}{
		{"not given: the play's", true, true, fleetOptions{}},
		{"=false turns the play's off", true, false, fleetOptions{anyErrorsFatal: false, anyErrorsFatalSet: true}},
		{"=true turns it on", false, true, fleetOptions{anyErrorsFatal: true, anyErrorsFatalSet: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.f.overrides(playbook.Rollout{AnyErrorsFatal: tc.play})
			if err != nil || r.AnyErrorsFatal != tc.want {
				t.Errorf("any_errors_fatal %v, %v; want %v", r.AnyErrorsFatal, err, tc.want)
			}
			// Saved with the run and taken back by a resume (no flag).
			o := &options{given: map[string]bool{}}
			st := &rollout.State{Flags: tc.f.savedFlags()}
			if err := o.resumeFrom(st); err != nil {
				t.Fatal(err)
			}
			if r, _ := o.fleet.overrides(playbook.Rollout{AnyErrorsFatal: tc.play}); r.AnyErrorsFatal != tc.want {
				t.Errorf("resumed: any_errors_fatal %v, want %v", r.AnyErrorsFatal, tc.want)
			}
		})
	}
}

// TestBatchHeadersNameTheWave: a batch holding several members of one
// cluster is planned, shown (and with --confirm-each-batch asked) wave
// by wave; a later wave's header and question say which wave it is, not
// the batch again as if it were a new one.
func TestBatchHeadersNameTheWave(t *testing.T) {
	app, stdout, _ := testApp(nil)
	o := &options{format: "text", given: map[string]bool{}}
	view := app.newRolloutView(o, &engine.Runner{}, 4)
	view.beforeWave(rollout.Batch{Number: 2, Of: 3, Wave: 1, Hosts: []string{"s1", "q1", "lone"}})
	view.beforeWave(rollout.Batch{Number: 2, Of: 3, Wave: 2, Hosts: []string{"p"}})
	if want := "BATCH 2 of 3 (3 hosts)\nBATCH 2 of 3, wave 2 (1 host)\n"; stdout.String() != want {
		t.Errorf("headers %q, want %q", stdout.String(), want)
	}
	if got := batchName(rollout.Batch{Number: 2, Of: 3, Wave: 2}); got != "batch 2 of 3, wave 2" {
		t.Errorf("batchName = %q", got)
	}
}
