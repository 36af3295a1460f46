package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/rollout"
	"github.com/pgtune/pgtune/engine/transport"
)

// interruptingApp runs the CLI in-process over fleetApp's hosts and sends
// sig to this process from the run's first connection: with serial that
// is the pre-batch fact gather's. The connection is held until the run
// cancels it, so the signal is known to have reached the run, and
// cancelled reports whether it did (false: the deadline passed).
func interruptingApp(t *testing.T, m *mark, sig syscall.Signal) (run func(args ...string) (int, string), cancelled func() bool) {
	t.Helper()
	transcript := []byte(profiles[0].transcript())
	log := &commandLog{path: filepath.Join(t.TempDir(), "fake.log")}
	var once sync.Once
	var cut bool
	dial := func(ctx context.Context, h *inventory.Host) (transport.Transport, error) {
		first := false
		once.Do(func() { first = true })
		if !first {
			return localFacts{Local: transport.NewLocal(), fake: &fakeHost{name: h.Name, transcript: transcript, log: log}}, nil
		}
		if err := syscall.Kill(os.Getpid(), sig); err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			cut = true
			return nil, ctx.Err()
		case <-time.After(time.Minute): // a deadline, not a wait: the signal cuts it
			return nil, errors.New("the signal did not cut the connection")
		}
	}
	return func(args ...string) (int, string) {
			t.Helper()
			var stdout, stderr bytes.Buffer
			app := newApp()
			app.Modules = []engine.Module{m}
			app.Stdin = strings.NewReader("")
			app.Stdout, app.Stderr = &stdout, &stderr
			app.IsTerminal = func() bool { return false }
			app.Dial = dial
			code := app.Run(append(args, "--format", "json"))
			return code, stderr.String()
		}, func() bool {
			return cut
		}
}

// TestRolloutInterruptedDuringGather: Ctrl-C (SIGINT or SIGTERM) while a
// serial apply reads every host's facts before its first batch stops the
// run there: exit 130, no host planned or applied, and no run state for a
// run that never started. Interrupted the same way, a resume leaves its
// run's state as it was and can be resumed again.
func TestRolloutInterruptedDuringGather(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			m := newMark("h1")
			normal, inv, book := fleetApp(t, m)
			dir, err := rollout.Dir()
			if err != nil {
				t.Fatal(err)
			}

			run, cancelled := interruptingApp(t, m, sig)
			code, stderr := run("apply", "-i", inv, "--yes", "--serial", "2", book)
			if !cancelled() {
				t.Fatalf("the gather went on after the signal\n%s", stderr)
			}
			if code != exitInterrupted || len(m.events) != 0 {
				t.Errorf("exit %d, module calls %v; want exit %d and no host planned or applied\n%s", code, m.events, exitInterrupted, stderr)
			}
			if !strings.Contains(stderr, "interrupted while reading the hosts' facts") || !strings.Contains(stderr, "no host was changed") {
				t.Errorf("stderr does not say the run was interrupted and nothing changed:\n%s", stderr)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a run that never started left run state: %v", entries)
			}

			// A run stopped by its failed canary, then resumed and
			// interrupted during the gather: its state is untouched.
			code, _, stderr = normal("apply", "-i", inv, "--yes", "--serial", "1,100%", book)
			if code != 1 || !strings.Contains(stderr, "--resume") {
				t.Fatalf("failed canary: exit %d\n%s", code, stderr)
			}
			st, err := rollout.Load(dir, "")
			if err != nil {
				t.Fatal(err)
			}
			before := readString(t, st.Path())
			delete(m.fail, "h1")
			m.events, m.applied = nil, nil
			run, cancelled = interruptingApp(t, m, sig)
			code, stderr = run("apply", "--resume", "--yes")
			if !cancelled() || code != exitInterrupted || len(m.events) != 0 {
				t.Errorf("interrupted resume: exit %d, module calls %v; want exit %d and none\n%s", code, m.events, exitInterrupted, stderr)
			}
			if !strings.Contains(stderr, "--resume "+st.ID) {
				t.Errorf("stderr does not say how to continue run %s:\n%s", st.ID, stderr)
			}
			if after := readString(t, st.Path()); after != before {
				t.Errorf("an interrupted resume changed the run state:\n%s\nwas:\n%s", after, before)
			}

			// The run resumes after all: every host applied once.
			code, _, stderr = normal("apply", "--resume", "--yes")
			if code != 0 || len(m.applied) != 5 {
				t.Errorf("resume: exit %d, applied %v; want 0 and all 5 hosts\n%s", code, m.applied, stderr)
			}
		})
	}
}
