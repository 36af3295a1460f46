package overcommit

import (
	"fmt"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/modules/internal/sysctlconf"
)

// Verdict says whether a commit limit protects a host: strict overcommit
// only turns an out-of-memory into an allocation error if the kernel
// refuses commitments before it runs out of memory to back them. Above
// that point the limit never bites and the OOM killer strikes as with
// default overcommit (measured in the testbed on a 4 GiB box with the
// seed's flat 2 GiB headroom). Sizes are in bytes.
type Verdict struct {
	Kbytes     int64 // vm.overcommit_kbytes
	SwapTotal  int64
	MemTotal   int64
	Pool       int64 // huge page pool
	MinFree    int64 // vm.min_free_kbytes
	SUnreclaim int64
}

// NewVerdict judges the limit kbytes on a host with a huge page pool of
// pool bytes.
func NewVerdict(f *facts.Facts, pool, kbytes int64) Verdict {
	return Verdict{Kbytes: kbytes, SwapTotal: f.SwapTotal, MemTotal: f.MemTotal, Pool: pool,
		MinFree: f.MinFree, SUnreclaim: f.SUnreclaim}
}

// CommitLimit is what the kernel will enforce in strict mode with
// overcommit_kbytes set (mm/util.c): the kbytes plus all of swap.
func (v Verdict) CommitLimit() int64 { return v.Kbytes*1024 + v.SwapTotal }

// Backing is the memory that can back commitments: RAM outside the huge
// page pool, less what the kernel keeps where no process can have it,
// plus swap.
//
//   - vm.min_free_kbytes is the reserve under the zones' min watermark:
//     ordinary allocations that would dip into it reclaim or fail, and
//     the OOM killer runs before it is given away.
//   - SUnreclaim is kernel slab that reclaim cannot free (inodes in use,
//     sockets, page-table caches); it is not charged to Committed_AS.
//     It is a snapshot: check shows it, and the ratio's 20% leaves room
//     for it to grow and for the page cache that program text needs.
//   - Swap counts on both sides: committed anonymous memory can be
//     swapped out, and the OOM killer only runs once RAM and swap are
//     both exhausted, which is why the kernel adds SwapTotal to
//     CommitLimit. So the verdict does not depend on swap, and the
//     headroom need not shrink when a host has some.
//
// Huge pages are left out because the pool is reserved: no commitment
// can be served from it.
func (v Verdict) Backing() int64 {
	return v.MemTotal - v.Pool - v.MinFree - v.SUnreclaim + v.SwapTotal
}

// Protective reports whether the kernel refuses commitments before it
// runs out of memory to back them.
func (v Verdict) Protective() bool { return v.CommitLimit() <= v.Backing() }

// String shows the verdict with every number that went into it.
func (v Verdict) String() string {
	b := sysctlconf.Bytes
	word := fmt.Sprintf("protective, %s to spare", b(v.Backing()-v.CommitLimit()))
	if !v.Protective() {
		word = fmt.Sprintf("NOT protective, %s over: the kernel runs out of memory before the limit bites and the OOM killer strikes as without strict overcommit", b(v.CommitLimit()-v.Backing()))
	}
	rel := "≤"
	if !v.Protective() {
		rel = ">"
	}
	return fmt.Sprintf("commit limit %s (overcommit_kbytes %d + swap %s) %s %s that can back it (MemTotal %s − huge page pool %s − min_free_kbytes %s − unreclaimable slab %s + swap %s): %s",
		b(v.CommitLimit()), v.Kbytes, b(v.SwapTotal), rel, b(v.Backing()),
		b(v.MemTotal), b(v.Pool), b(v.MinFree), b(v.SUnreclaim), b(v.SwapTotal), word)
}

// judge notes the verdict and, unless the play accepts it, turns a limit
// that is not protective into a finding: a change check reports as drift
// and apply refuses. The finding holds only values fixed by the plan (the
// limit), never the slab snapshot, so apply's re-check sees the same one.
func judge(p *plan.ModulePlan, v Verdict, accept bool) (refuse bool) {
	switch {
	case v.Protective():
		p.Note(v.String())
		return false
	case accept:
		p.Note(v.String() + "; accepted (" + keyAccept + ": true)")
		return false
	}
	p.Note(v.String() + "; lower headroom or ratio, or set " + keyAccept + ": true")
	p.Add(plan.Change{
		Kind:   plan.KindAction,
		Target: "commit limit",
		Before: sysctlconf.Bytes(v.CommitLimit()),
		After:  "(not protective: above the memory outside the huge page pool; lower headroom or ratio, or set " + keyAccept + ": true)",
	})
	return true
}

// keyAccept is the policy key that lets a limit that is not protective
// through.
const keyAccept = "accept_unprotective"

// unprotectiveError is apply's refusal: nothing has been changed.
func unprotectiveError(v Verdict) error {
	return fmt.Errorf("refusing a commit limit that does not protect this host: %s; lower headroom or ratio, or set %s: true", v, keyAccept)
}
