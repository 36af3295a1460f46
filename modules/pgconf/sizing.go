package pgconf

import (
	"context"
	"fmt"
)

const mib = 1 << 20

// probeFunc asks the postgres binary what the shared memory segment costs
// with shared_buffers set to sb bytes: in MB (shared_memory_size, rounded
// up) and in huge pages (shared_memory_size_in_huge_pages).
type probeFunc func(ctx context.Context, sb int64) (segMB, pages int64, err error)

// sizing is the result of fitting the segment to the pool.
type sizing struct {
	SharedBuffers int64 // bytes, whole blocks
	SegmentMB     int64
	SegmentPages  int64
	PoolPages     int64
	Probes        int
}

// Slack is how many bytes of the pool the segment leaves unused.
func (s sizing) Slack(hugePage int64) int64 { return (s.PoolPages - s.SegmentPages) * hugePage }

// maxSlack is how much of the pool may stay unused: 1% of the pool plus two
// pages (one for the MB rounding of shared_memory_size, one for the page
// rounding of the segment).
func maxSlack(poolBytes, hugePage int64) int64 { return poolBytes/100 + 2*hugePage }

// fitPool sizes shared_buffers so the whole segment lands on the pool.
//
// Pass 1 (segAtPoolMB) is the segment with shared_buffers = the whole pool:
// the difference is the overhead (buffer descriptors, WAL buffers, lock
// tables...). shared_buffers = pool − overhead, rounded down to whole
// blocks. Because the overhead grows with shared_buffers, measuring it at
// the larger size errs a little under the pool. Each candidate is then
// confirmed with a probe: too big for the pool → shrink by the excess;
// leaving more than maxSlack unused → grow by the slack. The overhead is
// nearly linear, so this settles in one or two probes.
func fitPool(ctx context.Context, pool, hugePage, block, segAtPoolMB int64, probe probeFunc) (sizing, error) {
	if hugePage <= 0 || block <= 0 {
		return sizing{}, fmt.Errorf("invalid huge page size %d or block size %d", hugePage, block)
	}
	poolPages := pool / hugePage
	poolBytes := poolPages * hugePage
	minSB := 16 * block // the server's minimum shared_buffers
	if poolPages <= 0 {
		return sizing{}, fmt.Errorf("huge page pool is empty: nothing to size shared_buffers against")
	}
	overhead := segAtPoolMB*mib - poolBytes
	if overhead < 0 {
		overhead = 0
	}
	allowed := maxSlack(poolBytes, hugePage)
	sb := roundDown(poolBytes-overhead, block)
	var best *sizing
	res := sizing{PoolPages: poolPages}
	for res.Probes < 8 {
		if sb < minSB {
			return sizing{}, fmt.Errorf("a huge page pool of %s cannot hold the shared memory segment: its overhead alone is about %s (raise the pool)",
				formatSize(poolBytes), formatSize(roundUp(overhead, mib)))
		}
		segMB, pages, err := probe(ctx, sb)
		res.Probes++
		if err != nil {
			return sizing{}, err
		}
		if pages <= 0 {
			return sizing{}, fmt.Errorf("postgres reports shared_memory_size_in_huge_pages = %d: huge pages unsupported here", pages)
		}
		if pages > poolPages {
			sb = roundDown(sb-(pages-poolPages)*hugePage, block)
			continue
		}
		cand := sizing{SharedBuffers: sb, SegmentMB: segMB, SegmentPages: pages, PoolPages: poolPages, Probes: res.Probes}
		if best == nil || cand.SharedBuffers > best.SharedBuffers {
			best = &cand
		}
		slack := (poolPages - pages) * hugePage
		if slack <= allowed {
			return cand, nil
		}
		sb = roundDown(sb+slack-hugePage, block)
	}
	if best != nil {
		return sizing{}, fmt.Errorf("could not fill the pool of %d huge pages closely: best shared_buffers %s leaves %s unused (more than %s)",
			poolPages, formatSize(best.SharedBuffers), formatSize(best.Slack(hugePage)), formatSize(allowed))
	}
	return sizing{}, fmt.Errorf("could not fit the shared memory segment into %d huge pages after %d probes", poolPages, res.Probes)
}

func roundDown(n, m int64) int64 {
	if n < 0 {
		return 0
	}
	return n / m * m
}

func roundUp(n, m int64) int64 { return (n + m - 1) / m * m }

// hugePageSize is the planned huge_page_size setting ("0" for plans made
// before the setting was recorded).
func (st *State) hugePageSize() string {
	if st.HugePageSize == "" {
		return "0"
	}
	return st.HugePageSize
}
