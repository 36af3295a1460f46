package rollout

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestLoadRefusesStateItDidNotWrite: a resume acts on each host by its
// state, so a state file with a host state or run status pgtune does not
// write, a host listed twice or a host without a name is refused, naming
// the file and the line of the entry at fault, and left as it is.
func TestLoadRefusesStateItDidNotWrite(t *testing.T) {
	const id = "20261203T080000Z-aaaaaa"
	tests := []struct {
		name string
		edit func(string) string
		// want is the error after "run state FILE: "; LINE(h) is the line
		// of host h's entry, LINE2(h) of its second.
		want string
	}{
		{"unknown host state", func(s string) string {
			return strings.Replace(s, `"state": "failed"`, `"state": "done"`, 1)
		}, `LINE(db2)host "db2": unknown state "done" (pgtune writes verified, pending_restart, failed, not_reached, in_progress): not resumed`},
		{"empty host state", func(s string) string {
			return strings.Replace(s, `"state": "verified"`, `"state": ""`, 1)
		}, `LINE(db1)host "db1": unknown state "" (pgtune writes verified, pending_restart, failed, not_reached, in_progress): not resumed`},
		{"host listed twice", func(s string) string {
			return strings.Replace(s, `"name": "db3"`, `"name": "db1"`, 1)
		}, `LINE2(db1)host "db1" is listed twice (first at line N(db1)): not resumed`},
		{"host without a name", func(s string) string {
			return strings.Replace(s, `"name": "db2"`, `"name": ""`, 1)
		}, `LINE()host entry 2 has no name: not resumed`},
		{"unknown run status", func(s string) string {
			return strings.Replace(s, `"status": "interrupted"`, `"status": "paused"`, 1)
		}, `unknown run status "paused" (pgtune writes running, interrupted, stopped, partial, finished): not resumed`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			st := NewState(dir, id, time.Now())
			st.Status = Interrupted
			st.Host("db1").State = Verified
			st.Host("db2").State = Failed
			st.Host("db3").State = NotReached
			if err := st.Save(); err != nil {
				t.Fatal(err)
			}
			orig, err := os.ReadFile(st.Path())
			if err != nil {
				t.Fatal(err)
			}
			edited := tc.edit(string(orig))
			if edited == string(orig) {
				t.Fatal("the edit changed nothing")
			}
			if err := os.WriteFile(st.Path(), []byte(edited), 0o600); err != nil {
				t.Fatal(err)
			}
			want := "run state " + st.Path() + ": " + lineRefs(edited, tc.want)
			for _, load := range []struct {
				how string
				do  func() error
			}{
				{"Load", func() error { _, err := Load(dir, id); return err }},
				{"Resume RUN", func() error { _, err := Resume(dir, id, Match{}); return err }},
				{"Resume", func() error { _, err := Resume(dir, "", Match{}); return err }},
			} {
				err := load.do()
				if err == nil || !strings.HasPrefix(err.Error(), want) {
					t.Errorf("%s: %v\nwant %s", load.how, err, want)
				}
			}
			if after, err := os.ReadFile(st.Path()); err != nil || string(after) != edited {
				t.Errorf("the state file was changed: %v", err)
			}
		})
	}
}

// lineRefs replaces LINE(h) with "line N: " where N is the line of host
// h's entry (the "{" before its name) in file, LINE2(h) with its second
// entry's, N(h) with the number alone and LINE() with the line of the
// entry named "".
func lineRefs(file, want string) string {
	entry := func(name string, nth int) int {
		lines := strings.Split(file, "\n")
		seen := 0
		for i, l := range lines {
			if strings.TrimSpace(l) == fmt.Sprintf(`"name": %q,`, name) {
				if seen++; seen == nth {
					return i // 0-based index of the name: the "{" is the line above, 1-based i
				}
			}
		}
		return -1
	}
	for _, name := range []string{"db1", "db2", "db3", ""} {
		want = strings.ReplaceAll(want, "LINE2("+name+")", fmt.Sprintf("line %d: ", entry(name, 2)))
		want = strings.ReplaceAll(want, "LINE("+name+")", fmt.Sprintf("line %d: ", entry(name, 1)))
		want = strings.ReplaceAll(want, "N("+name+")", fmt.Sprint(entry(name, 1)))
	}
	return want
}
