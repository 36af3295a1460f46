package main

import (
	"fmt"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/rollout"
)

// runRollback puts hosts back as they were before pgtune first changed
// them (or before run --run), from the journals and backups kept on each
// host, through the same plan → confirm → apply → verify flow as apply.
func (a *App) runRollback(o *options) int {
	var err error
	if o.runID != "" && !engine.ValidRunID(o.runID) {
		return a.usageError(fmt.Errorf("--run %q: not a run id (like 20261130T190000Z-a1b2c3)", o.runID))
	}
	// As every other command: -i, else ansible.cfg's inventory, else
	// localhost, with ansible.cfg's connection defaults, -k/-K and the
	// inventory's warnings. No playbook: no group_vars beside one.
	inv, err := a.openInventory(o, "")
	if err != nil {
		return a.fail(err)
	}
	pattern := "all"
	if o.limit != "" {
		pattern = o.limit
	}
	hosts, err := inv.Match(pattern)
	if err != nil {
		return a.fail(fmt.Errorf("--limit: %w", err))
	}
	if err := applyExtraVars(o, hosts); err != nil {
		return a.fail(err)
	}
	a.showConnections(o, hosts)
	mods, _ := engine.Registry(a.Modules...)
	// As apply: the first Ctrl-C cuts the plan or the question (nothing
	// is changed yet), or, once hosts are being put back, lets each host
	// in flight finish putting itself back (a host's rollback is one
	// module: engine/rollback.go) and starts no other; a second one cuts
	// the steps in flight.
	ctx, stop, release := interruptible(a)
	defer release()
	planning, cancel := rollout.UntilStopped(ctx, stop)
	defer cancel()
	planOut := a.Stdout
	if o.format != "text" {
		planOut = a.Stderr
	}
	lv := a.newLive(o, "plan", report.ModeCheck, planOut)
	r := a.runner(o, mods)
	lv.attach(a, o, r, len(hosts))
	// Connections outlive the context they were opened under (it bounds
	// the handshake only), so cutting the plan never cuts the apply.
	s := r.PlanRollback(planning, hosts, o.runID)
	defer s.Close()
	planned := s.Report("check")
	lv.finish(planned)
	if planning.Err() != nil {
		fmt.Fprintln(a.Stderr, "pgtune: interrupted while planning; nothing was changed")
		return exitInterrupted
	}
	if s.HasChanges() {
		// The plan is the text report: host text in it is escaped and
		// secrets masked like everywhere else (report.Printer).
		if err := lv.recap(planned); err != nil {
			return a.fail(fmt.Errorf("writing the plan: %w", err))
		}
		err := a.confirmOrStop(o, fmt.Sprintf("Roll back %d host(s)?", planned.Summary.Drift), stop)
		if err != nil && isClosed(stop) {
			fmt.Fprintln(a.Stderr, "pgtune: interrupted while asking; nothing was changed")
			return exitInterrupted
		}
		if err != nil {
			return a.fail(err)
		}
	}
	done := a.newLive(o, "apply", report.ModeApply, a.textOut(o))
	done.attach(a, o, s.Runner(), len(planned.Hosts))
	s.Apply(engine.WithApplyHooks(ctx, engine.ApplyHooks{Stop: stop}))
	rep := s.Report("apply")
	done.finish(rep)
	a.render(o, done, rep)
	if isClosed(stop) {
		fmt.Fprintln(a.Stderr, "pgtune: interrupted: the hosts being put back were finished and no other was started (those are reported interrupted); run the same rollback again to put back any host left")
		return exitInterrupted
	}
	return rep.ExitCode()
}
