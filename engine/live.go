package engine

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/pgtune/pgtune/engine/plan"
)

// A live value is state the kernel keeps for something other than the
// kernel as a whole, such as one process's oom_score_adj: it has no
// sysctl key and no file to back up, and it lives only as long as what
// it belongs to. The module that sets one journals its previous value
// (journal kind "live") and reads and writes it for rollback.
//
// LiveKeeper is implemented by modules that set live values. Keys are
// the module's own (say "oom_score_adj:postmaster:1234:99887"): they name
// what the value belongs to precisely enough that rollback never writes
// it to anything else.
type LiveKeeper interface {
	// ReadLive returns the value key names now; ok is false when what it
	// belongs to is gone (the process exited): there is nothing to restore.
	ReadLive(ctx context.Context, t *Target, key string) (value string, ok bool, err error)
	// WriteLive sets the value key names, which the module checks first.
	WriteLive(ctx context.Context, t *Target, key, value string) error
}

// liveKeyPattern is what a live value's key looks like: words joined by
// colons, no path, no space.
var liveKeyPattern = regexp.MustCompile(`^[a-z0-9_]+(:[A-Za-z0-9_.-]+){0,8}$`)

// SetLive journals key's current value (before) for module, then runs
// set. Without a journal (check mode, tests) it only runs set.
func (t *Target) SetLive(ctx context.Context, key, before string, set func(context.Context) error) error {
	if !liveKeyPattern.MatchString(key) || len(key) > 200 {
		return fmt.Errorf("invalid live value key %q", key)
	}
	t.dropCache()
	if t.Journal != nil {
		if err := t.Journal.recordLive(ctx, t.Module, key, before); err != nil {
			return err
		}
	}
	return set(ctx)
}

func (j *Journal) recordLive(ctx context.Context, module, key, before string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range j.Entries {
		if e.Kind == "live" && e.Key == key {
			return nil // the first value of the run is the one to return to
		}
	}
	j.Entries = append(j.Entries, JournalEntry{Kind: "live", Module: module, Key: key, Before: before})
	return j.saveLocked(ctx)
}

// validLive checks a live entry's shape (validEntry's case "live").
func validLive(e JournalEntry) error {
	switch {
	case !liveKeyPattern.MatchString(e.Key) || len(e.Key) > 200:
		return errors.New("not a live value key")
	case len(e.Before) > 256 || hasControl(e.Before):
		return errors.New("the previous value is not a value")
	case e.Path != "" || e.Backup != "" || e.Existed:
		return errors.New("a live value entry with a file")
	}
	return nil
}

// liveKind: a live value a module set (live.go). The module that
// recorded it reads and writes it back; a value whose owner is gone has
// nothing to put back.
type liveKind struct{}

func (liveKind) check(e JournalEntry, _ string) error {
	if err := validLive(e); err != nil {
		return err
	}
	if e.Unit != "" || e.Action != "" {
		return errors.New("a live value entry with a service action")
	}
	return nil
}

func (liveKind) target(e JournalEntry) string { return e.Key }
func (liveKind) describe(e JournalEntry) string {
	return withBefore(printable(e.Key), e.Before)
}

func (liveKind) plan(ctx context.Context, t *Target, e JournalEntry, _ *undoSet) (undoStep, error) {
	s := undoStep{entry: e}
	k, err := liveKeeper(t, e)
	if err != nil {
		return s, err
	}
	current, ok, err := k.ReadLive(ctx, t, e.Key)
	if err != nil {
		return s, fmt.Errorf("%s: %w", e.Key, err)
	}
	if !ok {
		s.note = fmt.Sprintf("%s: gone since it was changed (restarted?): nothing to put back", e.Key)
		return s, nil
	}
	if current != e.Before {
		s.change = &plan.Change{Kind: plan.KindAction, Target: e.Key, Before: current, After: e.Before}
	}
	return s, nil
}

func (liveKind) undo(ctx context.Context, t *Target, s undoStep) error {
	k, err := liveKeeper(t, s.entry)
	if err != nil {
		return err
	}
	return k.WriteLive(ctx, t, s.entry.Key, s.entry.Before)
}

// liveKeeper is the module that recorded e, as a LiveKeeper.
func liveKeeper(t *Target, e JournalEntry) (LiveKeeper, error) {
	k, ok := t.modules[e.Module].(LiveKeeper)
	if !ok {
		return nil, fmt.Errorf("module %s keeps no live values (%s)", printable(e.Module), printable(e.Key))
	}
	return k, nil
}
