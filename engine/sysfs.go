package engine

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/pgtune/pgtune/engine/transport"
)

// maxKernelValue bounds a kernel value pgtune writes or records: kernel
// settings are short words or numbers.
const maxKernelValue = 256

// sysfsSelected is the word a sysfs choice file marks as in force:
// "always [madvise] never" reads as madvise.
var sysfsSelected = regexp.MustCompile(`\[([^\[\]\s]+)\]`)

// SysfsValue is the value a sysfs file's content says is in force: the
// bracketed word of a choice file (such files print every choice and
// bracket the selected one), else the trimmed content.
func SysfsValue(content string) string {
	if m := sysfsSelected.FindStringSubmatch(content); m != nil {
		return m[1]
	}
	return strings.TrimSpace(content)
}

// validSysfsPath accepts a clean absolute path under /sys/ without control
// characters: the only files SetSysfs writes.
func validSysfsPath(p string) error {
	if !strings.HasPrefix(p, "/sys/") || path.Clean(p) != p || hasControl(p) {
		return fmt.Errorf("%s is not a clean path under /sys/", printable(p))
	}
	return nil
}

// validKernelValue accepts what a kernel setting can be written as: short,
// one line, no control characters.
func validKernelValue(v string) error {
	if len(v) > maxKernelValue || hasControl(v) {
		return errors.New("not a kernel value (one short line)")
	}
	return nil
}

// ReadSysfs reads the value in force in a sysfs file (see SysfsValue).
func (t *Target) ReadSysfs(ctx context.Context, p string) (string, error) {
	if err := validSysfsPath(p); err != nil {
		return "", err
	}
	b, err := transport.ReadFile(ctx, t.Transport, p, false)
	if err != nil {
		return "", err
	}
	return SysfsValue(string(b)), nil
}

// sysfsScript writes $2 to the sysfs file $1. The kernel takes the value
// in one write; the redirection does not create files (sysfs has none to
// create), so a missing setting fails instead of leaving a stray file.
const sysfsScript = `[ -e "$1" ] || { echo "$1: no such kernel setting" >&2; exit 1; }
printf '%s\n' "$2" > "$1"`

// SetSysfs sets a kernel value through a file under /sys/, recording in
// the journal the value in force before (as ReadSysfs reads it) so
// rollback can write it back.
func (t *Target) SetSysfs(ctx context.Context, p, value string) error {
	if err := validSysfsPath(p); err != nil {
		return err
	}
	if err := validKernelValue(value); err != nil {
		return fmt.Errorf("%s=%s: %w", p, printable(value), err)
	}
	if t.Journal != nil {
		before, err := t.ReadSysfs(ctx, p)
		if err != nil {
			return err
		}
		if err := t.Journal.recordSysfs(ctx, t.Module, p, before); err != nil {
			return err
		}
	}
	return t.writeSysfs(ctx, p, value)
}

// writeSysfs writes value to the sysfs file p, as root.
func (t *Target) writeSysfs(ctx context.Context, p, value string) error {
	t.dropCache()
	if _, err := t.Transport.Run(ctx, transport.Command{Op: OpWriteSysfs,
		Args: []string{"sh", "-c", sysfsScript, "sh", p, value}, Become: t.Become}); err != nil {
		return fmt.Errorf("set %s=%s: %w", p, value, err)
	}
	return nil
}

// recordSysfs notes the value of the sysfs file p before its first change
// in the run: the state rollback returns to.
func (j *Journal) recordSysfs(ctx context.Context, module, p, before string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range j.Entries {
		if e.Kind == "sysfs" && e.Path == p {
			return nil
		}
	}
	j.Entries = append(j.Entries, JournalEntry{Kind: "sysfs", Module: module, Path: p, Before: before})
	return j.saveLocked(ctx)
}

// validSysfsEntry checks a sysfs journal entry's shape.
func validSysfsEntry(e JournalEntry) error {
	if err := validSysfsPath(e.Path); err != nil {
		return err
	}
	if err := validKernelValue(e.Before); err != nil {
		return fmt.Errorf("the previous value is %w", err)
	}
	if e.Key != "" || e.Backup != "" || e.Existed {
		return errors.New("a sysfs entry with a kernel key or a file backup")
	}
	return nil
}
