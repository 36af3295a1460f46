package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/rollout"
	"github.com/pgtune/pgtune/engine/transport"
)

// checkFails is mark whose plan fails on the hosts in fail.
type checkFails struct {
	*mark
	fail map[string]bool
}

func (m checkFails) Check(ctx context.Context, t *engine.Target, p any) (*plan.ModulePlan, error) {
	if m.fail[t.Name] {
		return nil, errors.New("check refused by the test")
	}
	return m.mark.Check(ctx, t, p)
}

// terminal answers the questions with answers, one a line.
func terminal(answers string) func(*App) {
	return func(a *App) {
		a.Stdin = strings.NewReader(answers)
		a.IsTerminal = func() bool { return true }
	}
}

// TestRolloutLaterBatchNotConfirmed: with --confirm-each-batch, batch 1
// confirmed and batch 2 refused, the refusal says batch 2 was not applied
// and batch 1 was, on every host not reached and in the last line, which
// names the rollback. Before, all of them said "not confirmed; nothing was
// changed" beside a recap with batch 1's hosts changed.
func TestRolloutLaterBatchNotConfirmed(t *testing.T) {
	m := newMark()
	run, inv, book := fleetAppWith(t, m, terminal("y\nn\n"))
	code, stdout, stderr := run("apply", "-i", inv, "--serial", "2", "--confirm-each-batch", "--forks", "1", book)
	if code != 1 || len(m.applied) != 2 {
		t.Fatalf("exit %d, applied %v; want 1 and batch 1's 2 hosts\n%s\n%s", code, m.applied, stdout, stderr)
	}
	const said = "batch 2 of 3 not confirmed: it was not applied, nor anything after it; applied before it, and still so: batch 1"
	for _, out := range []string{stdout, stderr} {
		if strings.Contains(out, "nothing was changed") {
			t.Errorf("says nothing was changed after batch 1 changed %v:\n%s", m.applied, out)
		}
	}
	if n := strings.Count(stdout, "why: the rollout stopped: "+said); n != 3 {
		t.Errorf("%d hosts say %q, want the 3 not reached:\n%s", n, said, stdout)
	}
	if !strings.Contains(stderr, "pgtune: rollout stopped: "+said) || !strings.Contains(stderr, "put back the 2 hosts it changed with: pgtune rollback --run ") {
		t.Errorf("the last line does not say what was applied and how to undo it:\n%s", stderr)
	}
}

// TestYesAndConfirmEachBatch: --yes with --confirm-each-batch is refused
// the same way on a terminal and without one, before any host is
// contacted. Before, without a terminal it was refused for want of one,
// and on a terminal --yes won: nothing was asked.
func TestYesAndConfirmEachBatch(t *testing.T) {
	for _, tty := range []bool{true, false} {
		t.Run(fmt.Sprint("terminal=", tty), func(t *testing.T) {
			m := newMark()
			run, inv, book := fleetAppWith(t, m, func(a *App) {
				a.Stdin = strings.NewReader("y\ny\ny\n")
				a.IsTerminal = func() bool { return tty }
			})
			code, stdout, stderr := run("apply", "-i", inv, "--yes", "--confirm-each-batch", "--serial", "2", book)
			const want = "pgtune: --yes and --confirm-each-batch contradict each other: --confirm-each-batch asks before every batch (on a terminal), --yes asks nothing; give one of them\n"
			if code != 1 || stderr != want || stdout != "" || len(m.events) != 0 {
				t.Errorf("exit %d, module calls %v, stdout %q, stderr:\n%s\nwant exit 1, none, nothing, and:\n%s", code, m.events, stdout, stderr, want)
			}
		})
	}
}

func TestNotConfirmed(t *testing.T) {
	for _, tt := range []struct {
		b    rollout.Batch
		want string
	}{
		{rollout.Batch{Number: 2, Of: 4, Wave: 1}, "batch 2 of 4 not confirmed: it was not applied, nor anything after it; applied before it, and still so: batch 1"},
		{rollout.Batch{Number: 4, Of: 4, Wave: 1}, "batch 4 of 4 not confirmed: it was not applied, nor anything after it; applied before it, and still so: batches 1–3"},
		{rollout.Batch{Number: 1, Of: 2, Wave: 2}, "batch 1 of 2, wave 2, not confirmed: it was not applied, nor anything after it; applied before it, and still so: wave 1 of it"},
		{rollout.Batch{Number: 3, Of: 3, Wave: 3}, "batch 3 of 3, wave 3, not confirmed: it was not applied, nor anything after it; applied before it, and still so: the batches before it and waves 1–2 of it"},
	} {
		if got := notConfirmed(tt.b).Error(); got != tt.want {
			t.Errorf("%+v:\n got %s\nwant %s", tt.b, got, tt.want)
		}
	}
}

// TestPlanFailurePrintedOnce: a host whose plan failed has its error in
// its plan's block only; its result points there. Before, the same
// "h2: FAILED" block came again with the results.
func TestPlanFailurePrintedOnce(t *testing.T) {
	for _, serial := range [][]string{nil, {"--serial", "2"}} {
		t.Run(fmt.Sprint(serial), func(t *testing.T) {
			m := checkFails{newMark(), map[string]bool{"h2": true}}
			run, inv, book := fleetAppWith(t, m, nil)
			code, stdout, stderr := run(append([]string{"apply", "-i", inv, "--yes", book}, serial...)...)
			if code != 1 {
				t.Fatalf("exit %d, want 1\n%s\n%s", code, stdout, stderr)
			}
			if n := strings.Count(stdout, "check refused by the test"); n != 1 {
				t.Errorf("h2's error printed %d times, want once:\n%s", n, stdout)
			}
			if !strings.Contains(stdout, "h2: FAILED, see its plan above\n") || !strings.Contains(stdout, "5 hosts: 4 changed and verified, 1 failed\n") {
				t.Errorf("h2's result does not point to its plan, or the recap is not 4 changed and 1 failed:\n%s", stdout)
			}
			if serial != nil && (!strings.Contains(stdout, "BATCH 1 of 3 (2 hosts)\n") || !strings.Contains(stdout, "BATCH 3 of 3 (1 host)\n")) {
				t.Errorf("batch headers not as \"BATCH 1 of 3 (2 hosts)\", \"BATCH 3 of 3 (1 host)\":\n%s", stdout)
			}
		})
	}
}

// TestInterruptedPlanPrintedOnce: Ctrl-C while a batch is planned (the
// first batch, or a later one) shows each host cut once, in its plan; the
// results say they were not reached, as the hosts after them. Before,
// each cut host's "FAILED" block came twice and the recap said failed.
func TestInterruptedPlanPrintedOnce(t *testing.T) {
	// The facts of the 5 hosts are read first (--forks 1: one at a time),
	// then batch 1 (h1, h2) is planned, applied, and batch 2 planned.
	for _, tc := range []struct {
		dial    int
		changed []string
	}{{6, nil}, {8, []string{"h1", "h2"}}} {
		t.Run(fmt.Sprint(tc.dial), func(t *testing.T) {
			m := newMark()
			run, inv, book := fleetAppWith(t, m, interruptAt(t, tc.dial))
			code, stdout, stderr := run("apply", "-i", inv, "--yes", "--forks", "1", "--serial", "2", book)
			if code != exitInterrupted || !slices.Equal(m.applied, tc.changed) {
				t.Fatalf("exit %d, applied %v; want %d, %v\n%s\n%s", code, m.applied, exitInterrupted, tc.changed, stdout, stderr)
			}
			for _, h := range []string{"h1", "h2", "h3", "h4", "h5"} {
				if n := strings.Count(stdout, h+": FAILED"); n > 1 {
					t.Errorf("%s: FAILED printed %d times:\n%s", h, n, stdout)
				}
				if n := strings.Count(stdout, h+": not reached"); n != 1 && !slices.Contains(tc.changed, h) {
					t.Errorf("%s: not reached printed %d times, want once:\n%s", h, n, stdout)
				}
			}
			// One error (the plan's) or why (not planned) for each host
			// not reached: a host cut in its plan gets no second.
			if n := strings.Count(stdout, "\n  error: ") + strings.Count(stdout, "\n  why: "); n != 5-len(tc.changed) {
				t.Errorf("%d errors and whys for %d hosts not reached:\n%s", n, 5-len(tc.changed), stdout)
			}
			want := fmt.Sprintf("5 hosts: %d not reached\n", 5-len(tc.changed))
			if len(tc.changed) > 0 {
				want = "5 hosts: 2 changed and verified, 3 not reached\n"
			}
			if !strings.HasSuffix(stdout, want) || strings.Contains(stdout, "failed") {
				t.Errorf("the recap does not end with %q, or says failed:\n%s", want, stdout)
			}
		})
	}
}

// TestInterruptedAtQuestionNotReached: Ctrl-C at the first batch's
// question tried no host: the text says so ("5 not reached", not "5
// failed"). The JSON document keeps DESIGN.md's vocabulary, which has no
// such status: failed, each error saying "not reached: …".
func TestInterruptedAtQuestionNotReached(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			m := newMark()
			stdin, hold := io.Pipe() // a terminal nobody answers
			defer hold.Close()
			w := &promptWriter{asked: func() {
				if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
					t.Error(err)
				}
			}}
			run, inv, book := fleetAppWith(t, m, func(a *App) {
				a.Stdin, a.Stderr = stdin, w
				a.IsTerminal = func() bool { return true }
			})
			code, stdout, _ := run("apply", "-i", inv, "--serial", "2", "--format", format, book)
			if code != exitInterrupted || len(m.applied) != 0 {
				t.Fatalf("exit %d, applied %v; want %d, none\n%s\n%s", code, m.applied, exitInterrupted, stdout, w)
			}
			if format == "text" {
				if !strings.HasSuffix(stdout, "5 hosts: 5 not reached\n") || strings.Contains(stdout, "failed") {
					t.Errorf("the recap does not say 5 not reached:\n%s", stdout)
				}
				return
			}
			var r jsonReport
			if err := json.Unmarshal([]byte(stdout), &r); err != nil {
				t.Fatal(err)
			}
			if r.Summary["failed"] != 5 || r.Summary["not_reached"] != 0 {
				t.Errorf("summary %v; want DESIGN.md's keys, the 5 hosts failed", r.Summary)
			}
			for _, h := range r.Hosts {
				if h.Status != "failed" || h.Error == nil || !strings.HasPrefix(*h.Error, "not reached: ") {
					t.Errorf("%s: %s %v; want failed, not reached", h.Name, h.Status, h.Error)
				}
			}
		})
	}
}

// interruptAt makes the n-th connection (from 1) of the run send SIGINT
// to this process and hold on until the run cuts it.
func interruptAt(t *testing.T, n int) func(*App) {
	t.Helper()
	transcript := []byte(profiles[0].transcript())
	log := &commandLog{path: filepath.Join(t.TempDir(), "fake.log")}
	return func(a *App) {
		var mu sync.Mutex
		dials := 0
		a.Dial = func(ctx context.Context, h *inventory.Host) (transport.Transport, error) {
			mu.Lock()
			dials++
			now := dials
			mu.Unlock()
			if now != n {
				return localFacts{Local: transport.NewLocal(), fake: &fakeHost{name: h.Name, transcript: transcript, log: log}}, nil
			}
			if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
				return nil, err
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(time.Minute): // a deadline, not a wait: the signal cuts it
				return nil, errors.New("the signal did not cut the connection")
			}
		}
	}
}
