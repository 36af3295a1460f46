package hugepages

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/aymanbagabas/go-udiff"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/modules/internal/sysctlconf"
)

// Huge pages of a size other than the kernel's default (1 GiB on x86) have
// no sysctl: their pool is /sys/kernel/mm/hugepages/hugepages-<kB>kB/
// nr_hugepages, and sysctl.d cannot set it at boot.
//
// Persistence. The kernel command line (hugepagesz=1G hugepages=N) is the
// only way the kernel is sure to find N contiguous gigabytes: it reserves
// them before anything fragments memory. Editing the boot loader is not
// something pgtune does behind the operator's back (a wrong line can leave
// a host unbootable, and each distribution regenerates it differently), so
// check prints the exact parameters to add. What pgtune writes is a
// systemd-tmpfiles `w` line: systemd-tmpfiles-setup.service runs it in
// sysinit.target, before basic.target and so before any PostgreSQL unit,
// when memory is as unfragmented as it gets after boot; no unit of its own
// to order, enable or remove. A pool that falls short at boot shows up as
// drift in the next check, and PostgreSQL (huge_pages = on) refuses to
// start rather than run on 4 kB pages.

// DefaultTmpfilesFile is where a non-default size's pool is persisted.
const DefaultTmpfilesFile = "/etc/tmpfiles.d/pgtune-hugepages.conf"

// hugepagesDir is where the kernel lists each page size it offers.
const hugepagesDir = "/sys/kernel/mm/hugepages"

var sizePattern = regexp.MustCompile(`^([0-9]+)\s*([A-Za-z]*)$`)

// sizeUnits are the binary units a page_size may be written in; huge page
// sizes are powers of two, so kB/MB/GB mean KiB/MiB/GiB as in the kernel's
// own hugepages-2048kB.
var sizeUnits = map[string]int64{
	"": 1, "B": 1,
	"k": 1 << 10, "K": 1 << 10, "kB": 1 << 10, "KB": 1 << 10, "KiB": 1 << 10,
	"M": 1 << 20, "MB": 1 << 20, "MiB": 1 << 20,
	"G": 1 << 30, "GB": 1 << 30, "GiB": 1 << 30,
}

// parsePageSize reads a page_size: bytes, or a number with a unit
// ("2MiB", "1GiB", "2048kB"). It must be a power of two from 8 KiB to
// 16 GiB (the largest huge page any architecture has).
func parsePageSize(s string) (int64, error) {
	m := sizePattern.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("page_size %q: want a size such as 2MiB or 1GiB", s)
	}
	unit, ok := sizeUnits[m[2]]
	if !ok {
		return 0, fmt.Errorf("page_size %q: unknown unit %q (use kB, MiB or GiB)", s, m[2])
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil || n > (16<<30)/unit {
		return 0, fmt.Errorf("page_size %q: larger than 16 GiB", s)
	}
	n *= unit
	if n < 8<<10 || n&(n-1) != 0 {
		return 0, fmt.Errorf("page_size %q: a huge page size is a power of two of at least 8 KiB", s)
	}
	return n, nil
}

// sizeName renders a page size as people write it: "2 MiB", "1 GiB".
func sizeName(n int64) string {
	for _, u := range []struct {
		name string
		b    int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.b && n%u.b == 0 {
			return fmt.Sprintf("%d %s", n/u.b, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// offered checks that the host's kernel offers size, naming what it does
// offer when not.
func offered(f *facts.Facts, size int64) error {
	sizes := f.PageSizes()
	names := make([]string, len(sizes))
	for i, s := range sizes {
		if s == size {
			return nil
		}
		names[i] = sizeName(s)
	}
	offers := "no huge pages at all"
	if len(names) > 0 {
		offers = strings.Join(names, " and ") + " huge pages only"
	}
	hint := ""
	if size == 1<<30 {
		hint = "; on x86, 1 GiB pages need a CPU with the pdpe1gb flag"
	}
	return fmt.Errorf("page_size %s: the host offers %s (no %s%s)", sizeName(size), offers, sizeDir(size), hint)
}

func sizeDir(size int64) string {
	return fmt.Sprintf("%s/hugepages-%dkB", hugepagesDir, size>>10)
}

// livePool is where the pool of one page size is set and read: the
// default size through vm.nr_hugepages (as before), any other through its
// sysfs nr_hugepages.
type livePool struct {
	Size int64
	// Sysfs is the pool's nr_hugepages file; empty for the default size.
	Sysfs string
}

func poolFor(f *facts.Facts, size int64) livePool {
	if size == f.HugePageSize {
		return livePool{Size: size}
	}
	return livePool{Size: size, Sysfs: sizeDir(size) + "/nr_hugepages"}
}

// Target is what the plan shows as changing.
func (lp livePool) Target() string {
	if lp.Sysfs == "" {
		return key
	}
	return lp.Sysfs
}

func (lp livePool) kind() plan.Kind {
	if lp.Sysfs == "" {
		return plan.KindSysctl
	}
	return plan.KindSysfs
}

func (lp livePool) set(ctx context.Context, t *engine.Target, pages int64) error {
	if lp.Sysfs == "" {
		return t.SetSysctl(ctx, key, sysctlconf.Itoa(pages))
	}
	return t.SetSysfs(ctx, lp.Sysfs, sysctlconf.Itoa(pages))
}

// read returns the persistent pool the kernel holds now.
func (lp livePool) read(ctx context.Context, t *engine.Target) (int64, error) {
	if lp.Sysfs == "" {
		return livePages(ctx, t)
	}
	return readCount(ctx, t, lp.Sysfs)
}

func readCount(ctx context.Context, t *engine.Target, p string) (int64, error) {
	v, err := t.ReadSysfs(ctx, p)
	if err != nil {
		return 0, err
	}
	return facts.ParseInt(p, v, 0, facts.MaxPages)
}

// current is the pool as the facts saw it: pages now, and pages that
// cannot be given back (faulted in, or reserved by mappings not yet
// touched).
func current(f *facts.Facts, lp livePool) (cur, held int64, err error) {
	if lp.Sysfs == "" {
		curStr, ok := f.Sysctl[key]
		if !ok {
			return 0, 0, fmt.Errorf("%s is not readable on the host (kernel without hugetlbfs?)", key)
		}
		if cur, err = facts.ParseInt(key, curStr, 0, facts.MaxPages); err != nil {
			return 0, 0, err
		}
		return cur, f.HugePagesTotal - f.HugePagesFree + f.HugePagesRsvd, nil
	}
	p, ok := f.Pool(lp.Size)
	if !ok {
		return 0, 0, offered(f, lp.Size)
	}
	// sysfs nr_hugepages is the whole pool, surplus pages included (as
	// HugePages_Total is); the pool pgtune sets is the persistent part,
	// as vm.nr_hugepages reads it.
	return p.Pages - p.Surplus, p.Pages - p.Free + p.Resv, nil
}

// bootFile is the tmpfiles.d file that sets a non-default size's pool at
// boot.
type bootFile struct {
	Path    string
	Existed bool
	Before  []byte
	After   []byte
}

func (b *bootFile) changed() bool {
	return b != nil && (!b.Existed || string(b.Before) != string(b.After))
}

// validTmpfilesFile accepts a *.conf file in a tmpfiles.d directory: the
// only place systemd-tmpfiles reads at boot.
func validTmpfilesFile(p string) error {
	if !managedTmpfilesFile(p) || path.Clean(p) != p {
		return fmt.Errorf("tmpfiles_file %q: must be an absolute path ending in .conf in a tmpfiles.d directory", p)
	}
	return nil
}

func managedTmpfilesFile(p string) bool {
	return path.IsAbs(p) && strings.HasSuffix(p, ".conf") && !strings.HasPrefix(path.Base(p), ".") &&
		path.Base(path.Dir(p)) == "tmpfiles.d"
}

func renderBootFile(lp livePool, pages int64) []byte {
	name := sizeName(lp.Size)
	return []byte(fmt.Sprintf(`# Managed by pgtune (hugepages); rewritten whole on every apply.
# The %s huge page pool, written at boot by systemd-tmpfiles-setup.service
# (sysinit.target, before any PostgreSQL unit starts). Only the kernel
# command line (hugepagesz=%s hugepages=%d) is sure to find contiguous
# memory for it on a fragmented host; pgtune does not edit the boot loader.
# On NUMA hosts the kernel spreads this pool evenly over the nodes.
w %s - - - - %d
`, name, kernelSizeName(lp.Size), pages, lp.Sysfs, pages))
}

// kernelSizeName is a size as hugepagesz= takes it: 1G, 2M.
func kernelSizeName(n int64) string {
	switch {
	case n%(1<<30) == 0:
		return fmt.Sprintf("%dG", n>>30)
	case n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	}
	return fmt.Sprintf("%dK", n>>10)
}

// checkBootFile plans the tmpfiles file for a non-default size's pool.
func checkBootFile(ctx context.Context, t *engine.Target, p *plan.ModulePlan, file string, lp livePool, pages int64) (*bootFile, error) {
	before, existed, err := t.ReadFile(ctx, file)
	if err != nil {
		return nil, err // "read FILE: …" already
	}
	b := &bootFile{Path: file, Existed: existed, Before: before, After: renderBootFile(lp, pages)}
	if b.changed() {
		from := "/dev/null"
		if existed {
			from = "a" + file
		}
		p.Add(plan.Change{Kind: plan.KindFile, Target: file, Before: string(before), After: string(b.After),
			Diff: udiff.Unified(from, "b"+file, string(before), string(b.After))})
	}
	p.Note(fmt.Sprintf("%s pages are persisted by %s (systemd-tmpfiles at boot); to be sure of them on a fragmented host, add hugepagesz=%s hugepages=%d to the kernel command line (pgtune does not edit the boot loader)",
		sizeName(lp.Size), file, kernelSizeName(lp.Size), pages))
	return b, nil
}

func applyBootFile(ctx context.Context, t *engine.Target, b *bootFile) error {
	if !b.changed() {
		return nil
	}
	return t.WriteFile(ctx, b.Path, b.After, transport.WriteOptions{Mode: "0644"})
}

func verifyBootFile(ctx context.Context, t *engine.Target, b *bootFile) error {
	if b == nil {
		return nil
	}
	data, ok, err := t.ReadFile(ctx, b.Path)
	if err != nil {
		return err
	}
	if !ok || string(data) != string(b.After) {
		return fmt.Errorf("%s does not hold the planned content", b.Path)
	}
	return nil
}
