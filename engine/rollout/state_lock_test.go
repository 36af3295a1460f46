package rollout

import (
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
