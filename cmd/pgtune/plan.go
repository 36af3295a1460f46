package main

import (
	"context"
	"fmt"
	"io"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/report"
)

// render writes a whole document (JSON, JUnit) on stdout, or for text the
// hosts lv has not streamed and the recap.
func (a *App) render(o *options, lv *live, r *report.Report) {
	var err error
	switch o.format {
	case "json":
		err = report.WriteJSON(a.Stdout, r)
	case "junit":
		err = report.WriteJUnit(a.Stdout, r)
	default:
		lv.finish(r)
		err = lv.recap(r)
	}
	if err != nil {
		fmt.Fprintf(a.Stderr, "pgtune: writing report: %s\n", safeText(err.Error()))
	}
}

// textOut is where a phase's host blocks are streamed: stdout for text,
// nowhere for a document format.
func (a *App) textOut(o *options) io.Writer {
	if o.format == "text" {
		return a.Stdout
	}
	return nil
}

// runCheck is the dry run: plan every host, change nothing.
func (a *App) runCheck(o *options) int {
	o.planOnly = true
	ctx, stop := a.signalContext()
	defer stop()
	lv := a.newLive(o, "check", report.ModeCheck, a.textOut(o))
	s, err := a.plan(ctx, o, lv)
	if err != nil {
		return a.fail(err)
	}
	defer s.Close()
	r := s.Report("check")
	lv.finish(r)
	a.render(o, lv, r)
	if a.readInterrupted(ctx) {
		return exitInterrupted
	}
	return r.ExitCode()
}

// runApply plans, shows the plan, asks, applies and verifies.
// It goes through the rollout (fleet.go): batches, run state, resume.
func (a *App) runApply(o *options) int {
	return a.rolloutApply(o)
}

// plan loads the inventory and playbook and plans every host, each
// host's plan shown through lv as soon as it is known.
func (a *App) plan(ctx context.Context, o *options, lv *live) (*engine.Session, error) {
	l, mods, err := a.load(o)
	if err != nil {
		return nil, err
	}
	r := a.runner(o, mods)
	lv.attach(a, o, r, len(l.hosts))
	return r.Plan(ctx, l.inv, l.book, l.hosts)
}
