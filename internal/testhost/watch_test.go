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
