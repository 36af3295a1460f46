package engine

import (
	"context"
	"fmt"
	"strings"
)

// Kept runs and rollback of the files they share with other runs. A
// kept run (a switchover's role changes) may edit a file a settings run
// edited before it: the switchover repoints a standby's primary_conninfo
// in the postgresql.conf whose include line the settings run added.
// Putting that file back as it was before the settings run would put the
// old primary_conninfo back too, moving the standby to the old primary:
// a role change undone after all. So rollback restores the earlier run's
// copy with each later kept run's own edit carried over onto it: the
// lines that run changed (from its copy of the file to the content after
// it, the next run's copy or the file now), found in the restored copy
// by the lines around them. An edit that does not find its place exactly
// once is an error: that file is left for the user, and nothing is done.

// keptEdit is one kept run's edit of a file, after the run rollback
// goes back to.
type keptEdit struct {
	run string
	// before is the kept run's copy of the file (existed: there was one);
	// after is the next run's copy, "" for the file as it is now.
	before  string
	existed bool
	after   string
}

// keptEdits lists, for every file an undone run changed, the edits kept
// runs made to it afterwards, in run order. journals are in run order;
// runs before to are not undone.
func keptEdits(journals []JournalRecord, to string) map[string][]keptEdit {
	out := map[string][]keptEdit{}
	undone := map[string]bool{} // a file an undone run changed
	waiting := map[string]int{} // index+1 of the edit waiting for its after
	for _, j := range journals {
		if j.RunID < to {
			continue
		}
		for _, e := range j.Entries {
			if e.Kind != "file" {
				continue
			}
			if i := waiting[e.Path]; i > 0 {
				out[e.Path][i-1].after = e.Backup
				if !e.Existed {
					out[e.Path][i-1].after = "/dev/null"
				}
				delete(waiting, e.Path)
			}
			switch {
			case j.Kept == "":
				undone[e.Path] = true
			case undone[e.Path]:
				out[e.Path] = append(out[e.Path], keptEdit{run: j.RunID, before: e.Backup, existed: e.Existed})
				waiting[e.Path] = len(out[e.Path])
			}
		}
	}
	return out
}

// carryKept returns restored (a file's content before the run rollback
// goes back to) with the kept runs' later edits of it carried over;
// current is the file now.
func (u *undoSet) carryKept(ctx context.Context, t *Target, p, restored, current string) (string, error) {
	read := func(f string) (string, error) {
		if f == "/dev/null" {
			return "", nil
		}
		b, ok, err := t.ReadFile(ctx, f)
		if err != nil {
			return "", err // "read FILE: …" already
		}
		if !ok {
			return "", fmt.Errorf("read %s: no such file", printable(f))
		}
		return string(b), nil
	}
	for _, k := range u.kept[p] {
		before, after := "", current
		var err error
		if k.existed {
			if before, err = read(k.before); err != nil {
				return "", err
			}
		}
		if k.after != "" {
			if after, err = read(k.after); err != nil {
				return "", err
			}
		}
		next, ok := carryEdit(restored, before, after)
		if !ok {
			return "", fmt.Errorf("%s: kept run %s changed it since, and its change does not fit the content to put back (the lines around it differ): restore it by hand, keeping that run's change", printable(p), k.run)
		}
		restored = next
	}
	return restored, nil
}

// carryEdit applies the edit that turned before into after to base: the
// lines between their common head and tail are replaced in base where
// they stand between the same neighbouring lines, once. ok is false when
// that place is not found exactly once.
func carryEdit(base, before, after string) (string, bool) {
	if before == after {
		return base, true
	}
	a, b, c := splitLines(before), splitLines(after), splitLines(base)
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	old, repl := a[head:len(a)-tail], b[head:len(b)-tail]
	at := -1
	for i := 0; i+len(old) <= len(c); i++ {
		if !sameLines(c[i:i+len(old)], old) {
			continue
		}
		if head > 0 && (i == 0 || c[i-1] != a[head-1]) || head == 0 && i != 0 {
			continue
		}
		end := i + len(old)
		if tail > 0 && (end >= len(c) || c[end] != a[len(a)-tail]) || tail == 0 && end != len(c) {
			continue
		}
		if at >= 0 {
			return "", false
		}
		at = i
	}
	if at < 0 {
		return "", false
	}
	out := append(append(append([]string{}, c[:at]...), repl...), c[at+len(old):]...)
	return strings.Join(out, ""), true
}

// splitLines splits s after each newline (a last line without one is
// kept as it is).
func splitLines(s string) []string {
	l := strings.SplitAfter(s, "\n")
	if len(l) > 0 && l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}

func sameLines(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
