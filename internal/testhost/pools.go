package testhost

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Machine facts a kernel test must plan from instead of literals: the
// huge page sizes the kernel offers and their default, what each pool
// holds (other test packages' clusters, other engineers' work), RAM and
// swap. Nothing here is fixed by the machine a test was written on: one
// machine has 2 MiB pages only, another 1 GiB pages too, another 1 GiB
// as its default size.

// HugepagesDir is where the kernel lists one directory per huge page size.
const HugepagesDir = "/sys/kernel/mm/hugepages"

// Pool is one huge page size's pool as sysfs shows it. Nr counts surplus
// pages, as the sysfs nr_hugepages does (vm.nr_hugepages does not).
type Pool struct {
	Size                    int64 // bytes
	Nr, Free, Resv, Surplus int64 // pages
}

// Persistent is the pool without its surplus pages: what vm.nr_hugepages
// (or a sysfs write of nr_hugepages) sets.
func (p Pool) Persistent() int64 { return p.Nr - p.Surplus }

// Held is the pages that are in use (faulted in) or promised to mappings
// not yet touched: the kernel keeps them whatever nr_hugepages asks, and
// pgtune refuses to plan a pool below them.
func (p Pool) Held() int64 { return p.Nr - p.Free + p.Resv }

// ReadPools reads every huge page size's pool from sysfs, by size in
// bytes. A kernel without hugetlb support has none.
func ReadPools() (map[int64]Pool, error) {
	dirs, err := filepath.Glob(HugepagesDir + "/hugepages-*kB")
	if err != nil {
		return nil, err
	}
	out := map[int64]Pool{}
	for _, d := range dirs {
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(d), "hugepages-"), "kB"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d, err)
		}
		p := Pool{Size: kb << 10}
		for name, dst := range map[string]*int64{"nr_hugepages": &p.Nr, "free_hugepages": &p.Free, "resv_hugepages": &p.Resv, "surplus_hugepages": &p.Surplus} {
			b, err := os.ReadFile(filepath.Join(d, name))
			if err != nil {
				return nil, err
			}
			if *dst, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
				return nil, fmt.Errorf("%s/%s: %w", d, name, err)
			}
		}
		out[p.Size] = p
	}
	return out, nil
}

// PageSizes lists the huge page sizes in pools, smallest first.
func PageSizes(pools map[int64]Pool) []int64 {
	var out []int64
	for s := range pools {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// PageSize is the kernel's default huge page size in bytes (Hugepagesize)
// when the lock was taken; 0 without hugetlb support.
func (s *KernelState) PageSize() int64 { return s.Meminfo["Hugepagesize"] << 10 }

// Pages is vm.nr_hugepages when the lock was taken: the default size's
// persistent pool.
func (s *KernelState) Pages() int64 {
	n, _ := strconv.ParseInt(s.Values["vm.nr_hugepages"], 10, 64)
	return n
}

// ReservedPages is what the default size's pool held for others when the
// lock was taken: pages in use or reserved (HugePages_Total − Free +
// Rsvd), surplus pages included. A test never plans the pool below it
// (the module refuses to, and the kernel would keep them anyway).
func (s *KernelState) ReservedPages() int64 {
	return s.Meminfo["HugePages_Total"] - s.Meminfo["HugePages_Free"] + s.Meminfo["HugePages_Rsvd"]
}

// ReservedPagesOf is ReservedPages for the pool of the given size (bytes).
func (s *KernelState) ReservedPagesOf(size int64) int64 {
	if size == s.PageSize() {
		return s.ReservedPages()
	}
	return s.Pools[size].Held()
}

// OtherPools is the memory, in bytes, in the pools of every size but the
// default when the lock was taken (sysfs nr_hugepages × size), as pgtune
// counts it outside the commit budget beside the pool it sizes.
func (s *KernelState) OtherPools() int64 { return s.OtherPoolsThan(s.PageSize()) }

// OtherPoolsThan is OtherPools beside the pool of the given size.
func (s *KernelState) OtherPoolsThan(size int64) int64 {
	var n int64
	for sz, p := range s.Pools {
		if sz != size {
			n += p.Nr * sz
		}
	}
	return n
}

// GrowBy returns the vm.nr_hugepages that grows the default pool by about
// bytes from where it was when the lock was taken, and how many pages that
// adds: bytes in whole pages of the default size, at least one page
// whatever the size (a 1 GiB default size turns 64 MiB into one page, not
// none).
func (s *KernelState) GrowBy(bytes int64) (target, added int64) {
	added = max(1, bytes/max(s.PageSize(), 1))
	return s.Pages() + added, added
}

// ShrinkFloor is the lowest vm.nr_hugepages a test may plan or set for
// the default size: never below the pages others hold.
func (s *KernelState) ShrinkFloor() int64 { return s.ReservedPages() }

// Machine describes the machine for a test's log, so a failure on another
// machine shows what differed.
func (s *KernelState) Machine() string {
	var sizes []string
	for _, sz := range PageSizes(s.Pools) {
		p := s.Pools[sz]
		sizes = append(sizes, fmt.Sprintf("%dkB: nr %d free %d resv %d surplus %d", sz>>10, p.Nr, p.Free, p.Resv, p.Surplus))
	}
	return fmt.Sprintf("MemTotal %d kB, MemAvailable %d kB, SwapTotal %d kB, Hugepagesize %d kB, pools [%s]",
		s.Meminfo["MemTotal"], s.Meminfo["MemAvailable"], s.Meminfo["SwapTotal"], s.Meminfo["Hugepagesize"], strings.Join(sizes, "; "))
}

// OOMScoreAdj is the oom_score_adj this test process inherited (a shell,
// a systemd unit or a CI runner may set one): a process the code under
// test starts inherits it too, so tests compare against it, not 0.
func OOMScoreAdj(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		t.Fatalf("oom_score_adj: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("oom_score_adj: %v", err)
	}
	return n
}

// CanLowerOOMScoreAdj says whether this process (and so what it starts as
// root: pgtune over the local connection, sshd's sessions) has
// CAP_SYS_RESOURCE, without which the kernel refuses to lower any
// oom_score_adj. It also decides what a raise does: written with the
// capability, a score becomes the process's floor (oom_score_adj_min),
// which its children inherit and cannot go below, so a postmaster raised
// above 0 has backends that cannot reset themselves to 0. Machines differ
// (a container's root often lacks it): tests pick their scores from it.
func CanLowerOOMScoreAdj(t testing.TB) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatalf("capabilities: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatalf("capabilities: %q: %v", l, err)
			}
			const capSysResource = 24
			return caps&(1<<capSysResource) != 0
		}
	}
	t.Fatal("capabilities: no CapEff in /proc/self/status")
	return false
}

// PagesFor is bytes in whole pages of the default size, at least one.
func (s *KernelState) PagesFor(bytes int64) int64 { return max(1, bytes/max(s.PageSize(), 1)) }

// MakeRoom grows the default pool so that pages more pages are free beside
// what it held when the lock was taken (other processes' pages in use or
// reserved, surplus included), sets it and returns the new vm.nr_hugepages.
// The caller holds LockKernel, whose cleanup puts the pool back. A kernel
// that gives fewer pages fails the test.
func (s *KernelState) MakeRoom(t testing.TB, pages int64) int64 {
	t.Helper()
	total := max(s.Pages(), s.ReservedPages()) + pages
	v := strconv.FormatInt(total, 10)
	if err := WriteSysctl("vm.nr_hugepages", v); err != nil {
		t.Fatal(err)
	}
	if got, _ := ReadSysctl("vm.nr_hugepages"); got != v {
		t.Fatalf("the kernel gave %s of %d huge pages", got, total)
	}
	return total
}

// RoomFor plans the default pool for a test's cluster of about bytes: the
// pool (bytes) a hugepages policy asks for, room for the cluster beside the
// pages others hold and the pool as it is, and the cluster's share (bytes,
// whole pages, at least one) for pgconf's pool, which then sizes the
// segment to the share, never to pages others hold.
func (s *KernelState) RoomFor(bytes int64) (pool, share int64) {
	n := s.PagesFor(bytes)
	return (max(s.Pages(), s.ReservedPages()) + n) * s.PageSize(), n * s.PageSize()
}
