package main

import (
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/rollout"
)

// TestProgressText: the progress line counts the whole run and names the
// batch being worked on when a rollout has more than one.
func TestProgressText(t *testing.T) {
	start := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	tests := []struct {
		name                string
		verb                string
		done, failed, total int
		batch               rollout.Batch
		want                string
	}{
		{"check", "check", 3, 1, 10, rollout.Batch{}, "check: 3/10 done, 1 failed, 7 left · 1m5s"},
		{"one batch is not named", "apply", 0, 0, 4, rollout.Batch{Number: 1, Of: 1, Hosts: []string{"a", "b", "c", "d"}}, "apply: 0/4 done, 0 failed, 4 left · 1m5s"},
		{"canary", "apply", 0, 0, 40, rollout.Batch{Number: 1, Of: 3, Hosts: []string{"db01"}}, "apply: 0/40 done, 0 failed, 40 left · batch 1 of 3 (1 host) · 1m5s"},
		{"the rest", "apply", 5, 1, 40, rollout.Batch{Number: 3, Of: 3, Hosts: make([]string, 35)}, "apply: 5/40 done, 1 failed, 35 left · batch 3 of 3 (35 hosts) · 1m5s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lv := &live{verb: tt.verb, done: tt.done, failed: tt.failed, total: tt.total, batch: tt.batch,
				start: start, now: func() time.Time { return start.Add(65*time.Second + 300*time.Millisecond) }}
			if got := lv.progressText(); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestProgressLineNamesTheBatch: an apply in batches on a terminal shows
// the batch in its progress line. The fake host runs no commands, so the
// canary batch fails whole and the rollout stops there.
func TestProgressLineNamesTheBatch(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fakehost.facts")
	writeFile(t, fake, profiles[0].transcript())
	inv := filepath.Join(dir, "inv.yml")
	writeFile(t, inv, "all:\n  hosts:\n    db1:\n      connection: local\n    db2:\n      connection: local\n  vars:\n    sysctl_dir: "+dir+"/sysctl.d\n")
	book := namedDefaultPlaybook(t, dir)
	out := runOnSilentTerminal(t, []string{TestHostEnv + "=" + fake, "TERM=xterm", "NO_COLOR=1", "XDG_STATE_HOME=" + dir},
		"apply", "--yes", "--serial", "1", "-i", inv, book)
	line := regexp.MustCompile(`\r\x1b\[Kapply: 1/2 done, 1 failed, 1 left · batch 1 of 2 \(1 host\) · `)
	if !line.Match(out) {
		t.Errorf("no progress line naming the batch:\n%q", out)
	}
}

// readerFunc is an io.Reader made of a function.
type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// TestQuestionStaysOnScreen: while apply asks, the progress line is off
// the terminal: a tick that comes while the operator reads the question
// does not erase it. Before, the ticker redrew the line every second over
// the question ("\r\e[K"): apply looked hung, its question gone. The tick
// is made to come while the answer is awaited (the reader runs it).
func TestQuestionStaysOnScreen(t *testing.T) {
	app, _, stderr := testApp(nil)
	app.IsTerminal = func() bool { return true }
	now := time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC)
	app.Now = func() time.Time { return now } // the line's time spent: 0s
	o := newOptions()
	view := app.newRolloutView(o, &engine.Runner{}, 3)
	view.applied.progress = true // stderr is a buffer here, not a terminal
	view.applied.redraw()
	answered, onScreen := false, ""
	app.Stdin = readerFunc(func(p []byte) (int, error) {
		if answered {
			return 0, io.EOF
		}
		answered = true
		view.applied.redraw() // a tick while the question is on screen
		onScreen = stderr.String()
		return copy(p, "n\n"), nil
	})
	ask := app.confirmBatch(o, view, make(chan struct{}))
	planned := &report.Report{Mode: report.ModeCheck, Summary: report.Summary{Drift: 2}}
	if err := ask(rollout.Batch{Number: 1, Of: 1}, planned); err == nil {
		t.Fatal("answered n, and apply goes on")
	}
	if !strings.HasSuffix(onScreen, "Apply these changes to 2 host(s)? [y/N] ") {
		t.Errorf("the question is not the last thing on the terminal while it waits for the answer:\n%q", onScreen)
	}
	out := stderr.String()
	if !strings.HasSuffix(out, "apply: 0/3 done, 0 failed, 3 left · 0s") {
		t.Errorf("the progress line does not come back after the answer:\n%q", out)
	}
}

// TestProgressCountsNotReachedApart: a host a stopped rollout left alone
// is done, not failed, on the progress line, as in the recap.
func TestProgressCountsNotReachedApart(t *testing.T) {
	app, _, _ := testApp(nil)
	lv := app.newLive(newOptions(), "apply", report.ModeApply, nil)
	lv.total = 3
	why := "not reached: the rollout stopped before its batch"
	lv.hostDone("apply", report.Host{Name: "h1", Status: report.OK})
	lv.hostDone("apply", report.Host{Name: "h2", Status: report.Failed})
	lv.hostDone("apply", report.Host{Name: "h3", Status: report.Failed, Error: &why, NotReached: true})
	if lv.done != 3 || lv.failed != 1 {
		t.Errorf("done %d, failed %d; want 3 done, 1 failed (h3 was not reached)", lv.done, lv.failed)
	}
}
