package oom

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aymanbagabas/go-udiff"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
)

// State is what Check hands to Apply and Verify.
type State struct {
	PG            *facts.Postgres
	PostmasterAdj int
	// Unit is the systemd unit that runs the cluster ("" when systemd
	// does not, or systemd: off); Dropin its drop-in and DropinBody the
	// content planned for it.
	Unit       string
	Dropin     string
	DropinBody []byte
	WriteDrop  bool // the drop-in changes
	Reload     bool // daemon-reload without a drop-in change
	// SetLive: the running postmaster's children reset themselves, so its
	// oom_score_adj is set live (from LiveBefore).
	SetLive    bool
	LiveBefore int
	// Restart: the postmaster runs without the reset in its environment;
	// only a start with it can shield it (pgconf restarts, one restart
	// for both).
	Restart bool
	// Unshieldable: the host refuses pgtune a lower oom_score_adj.
	Unshieldable bool
}

// Outputs: restart tells pgconf a restart is needed for the shield;
// postmaster_score_adj tells the restart path the policy's value.
const (
	OutRestart       = "restart"
	OutPostmasterAdj = "postmaster_score_adj"
)

// Check compares the postmaster (and the unit that runs it) with the
// policy. It changes nothing.
func (m *Module) Check(ctx context.Context, t *engine.Target, raw any) (*plan.ModulePlan, error) {
	if err := m.Validate(raw); err != nil {
		return nil, err
	}
	s, err := raw.(*Params).eval(t.Scope, false)
	if err != nil {
		return nil, err
	}
	p := &plan.ModulePlan{Module: Name}
	pg := t.Facts.Postgres
	if pg == nil {
		if t.Facts.PostgresError != "" {
			return nil, fmt.Errorf("find the cluster: %s", t.Facts.PostgresError)
		}
		p.Note("no PostgreSQL cluster found: no postmaster to shield")
		return p, nil
	}
	pid, unit := 0, debianUnit(pg)
	if pg.Running {
		// The unit comes from the postmaster's cgroup: asked as the
		// gather asked it ahead (FactSet).
		pid, unit = pg.PID, ""
	}
	h, err := readHost(ctx, t, pid, unit)
	if err != nil {
		return nil, err
	}
	if pg.Running && (!h.Read || h.Start != pg.StartTime) {
		return nil, fmt.Errorf("postmaster pid %d is gone or restarted since the facts were read: run again", pg.PID)
	}
	if s.postmasterAdj > backendScoreAdj && h.CanLower {
		// Written with CAP_SYS_RESOURCE (pgtune's root, or systemd's for
		// the drop-in), a score is also the least the process and every
		// child forked later may set (the kernel's oom_score_adj_min):
		// the backends' reset to 0 would fail, and each would stay a
		// preferred victim.
		return nil, fmt.Errorf("postmaster_score_adj %d: root here has CAP_SYS_RESOURCE, so the kernel would also make it the least every backend can reset itself to (oom_score_adj_min), and they would stay at %d instead of %d: use a value of at most %d",
			s.postmasterAdj, s.postmasterAdj, backendScoreAdj, backendScoreAdj)
	}
	st := &State{PG: pg, PostmasterAdj: s.postmasterAdj}
	p.State = st
	p.Outputs = map[string]any{OutPostmasterAdj: int64(s.postmasterAdj), OutRestart: false}

	if s.systemd {
		planUnit(p, st, h, pg)
	}
	if !pg.Running {
		if st.Unit == "" {
			p.Note(fmt.Sprintf("PostgreSQL is not running: pgtune shields the postmaster (oom_score_adj %d, children reset to %d) at every start it performs", s.postmasterAdj, backendScoreAdj))
		}
		return p, nil
	}
	planPostmaster(p, st, h, pg)
	p.Outputs[OutRestart] = st.Restart
	return p, nil
}

// planUnit plans the drop-in when systemd runs the cluster: systemd is
// PID 1, and the unit whose cgroup holds the postmaster has it as its main
// process (a postmaster started by hand from an ssh session sits in
// ssh.service's cgroup: that unit does not run it). For a stopped
// cluster, Debian's unit for it, when loaded.
func planUnit(p *plan.ModulePlan, st *State, h *hostState, pg *facts.Postgres) {
	switch {
	case !h.Systemd || h.Unit == "":
		return
	case h.UnitLoad != "loaded":
		p.Note(fmt.Sprintf("systemd unit %s is %s: no drop-in", h.Unit, orUnknown(h.UnitLoad)))
		return
	case pg.Running && h.UnitMainPID != pg.PID:
		p.Note(fmt.Sprintf("the postmaster (pid %d) is in %s's cgroup but is not its main process (%d): systemd does not run it, no drop-in", pg.PID, h.Unit, h.UnitMainPID))
		return
	}
	st.Unit, st.Dropin, st.DropinBody = h.Unit, dropinPath(h.Unit), dropinContent(st.PostmasterAdj)
	before := ""
	if h.DropinPresent {
		before = string(h.Dropin)
	}
	if !h.DropinPresent || before != string(st.DropinBody) {
		st.WriteDrop = true
		from := "a" + st.Dropin
		if !h.DropinPresent {
			from = "/dev/null"
		}
		p.Add(plan.Change{Kind: plan.KindFile, Target: st.Dropin, Before: before, After: string(st.DropinBody),
			Diff: udiff.Unified(from, "b"+st.Dropin, before, string(st.DropinBody))})
		p.Note(fmt.Sprintf("systemd: %s takes OOMPolicy=%s at daemon-reload, the rest at its next start", h.Unit, oomPolicy))
		return
	}
	if h.UnitOOMPolicy != oomPolicy {
		st.Reload = true
		p.Add(plan.Change{Kind: plan.KindAction, Target: "systemctl daemon-reload (" + h.Unit + ")",
			Before: "OOMPolicy=" + orUnknown(h.UnitOOMPolicy), After: "OOMPolicy=" + oomPolicy})
	}
}

// planPostmaster compares the running postmaster and its children with
// the policy.
func planPostmaster(p *plan.ModulePlan, st *State, h *hostState, pg *facts.Postgres) {
	want := st.PostmasterAdj
	resets := h.resets()
	inherit := h.inheriting()
	if h.Adj < 0 && (!resets || inherit > 0) {
		p.Note(fmt.Sprintf("WARNING: postmaster pid %d runs with oom_score_adj %d and its children do not reset it (%s): every backend is shielded too, which is worse than no shield — the OOM killer must then kill something else",
			pg.PID, h.Adj, describeChildren(h)))
	}
	if want < h.Adj && !h.CanLower {
		st.Unshieldable = true
		p.Note(fmt.Sprintf("this host does not let pgtune lower an oom_score_adj (no CAP_SYS_RESOURCE: a container?): postmaster pid %d stays at %d, not %d; shield it from outside (the container's OOM score settings)", pg.PID, h.Adj, want))
		return
	}
	target := fmt.Sprintf("postmaster pid %d oom_score_adj", pg.PID)
	// Live is safe when the children reset themselves, or when the value
	// is the one they should have anyway.
	live := resets || want == backendScoreAdj
	switch {
	case live && h.Adj != want:
		st.SetLive, st.LiveBefore = true, h.Adj
		p.Add(plan.Change{Kind: plan.KindAction, Target: target, Before: strconv.Itoa(h.Adj), After: strconv.Itoa(want)})
	case !live:
		// Setting the shield live now would be inherited by every backend
		// forked from now on: only a start with the environment shields.
		st.Restart = true
		p.Add(plan.Change{Kind: plan.KindAction, Target: target + " (at the restart)",
			Before: fmt.Sprintf("%d, %s", h.Adj, describeEnv(h)),
			After:  fmt.Sprintf("%d, PG_OOM_ADJUST_FILE=%s PG_OOM_ADJUST_VALUE=%d", want, adjustFile, backendScoreAdj)})
		p.Note("the shield needs the postmaster started with PG_OOM_ADJUST_FILE in its environment: pgconf restarts it (one restart for both); without pgconf in the play, or with restart: false, it stays pending until the next restart")
	case inherit > 0:
		p.Note(fmt.Sprintf("postmaster pid %d: %s", pg.PID, describeChildren(h)))
	}
}

func describeEnv(h *hostState) string {
	var parts []string
	if h.EnvFileSet {
		parts = append(parts, "PG_OOM_ADJUST_FILE="+h.EnvFile)
	} else {
		parts = append(parts, "PG_OOM_ADJUST_FILE unset")
	}
	if h.EnvValueSet {
		parts = append(parts, "PG_OOM_ADJUST_VALUE="+h.EnvValue)
	}
	return strings.Join(parts, " ")
}

func describeChildren(h *hostState) string {
	if len(h.Children) == 0 {
		return "no children read"
	}
	return fmt.Sprintf("%d of %d children read are not at %d", h.inheriting(), len(h.Children), backendScoreAdj)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
