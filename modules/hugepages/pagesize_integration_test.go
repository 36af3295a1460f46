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

// kernelSizes lists the huge page sizes this kernel offers, from sysfs.
func kernelSizes(t *testing.T) []int64 {
	dirs, err := filepath.Glob("/sys/kernel/mm/hugepages/hugepages-*kB")
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, d := range dirs {
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(d), "hugepages-"), "kB"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, kb<<10)
	}
	slices.Sort(out)
	return out
}

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

// TestIntegrationGigPages runs page_size: 1GiB against this kernel. Where
// the kernel offers no 1 GiB pages (a CPU without pdpe1gb, as on the test
// machine this was written on) check refuses with the sizes it does
// offer, and nothing changes. Where it offers them, a 1 GiB pool is grown,
// verified, persisted in the tmpfiles file, and shrunk back.
func TestIntegrationGigPages(t *testing.T) {
	st := testhost.LockKernel(t)
	ctx := ctxT(t)
	tr := transport.NewLocal()
	sizes := kernelSizes(t)
	gigDir := "/sys/kernel/mm/hugepages/hugepages-1048576kB"
	prm := DefaultParams()
	prm.PageSize = val(t, "1GiB")
	file := tmpfilesParam(t, prm)
	m := New()
	tg := moduletest.LocalTarget(t, tr, New())

	if !slices.Contains(sizes, GiB) {
		prm.Pool = val(t, "${1 * GiB}")
		names := make([]string, len(sizes))
		for i, s := range sizes {
			names[i] = sizeName(s)
		}
		want := "page_size 1 GiB: the host offers " + strings.Join(names, " and ") + " huge pages only (no " + gigDir + "; on x86, 1 GiB pages need a CPU with the pdpe1gb flag)"
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

	// The kernel offers 1 GiB pages: grow the pool by one, for real.
	nr := gigDir + "/nr_hugepages"
	before, err := strconv.ParseInt(readNr(t, nr), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(nr, []byte(strconv.FormatInt(before, 10)), 0); err != nil {
			t.Errorf("put the 1 GiB pool back: %v", err)
		}
	})
	prm.Pool = val(t, strconv.FormatInt((before+1)*GiB, 10))
	p, err := m.Check(ctx, tg, prm)
	if err != nil {
		t.Fatal(err)
	}
	if got := moduletest.Changes(p); len(got) != 2 || got[0] != nr+" "+strconv.FormatInt(before, 10)+"→"+strconv.FormatInt(before+1, 10) {
		t.Fatalf("plan: %q", got)
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
		t.Logf("no free gigabyte on this machine: the shortfall was reported and backed out (%v)", err)
		return
	}
	t.Logf("1 GiB pool grown from %d to %d pages", before, before+1)
	if err := m.Verify(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(data), "\nw "+nr+" - - - - "+strconv.FormatInt(before+1, 10)+"\n") {
		t.Errorf("tmpfiles file: %q %v", data, err)
	}
	prm.Pool = val(t, strconv.FormatInt(before*GiB, 10))
	tg = moduletest.LocalTarget(t, tr, New())
	if p, err = m.Check(ctx, tg, prm); err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	if got := readNr(t, nr); got != strconv.FormatInt(before, 10) {
		t.Errorf("pool %s after shrinking, want %d", got, before)
	}
}

// TestIntegrationExplicitDefaultSize: naming the kernel's default size
// (2 MiB here) plans exactly what leaving page_size unset plans, and
// applies, verifies and re-checks clean the same way.
func TestIntegrationExplicitDefaultSize(t *testing.T) {
	st := testhost.LockKernel(t)
	ctx := ctxT(t)
	tr := transport.NewLocal()
	m := New()
	tg := moduletest.LocalTarget(t, tr, New())
	before, _ := strconv.ParseInt(st.Values["vm.nr_hugepages"], 10, 64)
	size := tg.Facts.HugePageSize
	pool := strconv.FormatInt((before*size)+64*MiB, 10)

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
	want := before + 64*MiB/size
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
// nr_hugepages on this machine (one node here: node0's file), reads every
// node back, and shrinks it back the same way.
func TestIntegrationNUMASpread(t *testing.T) {
	st := testhost.LockKernel(t)
	ctx := ctxT(t)
	tr := transport.NewLocal()
	m := New()
	tg := moduletest.LocalTarget(t, tr, New())
	before, _ := strconv.ParseInt(st.Values["vm.nr_hugepages"], 10, 64)
	size := tg.Facts.HugePageSize
	nodes := tg.Facts.NodesOf(size)
	if len(nodes) == 0 {
		t.Fatalf("no per-node pools in the facts of this machine: %+v", tg.Facts.NodePools)
	}
	want := before + 64*MiB/size
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

	prm.Pool = val(t, strconv.FormatInt(before*size, 10))
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
