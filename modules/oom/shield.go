package oom

import (
	"context"
	"fmt"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
)

// policyAdj is the postmaster_score_adj the oom module planned for this
// host; ok is false when the play has no oom section (or during rollback,
// which plans no policy): pgtune's starts are then left plain.
func policyAdj(t *engine.Target) (int, bool) {
	n, ok := t.Int64Output(Name, OutPostmasterAdj)
	if !ok || n < -1000 || n > 1000 {
		return 0, false
	}
	return int(n), true
}

// NeedsRestart reports whether the oom module planned a shield that only
// a restart gives (pgconf then restarts, once for both).
func NeedsRestart(t *engine.Target) bool {
	v, _ := t.Output(Name, OutRestart)
	b, _ := v.(bool)
	return b
}

// StartEnv is the environment pgtune's own starts of the cluster (pg_ctl,
// pg_ctlcluster) give the postmaster when the policy shields it, as
// NAME=VALUE words; nil otherwise.
func StartEnv(t *engine.Target) []string {
	if _, ok := policyAdj(t); !ok {
		return nil
	}
	return []string{"PG_OOM_ADJUST_FILE=" + adjustFile, fmt.Sprintf("PG_OOM_ADJUST_VALUE=%d", backendScoreAdj)}
}

// ShieldStarted sets the oom_score_adj of the postmaster pgtune has just
// started (pg is the cluster as it was before; the new postmaster is
// re-read and verified by facts) when the policy asks for one and the new
// postmaster's children reset themselves: without that reset the shield
// would pass to every backend, and it is refused. The change is journaled
// like any live value. Nothing is done without an oom policy.
func ShieldStarted(ctx context.Context, t *engine.Target, pg *facts.Postgres) error {
	want, ok := policyAdj(t)
	if !ok {
		return nil
	}
	now, err := facts.RefreshPostgres(ctx, t.Transport, t.Become, pg)
	if err != nil {
		return err
	}
	if !now.Running {
		return fmt.Errorf("postgres (%s) is not running", pg.DataDir)
	}
	h, err := readHost(ctx, t, now.PID, "")
	if err != nil {
		return err
	}
	if !h.Read || h.Start != now.StartTime {
		return fmt.Errorf("postmaster pid %d is gone or restarted", now.PID)
	}
	if h.Adj == want {
		return nil
	}
	if want < h.Adj && !h.CanLower {
		if t.Log != nil {
			t.Log.Warn("oom: this host does not let pgtune lower oom_score_adj (no CAP_SYS_RESOURCE): postmaster left unshielded", "pid", now.PID, "oom_score_adj", h.Adj)
		}
		return nil
	}
	if want != backendScoreAdj && !h.resets() {
		return fmt.Errorf("postmaster pid %d started without its children's reset (%s): not shielding it, every backend would inherit the shield", now.PID, describeEnv(h))
	}
	return setPostmasterAdj(ctx, t, now, h.Adj, want)
}

// VerifyStarted reads back, after pgtune restarted the cluster, that the
// postmaster runs at the policy's oom_score_adj and its children at 0.
func VerifyStarted(ctx context.Context, t *engine.Target, pg *facts.Postgres) error {
	want, ok := policyAdj(t)
	if !ok || pg == nil || !pg.Running {
		return nil
	}
	h, err := readHost(ctx, t, pg.PID, "")
	if err != nil {
		return err
	}
	if !h.Read || h.Start != pg.StartTime {
		return fmt.Errorf("postmaster pid %d is gone or restarted", pg.PID)
	}
	if want < h.Adj && !h.CanLower {
		want = h.Adj // check said so: the host cannot be shielded from inside
	}
	if want != backendScoreAdj && !h.resets() {
		return fmt.Errorf("oom: the restart started postmaster pid %d without its children's reset (%s; a pg_restart command that does not pass PG_OOM_ADJUST_FILE?): pgtune does not shield a postmaster whose backends would inherit the shield", pg.PID, describeEnv(h))
	}
	if err := checkShield(pg.PID, h, want); err != nil {
		return fmt.Errorf("oom: %w", err)
	}
	return nil
}
