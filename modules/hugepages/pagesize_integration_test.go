package hugepages

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
	"github.com/pgtune/pgtune/modules/internal/moduletest"
)

// The page_size key on this machine's real kernel, under the kernel lock.

func tmpfilesParam(t *testing.T, prm *Params) string {
	dir := filepath.Join(t.TempDir(), "tmpfiles.d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "pgtune-hugepages.conf")
	prm.TmpfilesFile = val(t, file)
	return file
}

func readNr(t *testing.T, p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestIntegrationGigPages runs page_size: 1GiB against this kernel, on
// whatever machine runs it; its log says which path it took:
//   - the kernel offers no 1 GiB pages (a CPU without pdpe1gb): check
//     refuses with the sizes it does offer, and nothing changes;
//   - too little MemAvailable for another gigabyte: the preflight refuses;
//   - 1 GiB pages beside a smaller default size: the 1 GiB pool is grown
//     by one page through sysfs, verified, persisted in the tmpfiles file,
//     and shrunk back;
//   - 1 GiB is the default size: the same through vm.nr_hugepages and the
//     sysctl file;
//   - no free gigabyte (fragmented memory): the shortfall is reported with
//     its numbers and the pool put back.
func TestIntegrationGigPages(t *testing.T) {
	st := testhost.LockKernel(t)
	ctx := ctxT(t)
	tr := transport.NewLocal()
	sizes := testhost.PageSizes(st.Pools)
	gigDir := "/sys/kernel/mm/hugepages/hugepages-1048576kB"
	prm := DefaultParams()
	prm.PageSize = val(t, "1GiB")
	file := tmpfilesParam(t, prm)
	sysctlFile := filepath.Join(t.TempDir(), "10-hugepages.conf")
	prm.SysctlFile = val(t, sysctlFile)
	// The preflight's floor, so that its verdict is computed from facts.
	const floor = 512 * MiB
	prm.MinAvailable = val(t, strconv.FormatInt(floor, 10))
	m := New()
	tg := moduletest.LocalTarget(t, tr, New())

	if !slices.Contains(sizes, GiB) {
		prm.Pool = val(t, "${1 * GiB}")
		names := make([]string, len(sizes))
		for i, s := range sizes {
			names[i] = sizeName(s)
		}
		want := "page_size 1 GiB: the host offers " + strings.Join(names, " and ") + " huge pages only (no " + gigDir + "; on x86, 1 GiB pages need a CPU with the pdpe1gb flag)"
		if len(sizes) == 0 {
			want = "page_size 1 GiB: the host offers no huge pages at all (no " + gigDir + "; on x86, 1 GiB pages need a CPU with the pdpe1gb flag)"
		}
		p, err := m.Check(ctx, tg, prm)
		if err == nil || err.Error() != want {
			t.Fatalf("check = %v, %v\nwant error %q", p, err, want)
		}
		if n := readNr(t, "/proc/sys/vm/nr_hugepages"); n != st.Values["vm.nr_hugepages"] {
			t.Errorf("vm.nr_hugepages %s, was %s", n, st.Values["vm.nr_hugepages"])
		}
		if _, err := os.Stat(file); !os.IsNotExist(err) {
			t.Errorf("%s written by a refused check: %v", file, err)
		}
		if _, err := os.Stat(gigDir); !os.IsNotExist(err) {
			t.Errorf("%s appeared: %v", gigDir, err)
		}
		t.Logf("this kernel offers no 1 GiB pages: check refused page_size 1GiB and nothing changed")
		return
	}

	// The kernel offers 1 GiB pages: grow the pool by one, for real,
	// through vm.nr_hugepages where 1 GiB is the default size, else
	// through its own sysfs file.
	dflt := st.PageSize() == GiB
	nr, target, how := gigDir+"/nr_hugepages", gigDir+"/nr_hugepages", "beside the default size "+sizeName(st.PageSize())
	before := st.Pools[GiB].Nr
	if dflt {
		nr, target, how = "/proc/sys/vm/nr_hugepages", key, "as the default size"
		before = st.Pages() // the lock puts it back
	} else {
		t.Cleanup(func() {
			if err := os.WriteFile(nr, []byte(strconv.FormatInt(before, 10)), 0); err != nil {
				t.Errorf("put the 1 GiB pool back: %v", err)
			}
		})
	}
	prm.Pool = val(t, strconv.FormatInt((before+1)*GiB, 10))
	p, err := m.Check(ctx, tg, prm)
	if left := tg.Facts.MemAvailable - GiB; left < floor {
		if err == nil || !strings.Contains(err.Error(), "preflight: growing the pool by 1 pages (1.0 GiB) leaves MemAvailable at") {
			t.Fatalf("check with MemAvailable %d: %v, want the preflight's refusal", tg.Facts.MemAvailable, err)
		}
		t.Logf("1 GiB pages %s, but MemAvailable is too low for another: the preflight refused (%v)", how, err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	got := moduletest.Changes(p)
	if len(got) < 2 || got[0] != target+" "+strconv.FormatInt(before, 10)+"→"+strconv.FormatInt(before+1, 10) {
		t.Fatalf("plan: %q", got)
	}
	persisted := file
	if dflt {
		persisted = sysctlFile
	}
	if !slices.Contains(got, "file "+persisted) {
		t.Fatalf("plan %q does not write %s", got, persisted)
	}
	if err := m.Apply(ctx, tg, p); err != nil {
		// A fragmented machine may not find a free gigabyte: that must
		// be the shortfall error with the numbers, the pool put back.
		if !strings.Contains(err.Error(), "allocated "+strconv.FormatInt(before, 10)+" of "+strconv.FormatInt(before+1, 10)) {
			t.Fatal(err)
		}
		if got := readNr(t, nr); got != strconv.FormatInt(before, 10) {
			t.Fatalf("after a shortfall the pool is %s, was %d", got, before)
		}
		t.Logf("1 GiB pages %s, but no free gigabyte on this machine: the shortfall was reported and backed out (%v)", how, err)
		return
	}
	t.Logf("1 GiB pages %s: pool grown from %d to %d pages", how, before, before+1)
	if err := m.Verify(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(persisted)
	line := "\nw " + nr + " - - - - " + strconv.FormatInt(before+1, 10) + "\n"
	if dflt {
		line = "vm.nr_hugepages = " + strconv.FormatInt(before+1, 10) + "\n"
	}
	if err != nil || !strings.Contains(string(data), line) {
		t.Errorf("%s: %q %v, want a line %q", persisted, data, err, line)
	}
	// Back down, never below the pages others hold.
	down := max(before, st.ReservedPagesOf(GiB))
	prm.Pool = val(t, strconv.FormatInt(down*GiB, 10))
	tg = moduletest.LocalTarget(t, tr, New())
	if p, err = m.Check(ctx, tg, prm); err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	if got := readNr(t, nr); got != strconv.FormatInt(down, 10) {
		t.Errorf("pool %s after shrinking, want %d", got, down)
	}
}

// TestIntegrationExplicitDefaultSize: naming the kernel's default size
// (2 MiB on most machines, whatever it is here) plans exactly what leaving page_size unset plans, and
// applies, verifies and re-checks clean the same way.
func TestIntegrationExplicitDefaultSize(t *testing.T) {
	st := testhost.LockKernel(t)
	ctx := ctxT(t)
	tr := transport.NewLocal()
	m := New()
	tg := moduletest.LocalTarget(t, tr, New())
	size := tg.Facts.HugePageSize
	want, _ := st.GrowBy(64 * MiB)
	pool := strconv.FormatInt(want*size, 10)

	implicit, file := integrationParams(t, pool)
	explicit, _ := integrationParams(t, pool)
	explicit.SysctlFile = implicit.SysctlFile
	explicit.PageSize = val(t, strings.ReplaceAll(sizeName(size), " ", ""))

	pi, err := m.Check(ctx, tg, implicit)
	if err != nil {
		t.Fatal(err)
	}
	pe, err := m.Check(ctx, tg, explicit)
	if err != nil {
		t.Fatal(err)
	}
	ci, ce := moduletest.Changes(pi), moduletest.Changes(pe)
	if strings.Join(ci, "\n") != strings.Join(ce, "\n") || len(ce) != 2 || !strings.HasPrefix(ce[0], "vm.nr_hugepages ") || ce[1] != "file "+file {
		t.Fatalf("page_size %s plans %q, unset plans %q", sizeName(size), ce, ci)
	}
	if pe.Outputs["page_size"] != size || pe.Outputs["pages"] != pi.Outputs["pages"] {
		t.Errorf("outputs %v vs %v", pe.Outputs, pi.Outputs)
	}
	if err := m.Apply(ctx, tg, pe); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(ctx, tg, pe); err != nil {
		t.Fatal(err)
	}
	if n := readNr(t, "/proc/sys/vm/nr_hugepages"); n != strconv.FormatInt(want, 10) {
		t.Errorf("vm.nr_hugepages %s, want %d", n, want)
	}
	again, err := m.Check(ctx, moduletest.LocalTarget(t, tr, New()), explicit)
	if err != nil {
		t.Fatal(err)
	}
	if again.HasChanges() {
		t.Errorf("re-check: %q", moduletest.Changes(again))
	}
}

// TestIntegrationNUMASpread grows the pool through each NUMA node's own
// nr_hugepages on this machine (one node on most: node0's file), reads every
// node back, and shrinks it back the same way.
func TestIntegrationNUMASpread(t *testing.T) {
	st := testhost.LockKernel(t)
	ctx := ctxT(t)
	tr := transport.NewLocal()
	m := New()
	tg := moduletest.LocalTarget(t, tr, New())
	before := st.Pages()
	size := tg.Facts.HugePageSize
	nodes := tg.Facts.NodesOf(size)
	if len(nodes) == 0 {
		t.Skipf("no per-node pools on this machine (a kernel without NUMA): %+v", tg.Facts.NodePools)
	}
	want, _ := st.GrowBy(64 * MiB)
	prm, _ := integrationParams(t, strconv.FormatInt(want*size, 10))
	prm.NUMA = val(t, NUMASpread)
	p, err := m.Check(ctx, tg, prm)
	if err != nil {
		t.Fatal(err)
	}
	shares := evenShares(nodes, want)
	var targets []string
	for _, c := range p.Changes {
		targets = append(targets, c.Target)
	}
	for _, s := range shares {
		if s.After != s.Before && !slices.Contains(targets, s.Path) {
			t.Errorf("plan %q lacks %s", targets, s.Path)
		}
	}
	if slices.Contains(targets, key) {
		t.Errorf("plan %q sets vm.nr_hugepages as well as the nodes", targets)
	}
	if err := m.Apply(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	for _, s := range shares {
		if got := readNr(t, s.Path); got != strconv.FormatInt(s.After, 10) {
			t.Errorf("%s = %s, want %d", s.Path, got, s.After)
		}
	}
	if got := readNr(t, "/proc/sys/vm/nr_hugepages"); got != strconv.FormatInt(want, 10) {
		t.Errorf("vm.nr_hugepages %s, want %d", got, want)
	}

	// Back down, never below the pages others hold.
	prm.Pool = val(t, strconv.FormatInt(max(before, st.ShrinkFloor())*size, 10))
	tg = moduletest.LocalTarget(t, tr, New())
	if p, err = m.Check(ctx, tg, prm); err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
}
