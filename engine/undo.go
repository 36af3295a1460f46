package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pgtune/pgtune/engine/plan"
)

// The one way pgtune undoes changes: journal entries, newest first, each
// undone as its kind says (kindOf). Rollback plans it over the journals on
// the host; a module whose apply fails undoes what it recorded since a
// mark (Target.UndoSince).

// undoStep is one journal entry made ready to undo.
type undoStep struct {
	entry JournalEntry
	// change is what undoing it changes on the host; nil when the host is
	// already as before (or, for a file whose backup is absent, the file
	// was never replaced).
	change *plan.Change
	// content, mode and owner are a replaced file's previous state.
	content     []byte
	mode, owner string
	// rerun marks an action run again after its module's other steps.
	rerun bool
	// note says why there is nothing to undo when that is worth telling
	// (a live value whose process is gone).
	note string
	// alone: undoing it asks nothing more of its module (no service action
	// run again, no RollbackHook): removing a thing a module made (kind
	// created) changes nothing the module's service runs on.
	alone bool
}

// undoSet is the entries being undone together, newest first, and what
// the modules that recorded them declare.
type undoSet struct {
	entries []JournalEntry
	links   func(module, key string) []string
	// kept: the kept runs' later edits of the files put back (carry.go).
	kept map[string][]keptEdit
}

// LinkedSysctls is implemented by modules whose kernel keys move together:
// writing one makes the kernel change others (the map gives, for a key,
// the keys a write of it changes). The journal records the linked keys'
// values as well, and undo restores only the one that was in force.
type LinkedSysctls interface {
	LinkedSysctls() map[string][]string
}

// linkedZeroed reports whether e is the half of a linked pair that was
// zero before while its partner was not: restoring the partner restores
// it, and writing it would zero the partner again.
func (u *undoSet) linkedZeroed(e JournalEntry) bool {
	if e.Before != "0" || u.links == nil {
		return false
	}
	for _, partner := range u.links(e.Module, e.Key) {
		for _, o := range u.entries {
			if o.Kind == "sysctl" && o.Module == e.Module && o.Key == partner && o.Before != "0" {
				return true
			}
		}
	}
	return false
}

// plan reads the host for every entry and returns the steps in the order
// to take them: the entries' order (newest first, a module's entries
// together), except that a module's service actions come after its other
// steps, oldest first, and only when one of those changes something.
func (u *undoSet) plan(ctx context.Context, t *Target) ([]undoStep, error) {
	var steps []undoStep
	for start := 0; start < len(u.entries); {
		end := start
		for end < len(u.entries) && u.entries[end].Module == u.entries[start].Module {
			end++
		}
		group, err := u.planGroup(ctx, t, u.entries[start:end])
		if err != nil {
			return nil, err
		}
		steps = append(steps, group...)
		start = end
	}
	return steps, nil
}

func (u *undoSet) planGroup(ctx context.Context, t *Target, entries []JournalEntry) ([]undoStep, error) {
	var steps, reruns []undoStep
	changes := false
	for _, e := range entries {
		k := kindOf(e.Kind)
		if k == nil {
			return nil, fmt.Errorf("entry %s: unknown kind", describeEntry(e))
		}
		s, err := k.plan(ctx, t, e, u)
		if err != nil {
			return nil, err
		}
		if s.rerun {
			reruns = append([]undoStep{s}, reruns...)
			continue
		}
		changes = changes || (s.change != nil && !s.alone)
		steps = append(steps, s)
	}
	for _, s := range reruns {
		if changes {
			s.change = &plan.Change{Kind: plan.KindAction, Target: strings.TrimSpace("systemctl " + s.entry.Action + " " + s.entry.Unit),
				After: "run again once the above is back"}
		}
		steps = append(steps, s)
	}
	return steps, nil
}

// undoOptions say how runUndo goes.
type undoOptions struct {
	// after runs once the last step of a module that changed something
	// is done (rollback: RollbackHook).
	after func(ctx context.Context, module string) error
	// keepGoing goes on past a failed step, to put back as much as can
	// be; the errors are joined.
	keepGoing bool
}

// runUndo carries out the steps that change something, in order.
func runUndo(ctx context.Context, t *Target, steps []undoStep, opts undoOptions) error {
	module := t.Module
	defer func() { t.Module = module }()
	var errs []error
	changed := false
	for i, s := range steps {
		t.Module = s.entry.Module
		if s.change != nil {
			changed = changed || !s.alone
			if err := kindOf(s.entry.Kind).undo(ctx, t, s); err != nil {
				if !opts.keepGoing {
					return err
				}
				errs = append(errs, err)
			}
		}
		last := i == len(steps)-1 || steps[i+1].entry.Module != s.entry.Module
		if last && changed && opts.after != nil {
			if err := opts.after(ctx, s.entry.Module); err != nil {
				if !opts.keepGoing {
					return err
				}
				errs = append(errs, err)
			}
		}
		if last {
			changed = false
		}
	}
	return errors.Join(errs...)
}

// Mark is the point the run's journal has reached: UndoSince(mark) undoes
// what is recorded after it.
func (t *Target) Mark() JournalMark {
	if t.Journal == nil {
		return 0
	}
	return t.Journal.mark()
}

// UndoSince puts back everything recorded in the run's journal after m,
// newest first: files from the run's backups (a file that did not exist
// is removed), kernel and sysfs values, then service actions run again
// once what they acted on is back. It goes on past a failure, so as much
// as possible is put back, and returns every error. A change recorded
// before m is not undone, even if changed again since.
func (t *Target) UndoSince(ctx context.Context, m JournalMark) error {
	if t.Journal == nil {
		return errors.New("undo: no journal: nothing was recorded to undo")
	}
	recorded := t.Journal.since(m)
	entries := make([]JournalEntry, len(recorded))
	for i, e := range recorded {
		entries[len(recorded)-1-i] = e
	}
	u := &undoSet{entries: entries, links: t.linkedSysctls}
	steps, err := u.plan(ctx, t)
	if err != nil {
		return fmt.Errorf("undo: %w", err)
	}
	if err := runUndo(ctx, t, steps, undoOptions{keepGoing: true}); err != nil {
		return fmt.Errorf("undo: %w", err)
	}
	return nil
}

// linkedSysctls returns the keys the module declares a write of key
// changes (LinkedSysctls).
func (t *Target) linkedSysctls(module, key string) []string {
	if l, ok := t.modules[module].(LinkedSysctls); ok {
		return l.LinkedSysctls()[key]
	}
	return nil
}
