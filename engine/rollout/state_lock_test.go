package rollout

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestStateLock: a run is continued by one process at a time; the lock
// goes when its holder releases it (or dies: it is the kernel's).
func TestStateLock(t *testing.T) {
	st := NewState(t.TempDir(), "20261203T080000Z-aaaaaa", time.Now())
	release, err := st.Lock()
	if err != nil {
		t.Fatal(err)
	}
	// Another open file description, as another pgtune's would be.
	if _, err := st.Lock(); err == nil || !strings.Contains(err.Error(), "is being applied by another pgtune right now") {
		t.Fatalf("second lock: %v, want refused", err)
	}
	release()
	again, err := st.Lock()
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again()
}

// TestStateLockFileRemoved: a released run leaves no lock file beside
// its state, whether the state was written or not.
func TestStateLockFileRemoved(t *testing.T) {
	for _, saved := range []bool{true, false} {
		dir := t.TempDir()
		st := NewState(dir, "20261203T080000Z-aaaaaa", time.Now())
		release, err := st.Lock()
		if err != nil {
			t.Fatal(err)
		}
		if saved {
			if err := st.Save(); err != nil {
				t.Fatal(err)
			}
		}
		release()
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		want := []string{}
		if saved {
			want = []string{st.ID + ".json"}
		}
		if !slices.Equal(names, want) {
			t.Errorf("saved %t: left %q, want %q", saved, names, want)
		}
	}
}

// TestStateLockReleasedWhileTaken: the classic race of removing a lock
// file. B opens the file; A, the holder, releases (removing it); B then
// locks a file no longer at the path. B must not count that lock: it
// takes the path again, and C, coming after, is refused, never a second
// holder of the run.
func TestStateLockReleasedWhileTaken(t *testing.T) {
	for _, saved := range []bool{true, false} {
		st := NewState(t.TempDir(), "20261203T080000Z-aaaaaa", time.Now())
		if saved {
			if err := st.Save(); err != nil {
				t.Fatal(err)
			}
		}
		releaseA, err := st.Lock()
		if err != nil {
			t.Fatal(err)
		}
		once := true
		lockOpened = func() {
			if once {
				once = false
				releaseA()
			}
		}
		releaseB, err := st.Lock()
		lockOpened = func() {}
		if err != nil {
			t.Fatalf("saved %t: B after A's release: %v", saved, err)
		}
		if releaseC, err := st.Lock(); err == nil {
			releaseC()
			t.Errorf("saved %t: C took the run B holds", saved)
		} else if !strings.Contains(err.Error(), "is being applied by another pgtune right now") {
			t.Errorf("saved %t: C: %v, want refused as held", saved, err)
		}
		releaseB()
	}
}
