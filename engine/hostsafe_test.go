package engine

import (
	"bytes"
	"context"
	"errors"
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

// cannedHost answers the facts gather with a recorded VM's output, takes
// the state directory and the host lock as a healthy host would (the lock
// holder runs until released: internal/fakehost), and fails every other
// command, as a host without PostgreSQL would.
func cannedHost(gather []byte) *fakehost.Host {
	h := fakehost.New()
	h.Other = func(_ context.Context, cmd transport.Command) (transport.Result, error) {
		if len(cmd.Args) > 2 && strings.Contains(cmd.Args[2], "/proc/meminfo") {
			return transport.Result{Stdout: gather}, nil
		}
		res := transport.Result{ExitCode: 1}
		return res, &transport.ExitError{Command: cmd.String(), Result: res}
	}
	return h
}

// panicky is a module with a bug that some hosts trip: in check on one
// host, in apply on another.
type panicky struct{ inCheck, inApply string }

func (panicky) Name() string       { return "panicky" }
func (panicky) Requires() []string { return nil }
func (panicky) NewParams() any     { return &struct{}{} }
func (panicky) Validate(any) error { return nil }

func (m panicky) Check(_ context.Context, t *Target, _ any) (*plan.ModulePlan, error) {
	if t.Name == m.inCheck {
		var sizes []int
		_ = sizes[t.Facts.NUMANodes+5] // index out of range
	}
	p := &plan.ModulePlan{Module: m.Name()}
	p.Add(plan.Change{Module: m.Name(), Target: "setting", Before: "a", After: "b"})
	return p, nil
}

func (m panicky) Apply(_ context.Context, t *Target, _ *plan.ModulePlan) error {
	if t.Name == m.inApply {
		panic("unexpected " + t.Name)
	}
	return nil
}

func (panicky) Verify(context.Context, *Target, *plan.ModulePlan) error { return nil }

func TestPanicFailsOnlyItsHost(t *testing.T) {
	gather, err := os.ReadFile("facts/testdata/gather-debian-vm.txt")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Parse("inv.yml", []byte("all:\n  hosts:\n    db1:\n    db2:\n    db3:\n    db4:\n"))
	if err != nil {
		t.Fatal(err)
	}
	mods, _ := Registry(panicky{inCheck: "db2", inApply: "db3"})
	book := &playbook.Playbook{File: "p.yml", Plays: []*playbook.Play{{
		Name: "p", Hosts: "all", Sections: []string{"panicky"}, Policy: map[string]any{"panicky": &struct{}{}},
	}}}
	var logs bytes.Buffer
	r := &Runner{
		Modules: mods, Forks: 4, RunID: "test",
		Log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Dial: func(_ context.Context, h *inventory.Host) (transport.Transport, error) {
			if h.Name == "db4" {
				var m map[string]int
				m["connect"]++ // assignment to a nil map
			}
			return cannedHost(gather), nil
		},
	}
	hosts, err := Targets(inv, book, "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Plan(context.Background(), inv, book, hosts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The Done hook (a rollout's run state) sees a panic as the host's
	// error, never the host as verified before the panic is recovered.
	var mu sync.Mutex
	done := map[string]HostResult{}
	s.Apply(WithApplyHooks(context.Background(), ApplyHooks{Done: func(res HostResult) {
		mu.Lock()
		defer mu.Unlock()
		if _, twice := done[res.Name]; twice {
			t.Errorf("%s: Done told twice", res.Name)
		}
		done[res.Name] = res
	}}))
	rep := s.Report("apply")
	if res, ok := done["db3"]; !ok || res.Err == nil || !strings.Contains(res.Err.Error(), "internal error") || !res.Started {
		t.Errorf("Done saw db3, whose apply panicked, as %+v (told: %t); want its internal error, started", res, ok)
	}
	if len(done) != 4 { // those that failed to plan (db2, db4) too
		t.Errorf("Done told of %d hosts, want 4: %v", len(done), done)
	}
	if res := done["db1"]; res.Err != nil || !res.Changed {
		t.Errorf("Done saw db1 as %+v, want verified and changed", res)
	}

	want := map[string]struct {
		status report.Status
		err    string
	}{
		"db1": {status: report.Changed}, // applied while the others panicked
		"db2": {status: report.Failed, err: "db2: internal error: runtime error: index out of range [6] with length 0 (a bug in pgtune; the stack is in the debug log, -v)"},
		"db3": {status: report.Failed, err: "db3: internal error: unexpected db3 (a bug in pgtune; the stack is in the debug log, -v)"},
		"db4": {status: report.Failed, err: "db4: internal error: assignment to entry in nil map (a bug in pgtune; the stack is in the debug log, -v)"},
	}
	for _, h := range rep.Hosts {
		w := want[h.Name]
		got := ""
		if h.Error != nil {
			got = *h.Error
		}
		if h.Status != w.status || got != w.err {
			t.Errorf("%s: %s %q, want %s %q", h.Name, h.Status, got, w.status, w.err)
		}
	}
	if len(rep.Hosts) != 4 {
		t.Fatalf("report has %d hosts", len(rep.Hosts))
	}
	// `pgtune facts` runs hosts through the same guard.
	for _, hf := range r.Facts(context.Background(), hosts) {
		if (hf.Name == "db4") != (hf.Error != nil) || (hf.Name == "db4" && *hf.Error != want["db4"].err) {
			t.Errorf("facts %s: error %v", hf.Name, hf.Error)
		}
		if hf.Name != "db4" && (hf.Facts == nil || hf.Facts.MemTotal == 0) {
			t.Errorf("facts %s: %+v", hf.Name, hf.Facts)
		}
	}
	for _, frame := range []string{"engine.panicky.Check", "engine.panicky.Apply", "engine.(*Session).runHost"} {
		if !strings.Contains(logs.String(), frame) {
			t.Errorf("debug log lacks the stack frame %s:\n%s", frame, logs.String())
		}
	}
}

func TestHostFault(t *testing.T) {
	tooLarge := &transport.OutputTooLargeError{Command: "cat", Stream: "stdout", Limit: 1}
	_, rangeErr := facts.ParseInt("stat size", "-2", 0, 10)
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{err: tooLarge, want: true},
		{err: errors.Join(errors.New("gather facts"), tooLarge), want: true},
		{err: rangeErr, want: true},
		{err: transport.ErrConnectionLost, want: false},
		{err: errors.New("connection reset"), want: false},
	} {
		if got := hostFault(tc.err); got != tc.want {
			t.Errorf("hostFault(%v) = %v", tc.err, got)
		}
	}
}
