package engine

import (
	"context"
	"fmt"

	"github.com/pgtune/pgtune/engine/plan"
)

// Capacity around restarts. Some modules provide capacity that the
// modules requiring them take at a restart: huge page pools, which a
// database server's restart maps. Such a change is safe in one order only: a pool
// grows before the restart that needs it, and shrinks after the restart
// that frees it. A server restarted onto a pool that is not there does not
// start, and a restart that fails is recovered on the old settings, which
// need the old pool still there.
//
// Apply runs a module before the modules that require it: right for
// growing. The part of a change that gives capacity back is held until
// they have run (ShrinkAfterDependents). When one of them fails, or the
// run is stopped before them, it is not made: the host keeps capacity it
// no longer needs, never loses capacity it still uses.
//
// Rollback undoes modules in the reverse order: right for shrinking. The
// undo steps that grow capacity are taken first, before any module is
// undone or restarted (CapacityGrower).

// ShrinkAfterDependents is implemented by modules part of whose change
// gives back capacity that the modules requiring them still use until
// they restart. Apply makes the rest of the change in the module's place;
// ApplyShrink makes that part once every module of the play that requires
// this one (directly or through another) has applied and verified, and the
// module's Verify runs after it.
type ShrinkAfterDependents interface {
	ApplyShrink(ctx context.Context, t *Target, p *plan.ModulePlan) error
}

// CapacityGrower is implemented by modules whose kernel values are such
// capacity. Rollback asks it about every step that undoes one of the
// module's journal entries: kind and target as in TargetManager, from the
// value now, to the value put back.
type CapacityGrower interface {
	GrowsCapacity(kind, target, from, to string) bool
}

// growFirst moves the steps that grow a module's capacity to the front,
// keeping the order within each group.
func growFirst(steps []undoStep, growers map[string]CapacityGrower) []undoStep {
	if len(growers) == 0 {
		return steps
	}
	grows := func(s undoStep) bool {
		g, ok := growers[s.entry.Module]
		return ok && s.change != nil && g.GrowsCapacity(s.entry.Kind, kindOf(s.entry.Kind).target(s.entry), s.change.Before, s.change.After)
	}
	out := make([]undoStep, 0, len(steps))
	for _, s := range steps {
		if grows(s) {
			out = append(out, s)
		}
	}
	for _, s := range steps {
		if !grows(s) {
			out = append(out, s)
		}
	}
	return out
}

// shrinkAfter says, for each step whose module holds a shrink back, after
// which step it is made: the last one whose module requires it, directly
// or through another step's module; its own when none does.
func shrinkAfter(steps []*step) map[int]int {
	out := map[int]int{}
	requires := make([]map[string]bool, len(steps)) // every module step j requires, transitively
	index := map[string]int{}
	for j, st := range steps {
		requires[j] = map[string]bool{}
		for _, r := range st.module.Requires() {
			k, ok := index[r]
			if !ok {
				continue // not in the play
			}
			requires[j][r] = true
			for n := range requires[k] {
				requires[j][n] = true
			}
		}
		index[st.module.Name()] = j
	}
	for i, st := range steps {
		if _, ok := st.module.(ShrinkAfterDependents); !ok {
			continue
		}
		out[i] = i
		for j := i + 1; j < len(steps); j++ {
			if requires[j][st.module.Name()] {
				out[i] = j
			}
		}
	}
	return out
}

// heldShrink is a module's plan whose shrink waits for its dependents.
type heldShrink struct {
	step  *step
	plan  *plan.ModulePlan
	after int // the step after which it is made
}

// finishShrinks makes the held shrinks due after step done and verifies
// their modules; it returns the shrinks still held and whether one
// changed the host.
func (s *Session) finishShrinks(ctx context.Context, hr *hostRun, t *Target, held []heldShrink, done int) ([]heldShrink, bool, error) {
	var left []heldShrink
	changed := false
	for _, h := range held {
		if h.after != done {
			left = append(left, h)
			continue
		}
		name := h.step.module.Name()
		t.Module = name
		if h.plan.HasChanges() {
			s.log(hr).Info("apply (held back until the modules that require it ran)", "module", name)
			if err := h.step.module.(ShrinkAfterDependents).ApplyShrink(ctx, t, h.plan); err != nil {
				return nil, changed, fmt.Errorf("%s: %s: %w", hr.host.Name, name, err)
			}
			changed = true
		}
		if err := h.step.module.Verify(ctx, t, h.plan); err != nil {
			return nil, changed, fmt.Errorf("%s: %s: verify: %w", hr.host.Name, name, err)
		}
	}
	return left, changed, nil
}
