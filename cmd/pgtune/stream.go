package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/rollout"
)

// live shows a phase's results as they come: each host's block as soon as
// the host is done (text output), and on a terminal a progress line on
// stderr (done / failed / left, elapsed), redrawn around everything else
// written there. JSON and JUnit output wait for the whole document.
type live struct {
	mu       sync.Mutex
	stderr   io.Writer
	printer  *report.Printer // nil: blocks are not streamed
	progress bool            // stderr is a terminal: draw the line
	st       style
	now      func() time.Time
	verb     string
	start    time.Time
	total    int
	done     int
	failed   int
	drawn    bool
	paused   bool          // a question is on the terminal: no line over it
	batch    rollout.Batch // the rollout's current batch (Of 0: none)
	shown    map[string]bool
	stop     chan struct{}
	stopped  chan struct{}
}

// newLive starts a phase named verb ("check", "apply") whose host blocks
// go to w (nil: none).
func (a *App) newLive(o *options, verb string, mode report.Mode, w io.Writer) *live {
	lv := &live{
		stderr:   a.Stderr,
		progress: isTerminal(a.Stderr) && os.Getenv("TERM") != "dumb", // dumb: no line erase
		st:       colorFor(a.Stderr, o.noColor),
		now:      a.Now,
		verb:     verb,
		shown:    map[string]bool{},
	}
	if w != nil {
		lv.printer = report.NewPrinter(w, mode, report.TextOptions{Color: colorFor(w, o.noColor).On, NoDiff: !o.diff})
	}
	return lv
}

// attach makes r report each host to lv and log through it.
func (lv *live) attach(a *App, o *options, r *engine.Runner, total int) {
	lv.total = total
	lv.start = lv.now()
	r.HostDone = lv.hostDone
	r.Log = a.loggerTo(lv.around(a.Stderr), o)
	if lv.progress {
		lv.stop, lv.stopped = make(chan struct{}), make(chan struct{})
		go lv.tick()
	}
}

// hostDone prints one host's result and updates the counts.
func (lv *live) hostDone(_ string, h report.Host) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	lv.done++
	if (h.Status == report.Failed || h.Status == report.Unreachable) && !h.NotReached {
		lv.failed++ // a host a stop left alone did not fail (the recap says not reached)
	}
	if lv.printer != nil {
		lv.clear()
		if err := lv.printer.Host(h); err != nil {
			fmt.Fprintf(lv.stderr, "pgtune: writing the report: %s\n", safeText(err.Error()))
		}
		lv.shown[h.Name] = true
	}
	lv.draw()
}

// block counts one host done and writes its block with write, the
// progress line erased around it (facts, whose blocks are not a report's).
func (lv *live) block(failed bool, write func()) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	lv.done++
	if failed {
		lv.failed++
	}
	lv.clear()
	write()
	lv.draw()
}

// finish stops the progress line and prints, in report order, the hosts
// whose result did not come through the hook (a rollback's plan).
func (lv *live) finish(r *report.Report) {
	if lv.stop != nil {
		close(lv.stop)
		<-lv.stopped
		lv.stop = nil
	}
	lv.mu.Lock()
	defer lv.mu.Unlock()
	lv.clear()
	lv.progress = false
	if lv.printer == nil {
		return
	}
	for _, h := range r.Hosts {
		if !lv.shown[h.Name] {
			_ = lv.printer.Host(h)
		}
	}
}

// recap writes the recap after finish.
func (lv *live) recap(r *report.Report) error {
	if lv.printer == nil {
		return nil
	}
	return lv.printer.Recap(r)
}

func (lv *live) tick() {
	defer close(lv.stopped)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-lv.stop:
			return
		case <-t.C:
			lv.redraw()
		}
	}
}

// redraw is a tick: the line again, with the time spent.
func (lv *live) redraw() {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	lv.draw()
}

// pause erases the progress line and keeps it off the terminal until
// resume: a question asked meanwhile stays on screen (the ticks erased it
// within a second: apply looked hung, its question gone).
func (lv *live) pause() {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	lv.clear()
	lv.paused = true
}

// resume draws the progress line again after pause.
func (lv *live) resume() {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	lv.paused = false
	lv.draw()
}

// draw writes the progress line; the caller holds mu.
func (lv *live) draw() {
	if !lv.progress || lv.paused {
		return
	}
	fmt.Fprint(lv.stderr, "\r\x1b[K"+lv.progressText())
	lv.drawn = true
}

// progressText is the progress line: the counts of the whole run, the
// batch being worked on when a rollout has several, the time spent.
func (lv *live) progressText() string {
	failed := fmt.Sprintf("%d failed", lv.failed)
	if lv.failed > 0 {
		failed = lv.st.Red(failed)
	}
	batch := ""
	if lv.batch.Of > 1 {
		batch = fmt.Sprintf(" · batch %d of %d (%s)", lv.batch.Number, lv.batch.Of, plural(len(lv.batch.Hosts), "host"))
	}
	elapsed := lv.now().Sub(lv.start).Truncate(time.Second)
	return fmt.Sprintf("%s: %d/%d done, %s, %d left%s · %s", lv.verb, lv.done, lv.total, failed, lv.total-lv.done, batch, elapsed)
}

// setBatch puts the batch now worked on in the progress line.
func (lv *live) setBatch(b rollout.Batch) {
	lv.mu.Lock()
	defer lv.mu.Unlock()
	lv.batch = b
	lv.clear()
	lv.draw()
}

// clear erases the progress line; the caller holds mu.
func (lv *live) clear() {
	if lv.drawn {
		fmt.Fprint(lv.stderr, "\r\x1b[K")
		lv.drawn = false
	}
}

// around returns w wrapped so that each write first erases the progress
// line and redraws it after.
func (lv *live) around(w io.Writer) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		lv.mu.Lock()
		defer lv.mu.Unlock()
		lv.clear()
		n, err := w.Write(p)
		lv.draw()
		return n, err
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// plural is "1 host", "3 hosts".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
