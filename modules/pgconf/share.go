package pgconf

import (
	"fmt"

	"github.com/pgtune/pgtune/engine/facts"
)

// roomForShare checks that the segment finds its pages when several
// clusters share one machine's huge page pool: a play that sets pool
// below the whole pool gives this cluster that share, and the segment must
// fit both the share and what of the whole pool other processes (the
// other clusters included) do not hold. With no smaller share it is
// roomInPoolOf against the pool given. hp is the size of the pages the
// segment goes on (hugepages' page_size).
func roomForShare(f *facts.Facts, pg *facts.Postgres, live map[string]string, share, whole, segmentPages, hp int64) error {
	if whole <= share || hp <= 0 {
		return roomInPoolOf(f, pg, live, share, segmentPages, hp)
	}
	if segmentPages > share/hp {
		return fmt.Errorf("the shared memory segment needs %d huge pages but this cluster's share (pool) is %d pages", segmentPages, share/hp)
	}
	return roomInPoolOf(f, pg, live, whole, segmentPages, hp)
}
