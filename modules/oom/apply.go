package oom

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/transport"
)

// Apply writes the drop-in (journaled, root's, 0644) and reloads systemd,
// and sets the running postmaster's oom_score_adj where that is safe
// (journaled: rollback puts the value back on the same process). A
// shield that needs a restart is left to pgconf's restart.
func (m *Module) Apply(ctx context.Context, t *engine.Target, p *plan.ModulePlan) error {
	st, err := plan.StateOf[State](p)
	if err != nil || st == nil {
		return err
	}
	if st.WriteDrop {
		if err := transport.MakeDir(ctx, t.Transport, path.Dir(st.Dropin), "root", t.Become); err != nil {
			return err
		}
		if err := t.WriteFile(ctx, st.Dropin, st.DropinBody, transport.WriteOptions{Mode: "0644", Owner: "root:root"}); err != nil {
			return fmt.Errorf("write %s: %w", st.Dropin, err)
		}
	}
	if st.WriteDrop || st.Reload {
		if err := daemonReload(ctx, t); err != nil {
			return err
		}
	}
	if st.SetLive {
		if err := setPostmasterAdj(ctx, t, st.PG, st.LiveBefore, st.PostmasterAdj); err != nil {
			return err
		}
	}
	return nil
}

func daemonReload(ctx context.Context, t *engine.Target) error {
	if _, err := t.Run(ctx, "systemctl", "daemon-reload"); err != nil {
		return fmt.Errorf("systemctl daemon-reload: %w", err)
	}
	return nil
}

// liveKey names the oom_score_adj of one postmaster: its PID and start
// time, which together name exactly one process for the life of the boot.
func liveKey(pg *facts.Postgres) string {
	return fmt.Sprintf("oom_score_adj:postmaster:%d:%d", pg.PID, pg.StartTime)
}

// parseLiveKey reads a liveKey back (from a journal read from the host).
func parseLiveKey(key string) (pid int, start int64, err error) {
	parts := strings.Split(key, ":")
	if len(parts) != 4 || parts[0] != "oom_score_adj" || parts[1] != "postmaster" {
		return 0, 0, fmt.Errorf("%s is not a postmaster's oom_score_adj", strconv.QuoteToASCII(cut(key)))
	}
	p, err := facts.ParseInt("pid", parts[2], 1, facts.MaxPID)
	if err != nil {
		return 0, 0, err
	}
	start, err = facts.ParseInt("start time", parts[3], 0, 1<<62)
	return int(p), start, err
}

// writeAdjScript writes $3 to the oom_score_adj of pid $1 if that process
// still started at $2 (a PID can be reused), as root. Exit 3: the process
// is gone; 4: the kernel refused (lowering needs CAP_SYS_RESOURCE).
const writeAdjScript = `pid=$1 start=$2 v=$3
st=$(sed -n '1s/^.*) //p' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f20)
if [ -z "$st" ] || [ "$st" != "$start" ]; then echo "process $pid (started at $start) is gone" >&2; exit 3; fi
printf '%s\n' "$v" > "/proc/$pid/oom_score_adj" || exit 4
`

// setPostmasterAdj journals the postmaster's oom_score_adj (before) and
// sets it to v. Journal entries are the oom module's, whichever module is
// working (pgconf's restart calls it too).
func setPostmasterAdj(ctx context.Context, t *engine.Target, pg *facts.Postgres, before, v int) error {
	module := t.Module
	t.Module = Name
	defer func() { t.Module = module }()
	return t.SetLive(ctx, liveKey(pg), strconv.Itoa(before), func(ctx context.Context) error {
		return writeAdj(ctx, t, pg.PID, pg.StartTime, v)
	})
}

func writeAdj(ctx context.Context, t *engine.Target, pid int, start int64, v int) error {
	_, err := t.Run(ctx, "sh", "-c", writeAdjScript, "sh", strconv.Itoa(pid), strconv.FormatInt(start, 10), strconv.Itoa(v))
	var exit *transport.ExitError
	if errors.As(err, &exit) && exit.ExitCode == 4 {
		return fmt.Errorf("set oom_score_adj %d on postmaster pid %d: the kernel refused (%w): lowering it needs CAP_SYS_RESOURCE, which this host does not give pgtune (a container?)", v, pid, err)
	}
	if err != nil {
		return fmt.Errorf("set oom_score_adj %d on postmaster pid %d: %w", v, pid, err)
	}
	return nil
}

// Verify reads back the drop-in and the unit's OOMPolicy, and the
// postmaster's and its children's oom_score_adj unless a restart is still
// to come (pgconf verifies the shield after it restarts).
func (m *Module) Verify(ctx context.Context, t *engine.Target, p *plan.ModulePlan) error {
	st, err := plan.StateOf[State](p)
	if err != nil || st == nil {
		return err
	}
	pid, unit := 0, st.Unit
	if st.PG.Running {
		pid = st.PG.PID
	}
	h, err := readHost(ctx, t, pid, unit)
	if err != nil {
		return err
	}
	if st.Unit != "" {
		if h.Unit != st.Unit {
			return fmt.Errorf("systemd unit %s no longer runs the postmaster (now %s)", st.Unit, orUnknown(h.Unit))
		}
		if !h.DropinPresent || string(h.Dropin) != string(st.DropinBody) {
			return fmt.Errorf("%s does not hold the planned content", st.Dropin)
		}
		if h.UnitOOMPolicy != oomPolicy {
			return fmt.Errorf("systemctl show -p OOMPolicy %s says %s, not %s: another drop-in overrides it?", st.Unit, orUnknown(h.UnitOOMPolicy), oomPolicy)
		}
		if want := strconv.Itoa(st.PostmasterAdj); h.UnitScoreAdj != want {
			return fmt.Errorf("systemctl show -p OOMScoreAdjust %s says %s, not %s: another drop-in overrides it?", st.Unit, orUnknown(h.UnitScoreAdj), want)
		}
	}
	if !st.PG.Running || st.Restart || st.Unshieldable {
		return nil
	}
	if !h.Read || h.Start != st.PG.StartTime {
		return fmt.Errorf("postmaster pid %d is gone or restarted", st.PG.PID)
	}
	return checkShield(st.PG.PID, h, st.PostmasterAdj)
}

// checkShield confirms the postmaster runs at want and that its children
// reset themselves (the environment says so and no child read differs).
func checkShield(pid int, h *hostState, want int) error {
	if h.Adj != want {
		return fmt.Errorf("postmaster pid %d runs with oom_score_adj %d, not %d", pid, h.Adj, want)
	}
	if want != backendScoreAdj && !h.resets() {
		return fmt.Errorf("postmaster pid %d has oom_score_adj %d but its children do not reset it (%s): worse than no shield", pid, h.Adj, describeEnv(h))
	}
	if len(h.Children) == 0 {
		return fmt.Errorf("postmaster pid %d: no child process read to confirm the reset", pid)
	}
	if n := h.inheriting(); n > 0 {
		return fmt.Errorf("postmaster pid %d: %s", pid, describeChildren(h))
	}
	return nil
}
