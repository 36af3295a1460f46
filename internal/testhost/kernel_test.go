package testhost

import (
	"os"
	"strconv"
	"syscall"
	"testing"
)

func TestKernelRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("changes the kernel")
	}
	st := LockKernel(t)
	set := func(k, v string) {
		t.Helper()
		if err := WriteSysctl(k, v); err != nil {
			t.Fatal(err)
		}
	}
	pages, _ := strconv.Atoi(st.Values["vm.nr_hugepages"])
	set("vm.nr_hugepages", strconv.Itoa(pages+2))
	set("vm.overcommit_ratio", "61")
	if err := st.Restore(); err != nil {
		t.Fatal(err)
	}
	for k, v := range st.Values {
		if got, _ := ReadSysctl(k); got != v {
			t.Errorf("%s = %s after restore, want %s", k, got, v)
		}
	}

	// A snapshot taken with kbytes in force restores kbytes, not the
	// ratio the kernel zeroed when kbytes was written.
	set("vm.overcommit_kbytes", "987654321")
	kb := &KernelState{Values: map[string]string{}}
	for _, k := range Keys {
		kb.Values[k], _ = ReadSysctl(k)
	}
	if kb.Values["vm.overcommit_ratio"] != "0" {
		t.Fatalf("kernel did not zero overcommit_ratio: %s", kb.Values["vm.overcommit_ratio"])
	}
	set("vm.overcommit_ratio", "50") // zeroes kbytes
	if err := kb.Restore(); err != nil {
		t.Fatal(err)
	}
	if got, _ := ReadSysctl("vm.overcommit_kbytes"); got != "987654321" {
		t.Errorf("kbytes %s after restore", got)
	}
	// The lock's cleanup then returns to the original snapshot.
}

// A holder killed before its cleanup leaves its snapshot file; the next
// LockKernel restores from it before taking its own snapshot.
func TestKernelLeftoverSnapshotRestored(t *testing.T) {
	if testing.Short() {
		t.Skip("changes the kernel")
	}
	st := LockKernel(t)
	if _, err := os.Stat(SnapshotFile); err != nil {
		t.Fatalf("the lock holder's snapshot is not on disk: %v", err)
	}
	pages, _ := strconv.Atoi(st.Values["vm.nr_hugepages"])
	if err := WriteSysctl("vm.nr_hugepages", strconv.Itoa(pages+2)); err != nil {
		t.Fatal(err)
	}
	// As the next holder would, after this one died here.
	if err := restoreLeftover(t); err != nil {
		t.Fatal(err)
	}
	if got, _ := ReadSysctl("vm.nr_hugepages"); got != st.Values["vm.nr_hugepages"] {
		t.Errorf("nr_hugepages %s after restoring the leftover snapshot, want %s", got, st.Values["vm.nr_hugepages"])
	}
	if _, err := os.Stat(SnapshotFile); !os.IsNotExist(err) {
		t.Errorf("leftover snapshot not removed: %v", err)
	}
}

// WatchKernel holds the lock shared: other watchers get it meanwhile, a
// test that would change the kernel does not.
func TestWatchKernelShared(t *testing.T) {
	st := WatchKernel(t)
	if len(st.Values) != len(Keys) || st.Meminfo["MemTotal"] <= 0 {
		t.Fatalf("snapshot: %v, MemTotal %d", st.Values, st.Meminfo["MemTotal"])
	}
	other, err := os.OpenFile(LockFile, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != syscall.EWOULDBLOCK {
		t.Fatalf("exclusive lock while watched: %v, want EWOULDBLOCK", err)
	}
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		t.Fatalf("a second watcher is refused: %v", err)
	}
}

// A test that holds the kernel lock, and its subtests, are known as holders
// (helpers that read the live pool insist on it); others are not.
func TestHoldsKernelFollowsTheHolder(t *testing.T) {
	t.Run("before", func(t *testing.T) {
		if HoldsKernel(t) {
			t.Fatal("a test that took no lock counts as a holder")
		}
	})
	WatchKernel(t)
	if !HoldsKernel(t) {
		t.Fatal("the watcher is not a holder")
	}
	t.Run("sub", func(t *testing.T) {
		if !HoldsKernel(t) {
			t.Fatal("a subtest of the holder is not a holder")
		}
	})
}
