package pgconf

import (
	"context"
	"strings"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/modules/oom"
)

// The OOM shield (modules/oom) at the starts pgtune performs: the oom
// module plans before pgconf (pgconf requires it) and asks for a restart
// when the running postmaster lacks the shield; this restart is the one
// restart for both. Without an oom policy (no section, or rollback),
// starts are plain.

// withOOMEnv prefixes the restart command with PGTUNE_OOM_ENV, the
// NAME=VALUE words restartInner hands pg_ctl (through as_owner, which
// sudo would strip of anything exported) so the postmaster's children
// reset their oom_score_adj. The words are the oom module's constants,
// never host data.
func withOOMEnv(t *engine.Target, args ...string) []string {
	env := oom.StartEnv(t)
	if env == nil {
		return args
	}
	return append([]string{"env", "PGTUNE_OOM_ENV=" + strings.Join(env, " ")}, args...)
}

// shieldStarted sets the new postmaster's oom_score_adj right after a
// restart that brought it up. A failure is logged, never undoes a good
// restart: pgconf's Verify reads the shield back and fails the host.
func shieldStarted(ctx context.Context, t *engine.Target, pg *facts.Postgres, action string, r *restartResult) {
	if action != "restart" || !r.ok() {
		return
	}
	if err := oom.ShieldStarted(ctx, t, pg); err != nil && t.Log != nil {
		t.Log.Warn("oom: shielding the new postmaster failed", "err", err)
	}
}

// verifyOOMShield reads the shield back after pgconf's own restart.
func verifyOOMShield(ctx context.Context, t *engine.Target, st *State, pg *facts.Postgres) error {
	if !st.Restart {
		return nil
	}
	return oom.VerifyStarted(ctx, t, pg)
}

// withOOMShield adds the OOM shield to what a restart brings when the oom
// module asked for it.
func withOOMShield(t *engine.Target, after string) string {
	if !oom.NeedsRestart(t) {
		return after
	}
	return after + " + OOM shield (oom)"
}
