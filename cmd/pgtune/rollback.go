package main

import (
	"fmt"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/report"
)

// runRollback puts hosts back as they were before pgtune first changed
// them (or before run --run), from the journals and backups kept on each
// host, through the same plan → confirm → apply → verify flow as apply.
func (a *App) runRollback(o *options) int {
	var err error
	if o.runID != "" && !engine.ValidRunID(o.runID) {
		return a.usageError(fmt.Errorf("--run %q: not a run id (like 20261130T190000Z-a1b2c3)", o.runID))
	}
	inv := inventory.Localhost()
	if o.inventory != "" {
		if inv, err = inventory.Load(o.inventory); err != nil {
			return a.fail(err)
		}
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
	ctx, stop := signalContext()
	defer stop()
	planOut := a.Stdout
	if o.format != "text" {
		planOut = a.Stderr
	}
	lv := a.newLive(o, "plan", report.ModeCheck, planOut)
	r := a.runner(o, mods)
	lv.attach(a, o, r, len(hosts))
	s := r.PlanRollback(ctx, hosts, o.runID)
	defer s.Close()
	return a.execute(ctx, o, s, lv, "Roll back")
}
