package main

import (
	"context"
	"fmt"
	"io"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/report"
)

func (a *App) render(w io.Writer, format string, r *report.Report) {
	var err error
	if format == "json" {
		err = report.WriteJSON(w, r)
	} else {
		err = report.WriteText(w, r)
	}
	if err != nil {
		fmt.Fprintf(a.Stderr, "pgtune: writing report: %s\n", safeText(err.Error()))
	}
}

// runCheck is the dry run: plan every host, change nothing.
func (a *App) runCheck(o *options) int {
	o.planOnly = true
	ctx, stop := signalContext()
	defer stop()
	s, err := a.plan(ctx, o)
	if err != nil {
		return a.fail(err)
	}
	defer s.Close()
	r := s.Report("check")
	a.render(a.Stdout, o.format, r)
	return r.ExitCode()
}

// runApply plans, shows the plan, asks, applies and verifies.
func (a *App) runApply(o *options) int {
	ctx, stop := signalContext()
	defer stop()
	s, err := a.plan(ctx, o)
	if err != nil {
		return a.fail(err)
	}
	defer s.Close()
	return a.execute(ctx, o, s, "Apply these changes to")
}

// plan loads the inventory and playbook and plans every host.
func (a *App) plan(ctx context.Context, o *options) (*engine.Session, error) {
	l, mods, err := a.load(o)
	if err != nil {
		return nil, err
	}
	return a.runner(o, mods).Plan(ctx, l.inv, l.book, l.hosts)
}

// execute is what apply and rollback share: show the plan where a person
// reads it (with --format json stdout carries only the final document),
// ask, carry it out, verify, report.
func (a *App) execute(ctx context.Context, o *options, s *engine.Session, question string) int {
	planned := s.Report("check")
	if s.HasChanges() {
		w := a.Stdout
		if o.format == "json" {
			w = a.Stderr
		}
		// The plan is the text report: host text in it is escaped and
		// secrets masked like everywhere else (report.WriteText).
		if err := report.WriteText(w, planned); err != nil {
			return a.fail(fmt.Errorf("writing the plan: %w", err))
		}
		if err := a.confirm(o, fmt.Sprintf("%s %d host(s)?", question, planned.Summary.Drift)); err != nil {
			return a.fail(err)
		}
	}
	s.Apply(ctx)
	r := s.Report("apply")
	a.render(a.Stdout, o.format, r)
	return r.ExitCode()
}
