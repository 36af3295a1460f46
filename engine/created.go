package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pgtune/pgtune/engine/plan"
)

// A created thing is something a module makes on a host that did not
// exist before and that only the work that made it knows what to do with
// once it is done (a replication slot made on a standby before a
// switchover promotes it). The module journals it (kind "created")
// before making it, and settles the entry (JournalEntry.Settled) once the
// work has finished with it, whichever way. An entry left unsettled is
// what a run killed in between leaves: rollback asks the module whether
// the thing is still there and may go, removes it if so, and says what it
// left and why otherwise.
//
// Remover is implemented by modules that create things. Keys are the
// module's own ("replication_slot:5432:standby1"), precise enough that
// removing never touches anything else.
type Remover interface {
	// Removable reads what key names: present is false when it is gone;
	// keep says why it must stay (in use...), "" when it may be removed.
	Removable(ctx context.Context, t *Target, key string) (present bool, keep string, err error)
	// Remove removes it, checking first as Removable does.
	Remove(ctx context.Context, t *Target, key string) error
}

// maxSettled bounds an entry's Settled text.
const maxSettled = 200

// RecordCreated journals, before the module makes it, that key is about
// to be made. Without a journal (check mode, tests) it does nothing.
func (t *Target) RecordCreated(ctx context.Context, key string) error {
	if !liveKeyPattern.MatchString(key) || len(key) > 200 {
		return fmt.Errorf("invalid created key %q", key)
	}
	if t.Journal == nil {
		return nil
	}
	return t.Journal.record(ctx, JournalEntry{Kind: "created", Module: t.Module, Key: key})
}

// SettleCreated records on key's entry what became of it (how: "dropped
// again", "kept: ..."): rollback then leaves it alone.
func (t *Target) SettleCreated(ctx context.Context, key, how string) error {
	if t.Journal == nil {
		return nil
	}
	how = strings.TrimSpace(how)
	if how == "" || len(how) > maxSettled || hasControl(how) {
		return fmt.Errorf("invalid settlement %q", how)
	}
	j := t.Journal
	j.mu.Lock()
	defer j.mu.Unlock()
	for i := range j.Entries {
		if e := &j.Entries[i]; e.Kind == "created" && e.Key == key {
			if e.Settled == how {
				return nil
			}
			e.Settled = how
			return j.saveLocked(ctx)
		}
	}
	return fmt.Errorf("journal: %s was never recorded as created", key)
}

// createdKind: a thing a module made (see Remover).
type createdKind struct{}

func (createdKind) check(e JournalEntry, _ string) error {
	switch {
	case !liveKeyPattern.MatchString(e.Key) || len(e.Key) > 200:
		return errors.New("not a created key")
	case len(e.Settled) > maxSettled || hasControl(e.Settled):
		return errors.New("its settlement is not a text")
	case e.Path != "" || e.Backup != "" || e.Existed:
		return errors.New("a created entry with a file")
	case e.Before != "":
		return errors.New("a created entry with a previous value")
	case e.Unit != "" || e.Action != "":
		return errors.New("a created entry with a service action")
	}
	return nil
}

func (createdKind) target(e JournalEntry) string   { return e.Key }
func (createdKind) describe(e JournalEntry) string { return printable(e.Key) }

func (createdKind) plan(ctx context.Context, t *Target, e JournalEntry, _ *undoSet) (undoStep, error) {
	s := undoStep{entry: e}
	if e.Settled != "" {
		return s, nil
	}
	r, err := remover(t, e)
	if err != nil {
		return s, err
	}
	present, keep, err := r.Removable(ctx, t, e.Key)
	switch {
	case err != nil:
		return s, fmt.Errorf("%s: %w", e.Key, err)
	case !present:
	case keep != "":
		s.note = fmt.Sprintf("%s: made by a run that did not finish with it, left: %s", e.Key, keep)
	default:
		s.change = &plan.Change{Kind: plan.KindAction, Target: e.Key,
			Before: "made by a run that did not finish with it, unused", After: "(removed)"}
		// Removing it is no reason to restart what the module configures.
		s.alone = true
	}
	return s, nil
}

func (createdKind) undo(ctx context.Context, t *Target, s undoStep) error {
	r, err := remover(t, s.entry)
	if err != nil {
		return err
	}
	if err := r.Remove(ctx, t, s.entry.Key); err != nil {
		return fmt.Errorf("%s: %w", s.entry.Key, err)
	}
	return nil
}

// remover is the module that recorded e, as a Remover.
func remover(t *Target, e JournalEntry) (Remover, error) {
	r, ok := t.modules[e.Module].(Remover)
	if !ok {
		return nil, fmt.Errorf("module %s creates nothing (%s)", printable(e.Module), printable(e.Key))
	}
	return r, nil
}

// CreatedLeft is a thing a run made on the host and never settled.
type CreatedLeft struct{ Run, Key string }

// UnsettledCreated lists what module made on the host in runs that never
// settled it (a run killed in between), oldest run first, one per key,
// from the journals in the host's state directory. Each journal is
// checked as rollback checks it (its shape; nothing here acts on it).
// None when pgtune never changed the host.
func (t *Target) UnsettledCreated(ctx context.Context, module string) ([]CreatedLeft, error) {
	journals, err := readJournals(ctx, t, func(JournalEntry) error { return nil })
	if err != nil {
		return nil, err
	}
	var out []CreatedLeft
	seen := map[string]bool{}
	for _, j := range journals {
		if j.Kept != "" {
			continue
		}
		for _, e := range j.Entries {
			if e.Kind == "created" && e.Module == module && e.Settled == "" && !seen[e.Key] {
				seen[e.Key] = true
				out = append(out, CreatedLeft{Run: j.RunID, Key: e.Key})
			}
		}
	}
	return out, nil
}
