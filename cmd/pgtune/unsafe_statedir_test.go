package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestApplyUnsafeRunStateDir: a run state directory others could write (a
// Kubernetes emptyDir as XDG_STATE_HOME: root, 0777, not sticky) does not
// stop an apply, which only keeps no run state, says so once, and keeps
// its exit codes; what a cut-short run says to do next is to apply again,
// not a --resume that cannot work. A resume from there is refused with the
// same advice.
func TestApplyUnsafeRunStateDir(t *testing.T) {
	tests := []struct {
		name     string
		fail     []string
		args     []string
		code     int
		want     []string
		not      []string
		refusing bool // the command is a resume
	}{
		{"an apply that verifies every host", nil, nil, 0,
			[]string{"cannot be resumed with --resume", "chmod +t STATE"}, []string{"continue with"}, false},
		{"a rollout stopped by its failure budget", []string{"h1"}, []string{"--serial", "1,100%", "--any-errors-fatal"}, 1,
			[]string{"rollout stopped", "no run state was kept (see the warning above), so there is no --resume: apply again"}, []string{"continue with: pgtune apply --resume"}, false},
		{"a resume", nil, []string{"--resume"}, 1,
			[]string{"refusing to read a run state from it", "chmod +t STATE"}, []string{"cannot be resumed"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMark(tt.fail...)
			run, inv, book := fleetApp(t, m)
			state := filepath.Join(t.TempDir(), "emptydir")
			if err := os.Mkdir(state, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(state, 0o777); err != nil {
				t.Fatal(err)
			}
			t.Setenv("XDG_STATE_HOME", state)
			var code int
			var stderr string
			if tt.refusing {
				code, stderr = runBare(m, append([]string{"apply", "--yes", "-i", inv, book}, tt.args...)...)
			} else {
				code, _, stderr = run(append([]string{"apply", "--yes", "-i", inv, book}, tt.args...)...)
			}
			if code != tt.code {
				t.Errorf("exit %d, want %d\n%s", code, tt.code, stderr)
			}
			head := "run state directory " + filepath.Join(state, "pgtune", "runs") + ": " + state + " is writable by group or others (mode 0777)"
			if n := strings.Count(stderr, head); n != 1 {
				t.Errorf("said %d times, want once: %q\n%s", n, head, stderr)
			}
			for _, w := range tt.want {
				if w = strings.ReplaceAll(w, "STATE", state); !strings.Contains(stderr, w) {
					t.Errorf("stderr without %q:\n%s", w, stderr)
				}
			}
			for _, w := range tt.not {
				if strings.Contains(stderr, w) {
					t.Errorf("stderr with %q:\n%s", w, stderr)
				}
			}
			if ents, _ := os.ReadDir(state); len(ents) != 0 {
				t.Errorf("written under the unsafe level: %v", ents)
			}
			if tt.refusing && len(m.events) != 0 {
				t.Errorf("a refused resume reached the hosts: %v", m.events)
			}
		})
	}
}
