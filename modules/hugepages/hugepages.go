// Package hugepages reserves the huge page pool PostgreSQL's shared memory
// lands on: vm.nr_hugepages live and in a sysctl.d file, grown only after
// the kernel was given its best chance to find contiguous memory, and
// verified page for page.
package hugepages

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/modules/internal/sysctlconf"
)

// Name is the module's key in a playbook's policy.
const Name = "hugepages"

const key = "vm.nr_hugepages"

// Params are the policy knobs. Sizes are bytes; every value may be a
// `${...}` expression over facts, vars and host.
type Params struct {
	// Pool is the wanted pool size, rounded down to whole huge pages.
	Pool expr.Value `yaml:"pool"`
	// MinAvailable is the floor MemAvailable must stay above after the
	// pool grows (0 disables the preflight).
	MinAvailable expr.Value `yaml:"min_available"`
	// MaxPool bounds Pool: a policy asking for more is refused before
	// anything runs.
	MaxPool expr.Value `yaml:"max_pool"`
	// SysctlFile is the file that makes the pool survive a reboot.
	SysctlFile expr.Value `yaml:"sysctl_file"`
	// OnConflict says what to do about other sysctl files that would
	// override SysctlFile at boot: fail or comment.
	OnConflict expr.Value `yaml:"on_conflict"`
	// PageSize is the huge page size to reserve ("2MiB", "1GiB", bytes);
	// unset, the kernel's default (Hugepagesize). A size other than the
	// default is set through sysfs and persisted by TmpfilesFile.
	PageSize expr.Value `yaml:"page_size"`
	// TmpfilesFile persists a pool of a non-default size (see pagesize.go).
	TmpfilesFile expr.Value `yaml:"tmpfiles_file"`
	// NUMA is kernel (leave the distribution over nodes to the kernel) or
	// spread (every node gets an even share, a node falling short fails).
	NUMA expr.Value `yaml:"numa"`
}

// Defaults, as expressions evaluated per host.
const (
	DefaultPool         = "${floor(facts.mem_total * 0.25)}"
	DefaultMinAvailable = "${max(floor(facts.mem_total * 0.1), 512 * MiB)}"
	DefaultMaxPool      = "${floor(facts.mem_total * 0.75)}"
	DefaultSysctlFile   = "/etc/sysctl.d/10-hugepages.conf"
	DefaultOnConflict   = sysctlconf.Fail
)

// DefaultParams returns the parameters with every default filled in.
func DefaultParams() *Params {
	return &Params{
		Pool:         expr.MustParse(DefaultPool),
		MinAvailable: expr.MustParse(DefaultMinAvailable),
		MaxPool:      expr.MustParse(DefaultMaxPool),
		SysctlFile:   expr.MustParse(DefaultSysctlFile),
		OnConflict:   expr.MustParse(DefaultOnConflict),
		TmpfilesFile: expr.MustParse(DefaultTmpfilesFile),
		NUMA:         expr.MustParse(NUMAKernel),
	}
}

// Module implements engine.Module.
type Module struct{}

// New returns the hugepages module.
func New() *Module { return &Module{} }

func (*Module) Name() string       { return Name }
func (*Module) Requires() []string { return nil }
func (*Module) NewParams() any     { return DefaultParams() }

// Outputs declares what Check plans for expressions (hugepages.pool):
// names and types, for validate.
func (*Module) Outputs() map[string]any {
	return map[string]any{"pool": int64(0), "pages": int64(0), "page_size": int64(0), "other_pools": int64(0)}
}

// State is what Check hands to Apply and Verify.
type State struct {
	PageSize  int64
	Pages     int64 // planned nr_hugepages
	PrevPages int64 // nr_hugepages when checked
	Live      bool  // the pool (or a node's share) must change
	// Files is the sysctl.d plan (default page size); Boot the tmpfiles.d
	// file (any other size). One of them is nil.
	Files *sysctlconf.Plan
	Boot  *bootFile
	Pool  livePool
	// Release gives back what an earlier page_size left (release.go):
	// pgtune's tmpfiles.d file and the pools it set. Only with the
	// default size; nil when there is nothing to give back.
	Release *release
	// Nodes is each node's planned share under numa: spread (nil: the
	// kernel distributes).
	Nodes []nodeShare
}

// settings are the params evaluated for one host.
type settings struct {
	pool, maxPool, minAvailable int64
	sysctlFile, onConflict      string
	pageSize                    int64 // 0: the kernel's default
	tmpfilesFile, numa          string
}

// Validate checks, without a host, every param that needs none: plain
// values and expressions over constants, against their types and bounds.
func (m *Module) Validate(params any) error {
	prm, ok := params.(*Params)
	if !ok {
		return fmt.Errorf("hugepages: unexpected params %T", params)
	}
	_, err := prm.eval(expr.NewScope(""), true, 0)
	return err
}

// eval evaluates and bounds-checks the params in s. With static, values
// that need a host are skipped (and checks that need them). memTotal (0:
// unknown) only words the max_pool error.
func (prm *Params) eval(s *expr.Scope, static bool, memTotal int64) (settings, error) {
	var out settings
	skip := func(v expr.Value) bool { return static && !v.Static() }
	var err error
	if !skip(prm.Pool) {
		if out.pool, err = nonNegative(s, prm.Pool, "pool"); err != nil {
			return out, err
		}
	}
	if !skip(prm.MaxPool) {
		if out.maxPool, err = nonNegative(s, prm.MaxPool, "max_pool"); err != nil {
			return out, err
		}
	}
	if !skip(prm.Pool) && !skip(prm.MaxPool) && out.pool > out.maxPool {
		share := ""
		// A share of RAM only for a max_pool that depends on the host:
		// a constant bound gets the same message everywhere.
		if memTotal > 0 && !prm.MaxPool.Static() {
			share = fmt.Sprintf(" (%.0f%% of RAM)", 100*float64(out.maxPool)/float64(memTotal))
		}
		return out, s.Errorf(prm.Pool, "pool %s (%d bytes) is above max_pool %s%s; raise max_pool to allow it",
			sysctlconf.Bytes(out.pool), out.pool, sysctlconf.Bytes(out.maxPool), share)
	}
	if !skip(prm.MinAvailable) {
		if out.minAvailable, err = nonNegative(s, prm.MinAvailable, "min_available"); err != nil {
			return out, err
		}
	}
	if !skip(prm.SysctlFile) {
		if out.sysctlFile, err = s.String(prm.SysctlFile); err != nil {
			return out, fmt.Errorf("sysctl_file: %w", err)
		}
	}
	if !skip(prm.OnConflict) {
		if out.onConflict, err = s.String(prm.OnConflict); err != nil {
			return out, fmt.Errorf("on_conflict: %w", err)
		}
		if err := sysctlconf.ValidOnConflict(out.onConflict); err != nil {
			return out, s.Errorf(prm.OnConflict, "%v", err)
		}
	}
	if prm.PageSize.IsSet() && !skip(prm.PageSize) {
		v, err := s.String(prm.PageSize)
		if err != nil {
			return out, fmt.Errorf("page_size: %w", err)
		}
		if out.pageSize, err = parsePageSize(v); err != nil {
			return out, s.Errorf(prm.PageSize, "%v", err)
		}
	}
	if !skip(prm.TmpfilesFile) {
		if out.tmpfilesFile, err = s.String(prm.TmpfilesFile); err != nil {
			return out, fmt.Errorf("tmpfiles_file: %w", err)
		}
		if err := validTmpfilesFile(out.tmpfilesFile); err != nil {
			return out, s.Errorf(prm.TmpfilesFile, "%v", err)
		}
	}
	if !skip(prm.NUMA) {
		if out.numa, err = s.String(prm.NUMA); err != nil {
			return out, fmt.Errorf("numa: %w", err)
		}
		if err := validNUMA(out.numa); err != nil {
			return out, s.Errorf(prm.NUMA, "%v", err)
		}
	}
	return out, nil
}

// Check plans the pool from the facts. Outputs: pool (bytes actually
// planned, pages × page size), pages, page_size. The params are evaluated
// and checked before any host value is looked at, so a bad policy gets
// the same error on every host.
func (m *Module) Check(ctx context.Context, t *engine.Target, params any) (*plan.ModulePlan, error) {
	prm, ok := params.(*Params)
	if !ok {
		return nil, fmt.Errorf("hugepages: unexpected params %T", params)
	}
	f := t.Facts
	set, err := prm.eval(t.Scope, false, f.MemTotal)
	if err != nil {
		return nil, err
	}
	pool, floor, path, onConflict := set.pool, set.minAvailable, set.sysctlFile, set.onConflict
	if f.HugePageSize <= 0 {
		return nil, fmt.Errorf("no Hugepagesize in /proc/meminfo: the kernel has no huge page support")
	}
	size := f.HugePageSize
	if set.pageSize > 0 {
		if err := offered(f, set.pageSize); err != nil {
			return nil, err
		}
		size = set.pageSize
	}
	lp := poolFor(f, size)
	cur, held, err := current(f, lp)
	if err != nil {
		return nil, err
	}

	pages := pool / size
	p := &plan.ModulePlan{
		Module:  Name,
		Outputs: map[string]any{"pool": pages * size, "pages": pages, "page_size": size},
	}
	st := &State{PageSize: size, Pages: pages, PrevPages: cur, Live: pages != cur, Pool: lp}
	nodes := f.NodesOf(size)
	if set.numa == NUMASpread && len(nodes) > 0 {
		st.Nodes = evenShares(nodes, pages)
		for _, n := range st.Nodes {
			st.Live = st.Live || n.After != n.Before
		}
	}
	if st.Live {
		if !f.SysctlWritable {
			if err := sysctlconf.Unwritable(f, lp.Target(), p); err != nil {
				return nil, err
			}
		}
		if pages > cur {
			grow := (pages - cur) * size
			left := f.MemAvailable - grow
			if floor > 0 && left < floor {
				return nil, fmt.Errorf("preflight: growing the pool by %d pages (%s) leaves MemAvailable at %s, below min_available %s: %s missing",
					pages-cur, sysctlconf.Bytes(grow), sysctlconf.Bytes(left), sysctlconf.Bytes(floor), sysctlconf.Bytes(floor-left))
			}
		} else if pages < cur && pages < held {
			// Pages faulted in (Total-Free) plus pages promised to
			// mappings not yet touched (Rsvd) cannot be given back.
			return nil, fmt.Errorf("refusing to shrink the pool to %d pages: %d pages are in use or reserved (a running postmaster's shared memory sits on them); lower shared_buffers and restart PostgreSQL first",
				pages, held)
		}
		if st.Nodes != nil {
			if err := planSpread(p, st.Nodes, size); err != nil {
				return nil, err
			}
		} else if pages != cur {
			p.Add(plan.Change{Kind: lp.kind(), Target: lp.Target(), Before: sysctlconf.Itoa(cur), After: sysctlconf.Itoa(pages)})
		}
	}
	if lp.Sysfs == "" {
		files, err := sysctlconf.Check(ctx, t, p, sysctlconf.File{
			Path:       path,
			Module:     Name,
			Settings:   []sysctlconf.Setting{{Key: key, Value: sysctlconf.Itoa(pages)}},
			OnConflict: onConflict,
		})
		if err != nil {
			return nil, err
		}
		st.Files = files
		if st.Release, err = checkRelease(ctx, t, p, set.tmpfilesFile); err != nil {
			return nil, err
		}
	} else {
		if st.Boot, err = checkBootFile(ctx, t, p, set.tmpfilesFile, lp, pages); err != nil {
			return nil, err
		}
		if f.HugePagesTotal > 0 {
			p.Note(fmt.Sprintf("%d huge pages of the default size (%s) stay reserved: page_size %s manages only its own pool",
				f.HugePagesTotal, sizeName(f.HugePageSize), sizeName(size)))
		}
	}
	if f.NUMANodes > 1 && size == f.HugePageSize {
		p.Note(fmt.Sprintf("%d NUMA nodes, huge pages per node now: %s", f.NUMANodes, f.NodeList()))
	}
	if st.Nodes == nil {
		if note := unevenNote(nodes, size); note != "" {
			p.Note(note)
		}
	}
	p.Outputs["other_pools"] = otherPools(f, size, st.Release)
	p.State = st
	return p, nil
}

// Apply writes the file, then grows or shrinks the live pool (pools of
// another page size are given back by ApplyShrink). Growing
// first syncs, drops caches and compacts memory so the kernel can still
// find contiguous blocks; a shortfall is retried after another
// compaction (retryWaits: gigantic pages several times, backing off), and
// otherwise the pool and the files go back to where they
// were and the module fails with the numbers.
func (m *Module) Apply(ctx context.Context, t *engine.Target, p *plan.ModulePlan) error {
	st, err := plan.StateOf[State](p)
	if err != nil || st == nil {
		return cmp.Or(err, errors.New("hugepages: no plan state"))
	}
	if st.Live {
		if err := sysctlconf.RequireRoot(t.Facts, st.Pool.Target()); err != nil {
			return err
		}
	}
	mark := t.Mark()
	// The pools an earlier page size left are given back later, in
	// ApplyShrink (release.go).
	if st.Files != nil {
		if err := sysctlconf.Apply(ctx, t, st.Files); err != nil {
			return err
		}
	}
	if err := applyBootFile(ctx, t, st.Boot); err != nil {
		return err
	}
	if !st.Live {
		return nil
	}
	grow := st.Pages > st.PrevPages || st.nodesGrow()
	if grow {
		if err := prepare(ctx, t, true); err != nil {
			return m.backOut(ctx, t, st, mark, fmt.Errorf("prepare memory: %w", err))
		}
	}
	short, err := st.setLive(ctx, t)
	if err != nil {
		return m.backOut(ctx, t, st, mark, err)
	}
	for retry := 0; short != "" && grow && retry < len(st.retryWaits()); retry++ {
		if wait := st.retryWaits()[retry]; wait > 0 {
			if err := pause(ctx, wait); err != nil {
				return m.backOut(ctx, t, st, mark, fmt.Errorf("%s: %w", short, err))
			}
		}
		if t.Log != nil {
			t.Log.Warn("huge page shortfall, compacting and retrying", "short", short, "retry", retry+1)
		}
		if err := prepare(ctx, t, false); err != nil {
			return m.backOut(ctx, t, st, mark, fmt.Errorf("compact memory: %w", err))
		}
		if short, err = st.setLive(ctx, t); err != nil {
			return m.backOut(ctx, t, st, mark, err)
		}
	}
	if short != "" {
		return m.backOut(ctx, t, st, mark, errors.New(short))
	}
	return nil
}

// gigantic is the smallest page size the kernel cannot take from its buddy
// allocator (x86-64: 1 GiB): such a page needs a whole aligned range of
// movable memory (alloc_contig_range), which fails on pages that are only
// briefly pinned, locked or under writeback.
const gigantic = 1 << 30

// retryWaits are the pauses before each retry of a shortfall. A pool of
// the buddy allocator's sizes gets one retry at once after compaction: if
// that falls short, memory is fragmented and waiting does not help. A
// gigantic page's range fails on transient pins; on a box just booted
// (testbed, 4 GiB) the 1 GiB page was refused and given minutes later, so
// those retries back off, 30 s in all.
func (st *State) retryWaits() []time.Duration {
	if st.PageSize >= gigantic {
		return []time.Duration{0, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}
	}
	return []time.Duration{0}
}

// pause waits d or until ctx ends; tests replace it.
var pause = func(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// nodesGrow says whether a node's share grows under numa: spread.
func (st *State) nodesGrow() bool {
	for _, n := range st.Nodes {
		if n.After > n.Before {
			return true
		}
	}
	return false
}

// setLive sets the pool (or each node's share) and returns the shortfall
// in words, "" when the kernel gave every page.
func (st *State) setLive(ctx context.Context, t *engine.Target) (string, error) {
	if st.Nodes != nil {
		short, err := setNodes(ctx, t, st.Nodes)
		if err != nil || len(short) == 0 {
			return "", err
		}
		return fmt.Sprintf("NUMA node shortfall: %s huge pages of %s", strings.Join(short, ", "), sizeName(st.PageSize)), nil
	}
	if err := st.Pool.set(ctx, t, st.Pages); err != nil {
		return "", err
	}
	got, err := st.Pool.read(ctx, t)
	if err != nil || got == st.Pages {
		return "", err
	}
	return fmt.Sprintf("allocated %d of %d huge pages (%s of %s)",
		got, st.Pages, sysctlconf.Bytes(got*st.PageSize), sysctlconf.Bytes(st.Pages*st.PageSize)), nil
}

// backAt checks that the pool (or each node's share) is back as checked.
func (st *State) backAt(ctx context.Context, t *engine.Target) error {
	if st.Nodes != nil {
		back := make([]nodeShare, len(st.Nodes))
		for i, s := range st.Nodes {
			back[i] = nodeShare{Node: s.Node, Path: s.Path, After: s.Before}
		}
		short, err := shortNodes(ctx, t, back)
		if err != nil {
			return err
		}
		if len(short) > 0 {
			return fmt.Errorf("nodes not back: %s", strings.Join(short, ", "))
		}
		return nil
	}
	got, err := st.Pool.read(ctx, t)
	if err != nil {
		return err
	}
	if got != st.PrevPages {
		return fmt.Errorf("pool is at %d pages, not back at %d", got, st.PrevPages)
	}
	return nil
}

// persistPath is the file that keeps the pool across reboots.
func (st *State) persistPath() string {
	if st.Files != nil {
		return st.Files.File.Path
	}
	return st.Boot.Path
}

// backOut undoes what Apply recorded since mark (the pool or the nodes'
// shares, then the files, newest first), checks the pool is back, and
// returns cause with what was restored.
func (m *Module) backOut(ctx context.Context, t *engine.Target, st *State, mark engine.JournalMark, cause error) error {
	var errs []string
	if err := t.UndoSince(ctx, mark); err != nil {
		errs = append(errs, err.Error())
	} else if err := st.backAt(ctx, t); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w; backing out also failed: %s", cause, strings.Join(errs, "; "))
	}
	return fmt.Errorf("%w; the pool is back at %d pages and %s is as it was", cause, st.PrevPages, st.persistPath())
}

// prepareScript gives the kernel its best chance at contiguous 2 MB
// blocks: write back dirty pages, drop clean caches, compact. Kernels
// without CONFIG_COMPACTION have no compact_memory; that is no error.
const prepareScript = `set -e
if [ "$1" = full ]; then
  sync
  echo 3 > /proc/sys/vm/drop_caches
fi
if [ -e /proc/sys/vm/compact_memory ]; then echo 1 > /proc/sys/vm/compact_memory; fi
`

func prepare(ctx context.Context, t *engine.Target, full bool) error {
	mode := "compact"
	if full {
		mode = "full"
	}
	_, err := t.Run(ctx, "sh", "-c", prepareScript, "sh", mode)
	return err
}

// setPool writes vm.nr_hugepages and returns the persistent pool the
// kernel actually holds afterwards.
func setPool(ctx context.Context, t *engine.Target, pages int64) (int64, error) {
	if err := t.SetSysctl(ctx, key, sysctlconf.Itoa(pages)); err != nil {
		return 0, err
	}
	return livePages(ctx, t)
}

// livePages is HugePages_Total minus surplus pages: the persistent pool.
func livePages(ctx context.Context, t *engine.Target) (int64, error) {
	mi, err := sysctlconf.Meminfo(ctx, t)
	if err != nil {
		return 0, err
	}
	return mi["HugePages_Total"] - mi["HugePages_Surp"], nil
}

// nodeScript prints "node pages" for the default huge page size.
const nodeScript = `hp=
while read -r k v rest; do if [ "$k" = Hugepagesize: ]; then hp=$v; fi; done < /proc/meminfo
for n in /sys/devices/system/node/node[0-9]*; do
  [ -d "$n" ] || continue
  printf '%s %s\n' "${n##*/node}" "$(cat "$n/hugepages/hugepages-${hp}kB/nr_hugepages" 2>/dev/null)"
done
`

// Verify reads the pool back from the kernel and the file from disk, and
// reports pages per NUMA node when there is more than one.
func (m *Module) Verify(ctx context.Context, t *engine.Target, p *plan.ModulePlan) error {
	st, err := plan.StateOf[State](p)
	if err != nil || st == nil {
		return cmp.Or(err, errors.New("hugepages: no plan state"))
	}
	got, err := st.Pool.read(ctx, t)
	if err != nil {
		return err
	}
	if got != st.Pages {
		if st.Pool.Sysfs != "" {
			return fmt.Errorf("%s is %d, planned %d", st.Pool.Sysfs, got, st.Pages)
		}
		return fmt.Errorf("HugePages_Total is %d (without surplus), planned %d", got, st.Pages)
	}
	if st.Nodes != nil {
		short, err := shortNodes(ctx, t, st.Nodes)
		if err != nil {
			return err
		}
		if len(short) > 0 {
			return fmt.Errorf("NUMA node shortfall: %s huge pages of %s", strings.Join(short, ", "), sizeName(st.PageSize))
		}
	}
	if st.Files != nil {
		if err := sysctlconf.VerifyOwn(ctx, t, st.Files); err != nil {
			return err
		}
	}
	if err := verifyBootFile(ctx, t, st.Boot); err != nil {
		return err
	}
	if err := verifyRelease(ctx, t, st.Release); err != nil {
		return err
	}
	if st.Pool.Sysfs != "" {
		return nil // nodeScript lists the default size
	}
	res, err := t.Run(ctx, "sh", "-c", nodeScript, "sh")
	if err != nil {
		return fmt.Errorf("read per-node huge pages: %w", err)
	}
	var parts []string
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		if id, n, ok := strings.Cut(line, " "); ok {
			parts = append(parts, "node"+id+"="+n)
		}
	}
	if len(parts) > 1 {
		note := fmt.Sprintf("%d NUMA nodes, huge pages per node: %s", len(parts), strings.Join(parts, " "))
		replaced := false
		for i, n := range p.Notes {
			if strings.Contains(n, "NUMA nodes, huge pages per node") {
				p.Notes[i], replaced = note, true
			}
		}
		if !replaced {
			p.Note(note)
		}
	}
	return nil
}

// nonNegative evaluates a byte count that must not be negative; errors
// name the key and point at the value.
func nonNegative(s *expr.Scope, v expr.Value, key string) (int64, error) {
	n, err := s.Int64(v)
	if err != nil {
		return n, fmt.Errorf("%s: %w", key, err)
	}
	if n < 0 {
		return n, s.Errorf(v, "%s must not be negative, got %d", key, n)
	}
	return n, nil
}
