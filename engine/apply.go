package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/pgtune/pgtune/engine/plan"
)

// Apply carries out the plan on every host that planned cleanly. For each
// module in order it re-checks the host, refuses if the result differs from
// the plan that was shown, applies, verifies, and re-reads the facts before
// the next module.
func (s *Session) Apply(ctx context.Context) {
	s.phase = "apply"
	if s.applyInClusterOrder(ctx) { // clusters.go
		return
	}
	s.each(ctx, func(ctx context.Context, hr *hostRun) {
		// Done is told here, once a panic in applyHost has become the
		// host's error (runHost): never as verified in between.
		s.runHost(ctx, hr, s.applyHost)
		hostApplied(ctx, hr, &hr.started) // interrupt.go
	})
}

// applyHost applies and verifies one host's plan. The caller tells the
// Done hook (ApplyHooks) how it came out: Apply, or a cluster wave after
// its standby's wait (clusters.go).
func (s *Session) applyHost(ctx context.Context, hr *hostRun) {
	started := false
	defer func() { hr.started = started }() // also when it panics
	if hr.err != nil || hr.tr == nil || hr.skipped {
		// Failed, or nothing to change (its connection is already closed).
		return
	}
	if hr.err = refusal(hr); hr.err != nil {
		return
	}
	ctx, unlock, err := s.lockHost(ctx, hr)
	if err != nil {
		hr.err = err
		return
	}
	defer unlock()
	log := s.log(hr)
	j := NewJournal(s.runner.RunID, hr.host.Name, hr.stateDirPath(), hr.tr, hr.host.Conn.Become)
	t := s.target(hr, j)
	shrinkAt := shrinkAfter(hr.steps) // capacity.go
	var held []heldShrink
	shrunk := false
	for i, st := range hr.steps {
		name := st.module.Name()
		if hr.err = stopBefore(ctx, hr, name); hr.err != nil {
			return
		}
		started = true
		if i > 0 && (hr.steps[i-1].plan.HasChanges() || shrunk) {
			// The previous module changed the host: plan from what it is now.
			if err := s.gather(ctx, hr, false); err != nil {
				hr.err = err
				return
			}
			outputs := t.outputs
			t = s.target(hr, j)
			for m, out := range outputs {
				t.setOutputs(m, out)
				_ = t.Scope.Set(m, out)
			}
		}
		t.Module = name
		p, err := st.module.Check(ctx, t, st.params)
		if err != nil {
			hr.err = fmt.Errorf("%s: %s: re-check: %w", hr.host.Name, name, err)
			return
		}
		markSensitive(p, hr.secrets)
		if !plan.SameChanges(p.Changes, st.plan.Changes) {
			hr.err = fmt.Errorf("%s: %s: the host changed since the plan was shown (%s); nothing more was applied, run again",
				hr.host.Name, name, describeMove(st.plan.Changes, p.Changes))
			return
		}
		if p.HasChanges() {
			log.Info("apply", "module", name, "changes", len(p.Changes))
			if err := st.module.Apply(ctx, t, p); err != nil {
				hr.err = fmt.Errorf("%s: %s: %w", hr.host.Name, name, err)
				log.Debug("apply failed", "module", name, "err", err)
				return
			}
			hr.applied = append(hr.applied, p.Changes...)
		}
		if after, ok := shrinkAt[i]; ok {
			// Verified once its shrink is made (capacity.go).
			held = append(held, heldShrink{step: st, plan: p, after: after})
		} else if err := st.module.Verify(ctx, t, p); err != nil {
			hr.err = fmt.Errorf("%s: %s: verify: %w", hr.host.Name, name, err)
			log.Debug("verify failed", "module", name, "err", err)
			return
		}
		st.plan = p
		if err := s.bindOutputs(t, name, p); err != nil {
			hr.err = fmt.Errorf("%s: %s: %w", hr.host.Name, name, err)
			return
		}
		if held, shrunk, hr.err = s.finishShrinks(ctx, hr, t, held, i); hr.err != nil {
			return
		}
	}
}

func describeMove(planned, now []plan.Change) string {
	key := func(c plan.Change) string { return c.Target }
	was := map[string]plan.Change{}
	for _, c := range planned {
		was[key(c)] = c
	}
	var diffs []string
	for _, c := range now {
		p, ok := was[key(c)]
		switch {
		case !ok && c.Sensitive:
			diffs = append(diffs, c.Target+": new change (sensitive)")
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: new change %s → %s", c.Target, short(c.Before), short(c.After)))
		case (p.Before != c.Before || p.After != c.After) && (p.Sensitive || c.Sensitive):
			diffs = append(diffs, c.Target+": changed since the plan (sensitive)")
		case p.Before != c.Before || p.After != c.After:
			diffs = append(diffs, fmt.Sprintf("%s: planned %s → %s, now %s → %s", c.Target, short(p.Before), short(p.After), short(c.Before), short(c.After)))
		}
		delete(was, key(c))
	}
	for t := range was {
		diffs = append(diffs, t+": no longer needed")
	}
	sort.Strings(diffs)
	if len(diffs) == 0 {
		return "changes reordered"
	}
	return strings.Join(diffs, "; ")
}

func short(s string) string {
	if s == "" {
		return "(unset)"
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 || len(s) > 60 {
		return "(file content)"
	}
	return s
}
