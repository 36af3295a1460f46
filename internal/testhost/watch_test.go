package testhost

import (
	"os"
	"path/filepath"
	"testing"
)

func TestAwaitFiles(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "later", "deeper", "flag")
	exists := func() bool { _, err := os.Stat(target); return err == nil }
	// The directories do not exist yet: the wait follows them as they
	// appear. Whichever runs first, the writer or the waiter, no event is
	// lost.
	go func() {
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Error(err)
			return
		}
		if err := os.WriteFile(target, nil, 0o644); err != nil {
			t.Error(err)
		}
	}()
	if !AwaitFiles(t, "the flag", []string{filepath.Dir(target)}, nil, exists) {
		t.Fatal("AwaitFiles returned false without a stop")
	}

	// A closed stop ends the wait with cond's answer.
	stop := make(chan struct{})
	close(stop)
	if AwaitFiles(t, "a file that never comes", []string{dir}, stop, func() bool { return false }) {
		t.Error("AwaitFiles reported a condition that does not hold")
	}
}

// TestWatchDeepestFollowsADirectoryMadeMidWalk makes the child directory in
// the window between the failed watch on it and the watch on its parent:
// the walk must still end on the child, or a file written there later
// raises no event and the wait hangs.
func TestWatchDeepestFollowsADirectoryMadeMidWalk(t *testing.T) {
	dir := t.TempDir()
	parent := filepath.Join(dir, "later")
	child := filepath.Join(parent, "deeper")
	watched := map[string]bool{}
	var tried []string
	watchDeepest([]string{child}, watched, func(p string) error {
		tried = append(tried, p)
		if p == parent {
			if err := os.MkdirAll(child, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		_, err := os.Stat(p)
		return err
	})
	if !watched[child] {
		t.Fatalf("watched %v after trying %v; want %s watched", watched, tried, child)
	}
}
