package overcommit

import (
	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/modules/hugepages"
)

// Every huge page size's pool is memory outside the commit budget, not
// only the one the play sizes: with page_size 1GiB, a 2 MiB pool left
// from before (or set by someone else) is just as reserved, and leaving
// it out would put the commit limit above what RAM can back while the
// verdict calls it protective.

// plannedOtherPools is what hugepages plans to leave reserved in pools
// of other page sizes (its other_pools output: an earlier size's pool it
// gives back counts 0). A plan without that output is read from the
// facts: every pool but the planned size's, as it is now.
func plannedOtherPools(t *engine.Target) int64 {
	if n, ok := t.Int64Output(hugepages.Name, "other_pools"); ok {
		return n
	}
	size, ok := t.Int64Output(hugepages.Name, "page_size")
	if !ok {
		size = t.Facts.HugePageSize
	}
	return otherPools(t.Facts, size)
}

// otherPools sums the persistent pools (nr_hugepages) of every page size
// but size.
func otherPools(f *facts.Facts, size int64) int64 {
	var n int64
	for _, p := range f.HugePagePools {
		if p.Size != size {
			n += p.Pages * p.Size
		}
	}
	return n
}
