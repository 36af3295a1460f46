package pgconf

import (
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/facts"
)

func TestRoomInPool(t *testing.T) {
	const hp = 2 << 20
	tests := []struct {
		name              string
		total, free, rsvd int64
		running           bool
		hugetlb           int64
		live              string
		pool, segment     int64
		wantErr           string
	}{
		{name: "empty pool, growing", pool: 256 * hp, segment: 255},
		{name: "exact fit", total: 256, free: 256, pool: 256 * hp, segment: 256},
		{name: "our own segment is freed by the restart", total: 256, free: 100, rsvd: 20, running: true,
			hugetlb: 156 * hp, live: "176", pool: 256 * hp, segment: 255},
		{name: "another cluster holds pages", total: 256, free: 128, pool: 256 * hp, segment: 255,
			wantErr: "needs 255 huge pages but only 128 of the 256-page pool would be free for this cluster: 128 are held by other processes"},
		{name: "reserved but untouched pages count", total: 256, free: 256, rsvd: 64, pool: 256 * hp, segment: 255,
			wantErr: "only 192 of the 256-page pool"},
		{name: "ours without the live count: faulted pages", total: 256, free: 0, running: true,
			hugetlb: 256 * hp, pool: 256 * hp, segment: 256},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &facts.Facts{HugePageSize: hp, HugePagesTotal: tt.total, HugePagesFree: tt.free, HugePagesRsvd: tt.rsvd}
			pg := &facts.Postgres{Running: tt.running, HugetlbPages: tt.hugetlb}
			err := roomInPool(f, pg, map[string]string{"shared_memory_size_in_huge_pages": tt.live}, tt.pool, tt.segment)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
