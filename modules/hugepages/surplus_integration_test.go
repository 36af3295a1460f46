package hugepages

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
	"github.com/pgtune/pgtune/modules/internal/fakehost"
)

// TestKernelSurplusAsFaked holds the fake host's pool model, which the
// restart-order tests (TestPoolsAroundRestart) rely on, to this machine's
// real kernel, under the kernel lock, in the default page size (the only
// one some machines have): a pool shrunk below the pages a process maps
// (ours; never below the pages other processes hold) keeps them as surplus, counted in nr_hugepages, with none free; they
// leave the pool when the mapping goes, as a restarted postmaster's
// segment does. Every count is compared with what the fake shows after the
// same steps.
func TestKernelSurplusAsFaked(t *testing.T) {
	st := testhost.LockKernel(t)
	sizeKB := st.Meminfo["Hugepagesize"]
	dir := fmt.Sprintf("/sys/kernel/mm/hugepages/hugepages-%dkB/", sizeKB)
	count := func(file string) int64 {
		n, err := strconv.ParseInt(readNr(t, dir+file), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Pages other processes map stay mapped throughout; ours come on top.
	base := count("nr_hugepages") - count("surplus_hugepages")
	others := count("nr_hugepages") - count("free_hugepages")
	ours := int64(2)
	if sizeKB<<10 >= GiB {
		ours = 1 // a gigabyte of a 1 GiB default size is enough
	}
	if r := count("resv_hugepages"); r > 0 {
		// The fake models pages in use, not reservations a mapping made
		// and has not touched yet: the counts would differ by them.
		t.Skipf("%d huge pages are reserved by other processes and not yet faulted in: the fake host does not model reservations", r)
	}

	h := fakehost.New()
	h.HugePageKB = sizeKB
	fake := func(file string) int64 {
		h.Lock()
		defer h.Unlock()
		v, ok := h.Generated(dir + file)
		if !ok {
			t.Fatalf("the fake has no %s", dir+file)
		}
		n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	same := func(when string) {
		t.Helper()
		for _, f := range []string{"nr_hugepages", "free_hugepages", "surplus_hugepages"} {
			if got, want := count(f), fake(f); got != want {
				t.Errorf("%s: kernel %s %d, fake %d", when, f, got, want)
			}
		}
	}
	setPool := func(pages int64) {
		t.Helper()
		if err := testhost.WriteSysctl("vm.nr_hugepages", strconv.FormatInt(pages, 10)); err != nil {
			t.Fatal(err)
		}
		h.Sysctl["vm.nr_hugepages"] = strconv.FormatInt(pages, 10)
	}

	setPool(base + ours)
	if got := count("nr_hugepages") - count("surplus_hugepages"); got != base+ours {
		if sizeKB<<10 >= GiB {
			t.Skipf("no free gigabyte on this machine: the kernel gave %d of %d pages", got, base+ours)
		}
		t.Fatalf("the kernel gave %d of %d pages", got, base+ours)
	}
	size := int(sizeKB << 10)
	seg, err := syscall.Mmap(-1, 0, int(ours)*size, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_HUGETLB)
	if err != nil {
		t.Fatalf("map %d huge pages: %v", ours, err)
	}
	mapped := true
	defer func() {
		if mapped {
			_ = syscall.Munmap(seg)
		}
	}()
	for i := 0; i < int(ours); i++ {
		seg[i*size] = 1 // fault the page in
	}
	h.InUsePages = others + ours
	same("mapped")

	setPool(others) // below our mapped pages, never below others'
	same("pool shrunk under our mapping to the pages others hold")
	if n := count("surplus_hugepages"); n < ours {
		t.Errorf("surplus %d: our %d mapped pages should be surplus", n, ours)
	}

	if err := syscall.Munmap(seg); err != nil {
		t.Fatal(err)
	}
	mapped = false
	h.InUsePages = others
	same("mapping gone")
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}
