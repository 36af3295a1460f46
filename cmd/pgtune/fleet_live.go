package main

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/rollout"
)

// rolloutView streams a rollout as apply without batches streams: each
// wave's plan host by host as it is made (headed by its batch when there
// are several), the plan's recap before the question, then each host's
// result as soon as it is applied and verified, with the progress line of
// the whole run on a terminal.
type rolloutView struct {
	mu      sync.Mutex
	applied *live           // the run's apply results, and the progress line
	planW   io.Writer       // where plans go: stdout, stderr for a document format
	plans   *report.Printer // the current wave's plan blocks
	shown   map[string]bool // hosts of the current wave whose plan was shown
}

// newRolloutView attaches the view to the runner for a run of total hosts.
func (a *App) newRolloutView(o *options, r *engine.Runner, total int) *rolloutView {
	// The plan is for a person: with --format json stdout carries only
	// the final document, so the plan goes to stderr.
	planOut := a.Stdout
	if o.format != "text" {
		planOut = a.Stderr
	}
	v := &rolloutView{applied: a.newLive(o, "apply", report.ModeApply, a.textOut(o))}
	v.applied.attach(a, o, r, total)
	v.planW = v.applied.around(planOut) // erases the progress line around a plan
	v.plans = report.NewPrinter(v.planW, report.ModeCheck, report.TextOptions{Color: colorFor(planOut, o.noColor).On, NoDiff: !o.diff})
	v.shown = map[string]bool{}
	r.HostDone = v.hostDone
	return v
}

// hostDone routes a host's outcome: a plan to the wave's plan, an apply
// result to the run's results.
func (v *rolloutView) hostDone(phase string, h report.Host) {
	if phase != "plan" {
		v.applied.hostDone(phase, h)
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	_ = v.plans.Host(h)
	v.shown[h.Name] = true
	v.failedAbove(h)
}

// failedAbove tells the results' printer about a host whose plan block
// showed it failed: its result then points there instead of printing
// the same error again.
func (v *rolloutView) failedAbove(h report.Host) {
	if h.Status != report.Failed && h.Status != report.Unreachable {
		return
	}
	v.applied.mu.Lock()
	defer v.applied.mu.Unlock()
	if v.applied.printer != nil {
		v.applied.printer.Above(h.Name)
	}
}

// beforeWave heads a wave's plan with its batch when there are several.
func (v *rolloutView) beforeWave(b rollout.Batch) {
	v.applied.setBatch(b)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.shown = map[string]bool{}
	if b.Of > 1 {
		fmt.Fprintf(v.planW, "BATCH%s (%s)\n", strings.TrimPrefix(batchName(b), "batch"), plural(len(b.Hosts), "host"))
	}
}

// planned ends a wave's plan before its question: the hosts whose plan did
// not come through the hook, then the plan's recap.
func (v *rolloutView) planned(r *report.Report) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, h := range r.Hosts {
		if !v.shown[h.Name] {
			if err := v.plans.Host(h); err != nil {
				return err
			}
			v.failedAbove(h)
		}
	}
	return v.plans.Recap(r)
}
