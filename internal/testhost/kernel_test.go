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
	grown, _ := st.GrowBy(4 << 20) // two 2 MiB pages, one of a larger default size
	set("vm.nr_hugepages", strconv.FormatInt(grown, 10))
	// Ratios above 100 throughout: where strict overcommit is on already,
	// a ratio is the live limit, and 50 or 61 % of RAM could fail the
	// forks of whatever else runs here.
	set("vm.overcommit_ratio", "161")
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
	set("vm.overcommit_ratio", "150") // zeroes kbytes
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
	grown, _ := st.GrowBy(4 << 20)
	if err := WriteSysctl("vm.nr_hugepages", strconv.FormatInt(grown, 10)); err != nil {
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

// The pool helpers plan from the snapshot, on any machine: growth is whole
// pages of the default size (at least one, whatever the size), others'
// pages are the floor, and other sizes' pools count beside the default.
func TestPoolHelpersOnMadeUpMachines(t *testing.T) {
	for _, m := range []struct {
		name                 string
		st                   KernelState
		grow                 int64
		target, added        int64
		reserved, otherPools int64
	}{
		{"2 MiB only, empty", KernelState{
			Values:  map[string]string{"vm.nr_hugepages": "0"},
			Meminfo: map[string]int64{"Hugepagesize": 2048},
			Pools:   map[int64]Pool{2 << 20: {Size: 2 << 20}},
		}, 64 << 20, 32, 32, 0, 0},
		{"2 MiB default, 1 GiB pool held by someone", KernelState{
			Values:  map[string]string{"vm.nr_hugepages": "100"},
			Meminfo: map[string]int64{"Hugepagesize": 2048, "HugePages_Total": 103, "HugePages_Free": 40, "HugePages_Rsvd": 5},
			Pools:   map[int64]Pool{2 << 20: {Size: 2 << 20, Nr: 103, Free: 40, Resv: 5, Surplus: 3}, 1 << 30: {Size: 1 << 30, Nr: 2, Free: 1}},
		}, 128 << 20, 164, 64, 68, 2 << 30},
		{"1 GiB default", KernelState{
			Values:  map[string]string{"vm.nr_hugepages": "3"},
			Meminfo: map[string]int64{"Hugepagesize": 1 << 20, "HugePages_Total": 3, "HugePages_Free": 2},
			Pools:   map[int64]Pool{2 << 20: {Size: 2 << 20, Nr: 10, Free: 10}, 1 << 30: {Size: 1 << 30, Nr: 3, Free: 2}},
		}, 64 << 20, 4, 1, 1, 20 << 20},
	} {
		t.Run(m.name, func(t *testing.T) {
			target, added := m.st.GrowBy(m.grow)
			if target != m.target || added != m.added {
				t.Errorf("GrowBy(%d) = %d, %d; want %d, %d", m.grow, target, added, m.target, m.added)
			}
			if got := m.st.ReservedPages(); got != m.reserved || m.st.ShrinkFloor() != got {
				t.Errorf("ReservedPages %d (floor %d), want %d", got, m.st.ShrinkFloor(), m.reserved)
			}
			if got := m.st.OtherPools(); got != m.otherPools {
				t.Errorf("OtherPools %d, want %d", got, m.otherPools)
			}
			if got := m.st.ReservedPagesOf(m.st.PageSize()); got != m.reserved {
				t.Errorf("ReservedPagesOf(default) %d", got)
			}
		})
	}
}

// The snapshot's pools agree with /proc/meminfo for the default size.
func TestSnapshotPools(t *testing.T) {
	st := WatchKernel(t)
	if st.PageSize() == 0 {
		t.Skip("no hugetlb support")
	}
	p, ok := st.Pools[st.PageSize()]
	if !ok {
		t.Fatalf("no pool of the default size %d in %v", st.PageSize(), st.Pools)
	}
	if p.Persistent() != st.Pages() {
		t.Errorf("sysfs persistent pool %d, vm.nr_hugepages %d", p.Persistent(), st.Pages())
	}
	if p.Held() != st.ReservedPages() {
		t.Errorf("sysfs held %d, meminfo %d", p.Held(), st.ReservedPages())
	}
	if n := OOMScoreAdj(t); n < -1000 || n > 1000 {
		t.Errorf("oom_score_adj %d", n)
	}
}
