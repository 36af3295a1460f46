package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/aymanbagabas/go-udiff"

	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/transport"
)

// entryKind is everything the engine knows about one kind of journal
// entry: how a recorded entry must look, what it changed, and how to put
// that back. Adding a kind is adding a case to kindOf.
type entryKind interface {
	// check validates an entry's shape; runDir is its run's directory.
	// Entries are read from the host: nothing in them is trusted.
	check(e JournalEntry, runDir string) error
	// target is what the module that recorded e is asked it manages
	// (TargetManager.Manages).
	target(e JournalEntry) string
	// describe names e's target for messages.
	describe(e JournalEntry) string
	// plan reads the host and returns the step that undoes e, with the
	// change it makes (none when the host is already as before).
	plan(ctx context.Context, t *Target, e JournalEntry, u *undoSet) (undoStep, error)
	// undo carries a planned step out.
	undo(ctx context.Context, t *Target, s undoStep) error
}

// kindOf returns the kind named by a journal entry, nil when unknown.
func kindOf(kind string) entryKind {
	switch kind {
	case "file":
		return fileKind{}
	case "sysctl":
		return sysctlKind{}
	case "sysfs":
		return sysfsKind{}
	case "service":
		return serviceKind{}
	case "live":
		return liveKind{}
	case "created":
		return createdKind{}
	}
	return nil
}

// identity is what makes two entries of a run the same change: only the
// first is recorded.
func (e JournalEntry) identity() string {
	return e.Kind + ":" + e.Path + ":" + e.Key + ":" + e.Unit + ":" + e.Action
}

// fileKind: a file replaced, created or removed. Undo writes the backup
// back (mode and owner kept) or removes a file that did not exist.
type fileKind struct{}

func (fileKind) check(e JournalEntry, runDir string) error {
	if !cleanAbs(e.Path) {
		return errors.New("the path is not a clean absolute path")
	}
	if e.Backup != path.Join(runDir, "files", e.Path) {
		return fmt.Errorf("its backup %s is not where pgtune keeps it (%s)", strconv.Quote(e.Backup), path.Join(runDir, "files", e.Path))
	}
	if e.Key != "" || e.Before != "" {
		return errors.New("a file entry with a kernel key or value")
	}
	if e.Unit != "" || e.Action != "" {
		return errors.New("a file entry with a service action")
	}
	return nil
}

func (fileKind) target(e JournalEntry) string   { return e.Path }
func (fileKind) describe(e JournalEntry) string { return printable(e.Path) }

func (fileKind) plan(ctx context.Context, t *Target, e JournalEntry, u *undoSet) (undoStep, error) {
	s := undoStep{entry: e}
	current, exists, err := t.ReadFile(ctx, e.Path)
	if err != nil {
		return s, err
	}
	// An unmarked entry (an older journal) of a file holding secrets is
	// hidden all the same (journal_secrets.go).
	e.Sensitive = e.Sensitive || fileHoldsSecrets(t, e.Path, current)
	s.entry = e
	if !e.Existed && len(u.kept[e.Path]) > 0 {
		return s, fmt.Errorf("%s: kept run %s changed it since, and removing it would undo that change: remove it by hand if you mean to", printable(e.Path), u.kept[e.Path][0].run)
	}
	if !e.Existed {
		if exists {
			s.change = &plan.Change{Kind: plan.KindFile, Target: e.Path, Before: string(current), After: "(removed)",
				Diff: udiff.Unified(e.Path, "/dev/null", string(current), ""), Sensitive: e.Sensitive}
		}
		return s, nil
	}
	prev, ok, err := t.ReadFile(ctx, e.Backup)
	if err != nil || !ok {
		// Without the copy (made before the rename) the file was never
		// replaced: nothing to put back.
		return s, err
	}
	res, err := t.Transport.Run(ctx, transport.Command{Op: OpStat, Args: []string{"stat", "-c", "%a %U:%G", e.Backup}, Become: t.Become})
	if err != nil {
		return s, err
	}
	if len(u.kept[e.Path]) > 0 {
		carried, err := u.carryKept(ctx, t, e.Path, string(prev), string(current))
		if err != nil {
			return s, err
		}
		prev = []byte(carried)
	}
	e.Sensitive = e.Sensitive || fileHoldsSecrets(t, e.Path, prev)
	s.entry = e
	s.content = prev
	s.mode, s.owner, _ = strings.Cut(strings.TrimSpace(string(res.Stdout)), " ")
	if exists && string(current) == string(prev) {
		return s, nil
	}
	// A sensitive file's change keeps its content (apply compares it
	// with the re-check's) but is Sensitive: no report shows it.
	s.change = &plan.Change{Kind: plan.KindFile, Target: e.Path, Before: string(current), After: string(prev),
		Diff: udiff.Unified(e.Path, e.Path, string(current), string(prev)), Sensitive: e.Sensitive}
	return s, nil
}

func (fileKind) undo(ctx context.Context, t *Target, s undoStep) error {
	if !s.entry.Existed {
		return t.RemoveFile(ctx, s.entry.Path)
	}
	// Putting a sensitive file back is journaled as sensitive too.
	return t.writeFile(ctx, s.entry.Path, s.content, transport.WriteOptions{Mode: s.mode, Owner: s.owner}, s.entry.Sensitive)
}

// sysctlKind: a live kernel value. Undo sets the value before, except the
// half of a linked pair that the kernel zeroes when the other half is set.
type sysctlKind struct{}

// sysctlKeyPattern is a kernel key as sysctl(8) names it.
var sysctlKeyPattern = regexp.MustCompile(`^[a-z0-9_]+(\.[a-z0-9_-]+)+$`)

func (sysctlKind) check(e JournalEntry, _ string) error {
	if !sysctlKeyPattern.MatchString(e.Key) {
		return errors.New("not a kernel key")
	}
	if !kernelValue(e.Before) {
		return errors.New("the previous value is not a kernel value")
	}
	if e.Path != "" || e.Backup != "" || e.Existed {
		return errors.New("a kernel entry with a file")
	}
	if e.Unit != "" || e.Action != "" {
		return errors.New("a kernel entry with a service action")
	}
	return nil
}

func (sysctlKind) target(e JournalEntry) string { return e.Key }
func (sysctlKind) describe(e JournalEntry) string {
	return withBefore(printable(e.Key), e.Before)
}

func (sysctlKind) plan(ctx context.Context, t *Target, e JournalEntry, u *undoSet) (undoStep, error) {
	s := undoStep{entry: e}
	current, err := t.ReadSysctl(ctx, e.Key)
	if err != nil {
		return s, err
	}
	if current == e.Before || u.linkedZeroed(e) {
		return s, nil
	}
	s.change = &plan.Change{Kind: plan.KindSysctl, Target: e.Key, Before: current, After: e.Before}
	return s, nil
}

func (sysctlKind) undo(ctx context.Context, t *Target, s undoStep) error {
	return t.SetSysctl(ctx, s.entry.Key, s.entry.Before)
}

// sysfsKind: a value written under /sys (transparent huge pages, ...).
// Undo writes the value before back, as root.
type sysfsKind struct{}

func (sysfsKind) check(e JournalEntry, _ string) error {
	if err := validSysfsEntry(e); err != nil {
		return err
	}
	if e.Unit != "" || e.Action != "" {
		return errors.New("a sysfs entry with a service action")
	}
	return nil
}

func (sysfsKind) target(e JournalEntry) string { return e.Path }
func (sysfsKind) describe(e JournalEntry) string {
	return withBefore(printable(e.Path), e.Before)
}

func (sysfsKind) plan(ctx context.Context, t *Target, e JournalEntry, _ *undoSet) (undoStep, error) {
	s := undoStep{entry: e}
	current, err := t.ReadSysfs(ctx, e.Path)
	if err != nil {
		return s, err
	}
	if current == SysfsValue(e.Before) {
		return s, nil
	}
	s.change = &plan.Change{Kind: plan.KindSysfs, Target: e.Path, Before: current, After: e.Before}
	return s, nil
}

// undo writes the value back without journaling it again (the entry is
// the record).
func (sysfsKind) undo(ctx context.Context, t *Target, s undoStep) error {
	return t.writeSysfs(ctx, s.entry.Path, SysfsValue(s.entry.Before))
}

// serviceKind: a systemd action run on the host. It changed nothing
// itself, it acted on what came before it (a unit file, a drop-in), so
// undo runs it again once everything older is back: a daemon-reload after
// the drop-in is restored, not before.
type serviceKind struct{}

// serviceActions are the actions Target.Service runs. Each is undone by
// running it again: it only makes systemd or the unit take up what is on
// disk. Actions whose undo needs the state before (start, stop, enable)
// are not offered.
var serviceActions = map[string]bool{"daemon-reload": true, "restart": true, "try-restart": true, "reload": true}

// unitPattern is a systemd unit name: no option, no path.
var unitPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9:_.@\\-]{0,250}\.(service|socket|timer|target|mount|path|slice|scope)$`)

func validService(unit, action string) error {
	if !serviceActions[action] {
		return fmt.Errorf("service action %s is not one pgtune runs", strconv.Quote(action))
	}
	if action == "daemon-reload" {
		if unit != "" {
			return errors.New("daemon-reload names no unit")
		}
		return nil
	}
	if !unitPattern.MatchString(unit) {
		return fmt.Errorf("%s is not a systemd unit name", strconv.Quote(unit))
	}
	return nil
}

func (serviceKind) check(e JournalEntry, _ string) error {
	if err := validService(e.Unit, e.Action); err != nil {
		return err
	}
	if e.Path != "" || e.Backup != "" || e.Existed || e.Key != "" || e.Before != "" {
		return errors.New("a service entry with a file or kernel value")
	}
	return nil
}

func (serviceKind) target(e JournalEntry) string {
	if e.Unit == "" {
		return e.Action
	}
	return e.Unit
}

func (serviceKind) describe(e JournalEntry) string {
	return printable(strings.TrimSpace(e.Action + " " + e.Unit))
}

// plan defers the action: it runs after the other steps of its module,
// and only when one of them changes something (see undoSet.plan).
func (serviceKind) plan(_ context.Context, _ *Target, e JournalEntry, _ *undoSet) (undoStep, error) {
	return undoStep{entry: e, rerun: true}, nil
}

func (serviceKind) undo(ctx context.Context, t *Target, s undoStep) error {
	return t.Service(ctx, s.entry.Unit, s.entry.Action)
}

func cleanAbs(p string) bool { return path.IsAbs(p) && path.Clean(p) == p && !hasControl(p) }

func kernelValue(v string) bool { return len(v) <= 256 && !hasControl(v) }

func withBefore(target, before string) string {
	if before == "" {
		return target
	}
	return target + " = " + printable(before)
}
