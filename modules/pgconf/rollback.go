package pgconf

import (
	"context"
	"fmt"

	"github.com/pgtune/pgtune/engine"
)

var _ engine.RollbackHook = (*Module)(nil)

// AfterRollback restarts a running server once its previous configuration
// files are back, so it leaves the huge page pool before the pool shrinks,
// and confirms it came up. A stopped server is left stopped: it reads the
// restored files when it next starts.
func (m *Module) AfterRollback(ctx context.Context, t *engine.Target) error {
	pg := t.Facts.Postgres
	if pg == nil || !pg.Running {
		return nil
	}
	if topo := t.Facts.Topology; topo != nil && topo.Patroni != nil {
		return patroniRestartRestored(ctx, t, pg, topo.Patroni) // never pg_ctl under Patroni
	}
	res, err := startAgain(ctx, t, pg)
	if err != nil {
		return fmt.Errorf("restart on the restored configuration: %w", err)
	}
	if !res.ok() {
		return fmt.Errorf("restart on the restored configuration: %s", res.failure())
	}
	if t.Log != nil {
		t.Log.Info("postgres restarted on the restored configuration", "new_pid", res.NewPID)
	}
	return nil
}
