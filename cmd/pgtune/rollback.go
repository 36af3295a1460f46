package main

import (
	"flag"
	"fmt"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/report"
)

// runRollback puts hosts back as they were before pgtune first changed
// them (or before run --run), from the journals and backups kept on each
// host, through the same plan → confirm → apply → verify flow as apply.
func (a *App) runRollback(args []string) int {
	o, err := a.parse("rollback", args, 0, func(fs *flag.FlagSet, o *options) {
		targetFlags(fs, o)
		fs.BoolVar(&o.yes, "yes", false, "roll back without asking")
		fs.BoolVar(&o.yes, "y", false, "short for --yes")
		fs.StringVar(&o.runID, "run", "", "go back to the state before this run `ID` (default: before pgtune's first run)")
	})
	if err != nil {
		return a.usageError(err)
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
	mods, _ := engine.Registry(a.Modules...)
	ctx, stop := signalContext()
	defer stop()
	s := a.runner(o, mods).PlanRollback(ctx, hosts, o.runID)
	defer s.Close()
	planned := s.Report("check")
	if s.HasChanges() {
		w := a.Stdout
		if o.format == "json" {
			w = a.Stderr
		}
		report.WriteText(w, planned)
		if err := a.confirm(o, fmt.Sprintf("Roll back %d host(s)?", planned.Summary.Drift)); err != nil {
			return a.fail(err)
		}
	}
	s.Apply(ctx)
	r := s.Report("apply")
	a.render(a.Stdout, o.format, r)
	return r.ExitCode()
}
