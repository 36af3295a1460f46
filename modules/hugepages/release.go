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
	"github.com/pgtune/pgtune/modules/internal/sysctlconf"
)

// Switching back to the default page size. A play that had page_size
// 1GiB left two things behind: the tmpfiles.d file that sets the 1 GiB
// pool at every boot, and the pool itself. Left alone they would keep a
// gigabyte-sized pool reserved next to the new default-size one, twice
// the memory the policy means to take. So when the play asks for the
// default size and pgtune's own boot file is there, the file is removed
// and every pool it sets goes to 0. A file pgtune did not write is only
// reported: its pool is someone else's.
//
// The pools are given back only after pgconf's restart has moved
// PostgreSQL off them (ApplyShrink, held by the engine until the modules
// that require this one ran): if that restart fails, pgconf starts the
// server again on its old settings, which need the old pool. Shrinking
// below the pages in use is what the kernel allows all the same (with
// restart: false, or a server pgconf does not manage): those pages become
// surplus and are freed when their mapping goes. Until then nr_hugepages
// still counts them, so verify reads nr_hugepages less surplus_hugepages.

// managedHeader starts every boot file pgtune writes (renderBootFile).
const managedHeader = "# Managed by pgtune (hugepages)"

// bootLine is a tmpfiles.d `w` line that writes a pool's global
// nr_hugepages.
var bootLine = regexp.MustCompile(`^w\s+(/sys/kernel/mm/hugepages/hugepages-([0-9]+)kB/nr_hugepages)\s`)

// release is what switching back removes: pgtune's boot file and the
// pools it set.
type release struct {
	File   string
	Before []byte
	Pools  []releasedPool
}

// releasedPool is one non-default size's pool going to 0.
type releasedPool struct {
	Size  int64
	Sysfs string
	Pages int64 // nr_hugepages when checked
}

// checkRelease plans the removal of the boot file (if pgtune wrote it)
// and the shrinking of the pools it names; nil when there is none.
func checkRelease(ctx context.Context, t *engine.Target, p *plan.ModulePlan, file string) (*release, error) {
	data, ok, err := t.ReadFile(ctx, file)
	if err != nil {
		return nil, err // "read FILE: …" already
	}
	if !ok {
		return nil, nil
	}
	if !strings.HasPrefix(string(data), managedHeader) {
		p.Note(fmt.Sprintf("%s was not written by pgtune: left as it is, with any huge page pool it sets", file))
		return nil, nil
	}
	r := &release{File: file, Before: data}
	for _, line := range strings.Split(string(data), "\n") {
		m := bootLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		kb, err := strconv.ParseInt(m[2], 10, 64)
		if err != nil || kb <= 0 || kb > facts.MaxBytes>>10 {
			continue
		}
		size := kb << 10
		if size == t.Facts.HugePageSize {
			continue // the default size is this play's own pool
		}
		pl, offered := t.Facts.Pool(size)
		if !offered || pl.Pages == 0 {
			continue
		}
		r.Pools = append(r.Pools, releasedPool{Size: size, Sysfs: m[1], Pages: pl.Pages})
	}
	if len(r.Pools) > 0 && !t.Facts.SysctlWritable {
		if err := sysctlconf.Unwritable(t.Facts, r.Pools[0].Sysfs, p); err != nil {
			return nil, err
		}
	}
	for _, rp := range r.Pools {
		p.Add(plan.Change{Kind: plan.KindSysfs, Target: rp.Sysfs, Before: sysctlconf.Itoa(rp.Pages), After: "0"})
	}
	p.Add(plan.Change{Kind: plan.KindFile, Action: plan.Delete, Target: file, Before: string(data),
		Diff: udiff.Unified("a"+file, "/dev/null", string(data), "")})
	p.Note(fmt.Sprintf("back to the default page size (%s): removing %s and giving back the pools it set at boot",
		sizeName(t.Facts.HugePageSize), file))
	return r, nil
}

// remaining is each pool's pages once the release is applied.
func (r *release) remaining(size int64, pages int64) int64 {
	if r == nil {
		return pages
	}
	for _, rp := range r.Pools {
		if rp.Size == size {
			return 0
		}
	}
	return pages
}

var _ engine.ShrinkAfterDependents = (*Module)(nil)

// ApplyShrink gives back what an earlier page size left, once the modules
// that require this one have run (engine.ShrinkAfterDependents). A
// failure puts back what it changed.
func (m *Module) ApplyShrink(ctx context.Context, t *engine.Target, p *plan.ModulePlan) error {
	st, err := plan.StateOf[State](p)
	if err != nil || st == nil || st.Release == nil {
		return err
	}
	mark := t.Mark()
	if err := applyRelease(ctx, t, st.Release); err != nil {
		err = fmt.Errorf("give back the earlier page size's pool: %w", err)
		if uerr := t.UndoSince(context.WithoutCancel(ctx), mark); uerr != nil {
			return fmt.Errorf("%w; putting it back also failed: %v", err, uerr)
		}
		return fmt.Errorf("%w; %s and its pools are as they were", err, st.Release.File)
	}
	return nil
}

// applyRelease shrinks the pools, then removes the file; both are
// journaled, so a failure and rollback put them back.
func applyRelease(ctx context.Context, t *engine.Target, r *release) error {
	if r == nil {
		return nil
	}
	for _, rp := range r.Pools {
		if err := sysctlconf.RequireRoot(t.Facts, rp.Sysfs); err != nil {
			return err
		}
		if err := t.SetSysfs(ctx, rp.Sysfs, "0"); err != nil {
			return err
		}
	}
	return t.RemoveFile(ctx, r.File)
}

// verifyRelease reads every released pool back at 0 and the file gone.
func verifyRelease(ctx context.Context, t *engine.Target, r *release) error {
	if r == nil {
		return nil
	}
	for _, rp := range r.Pools {
		n, err := persistentPages(ctx, t, rp.Sysfs)
		if err != nil {
			return err
		}
		if n != 0 {
			return fmt.Errorf("%s is %d, planned 0 (the %s pool is given back)", rp.Sysfs, n, sizeName(rp.Size))
		}
	}
	if _, ok, err := t.ReadFile(ctx, r.File); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%s is still there", r.File)
	}
	return nil
}

// persistentPages is a pool's nr_hugepages less its surplus_hugepages.
// The kernel's nr_hugepages counts the pages still mapped after a shrink
// below them (they turned surplus and are freed with their mapping): on a
// Debian box, right after the write of 0 the 1 GiB pool under the running
// postmaster read nr_hugepages 1, surplus_hugepages 1.
func persistentPages(ctx context.Context, t *engine.Target, nrPath string) (int64, error) {
	n, err := readCount(ctx, t, nrPath)
	if err != nil {
		return 0, err
	}
	surplus, err := readCount(ctx, t, path.Join(path.Dir(nrPath), "surplus_hugepages"))
	if err != nil {
		return 0, err
	}
	return n - surplus, nil
}

// otherPools is the memory held by huge page pools of every size but
// size, as they will be once the plan is applied: what overcommit must
// count outside its budget beside the planned pool.
func otherPools(f *facts.Facts, size int64, r *release) int64 {
	var n int64
	for _, pl := range f.HugePagePools {
		if pl.Size != size {
			n += r.remaining(pl.Size, pl.Pages) * pl.Size
		}
	}
	return n
}
