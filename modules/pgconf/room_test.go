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

func TestRoomForShare(t *testing.T) {
	const hp = 2 << 20
	tests := []struct {
		name                 string
		total, free          int64
		share, whole, segmnt int64
		wantErr              string
	}{
		{name: "no share: the whole pool, others count against it", total: 96, free: 72, share: 96 * hp, whole: 96 * hp, segmnt: 80,
			wantErr: "only 72 of the 96-page pool"},
		{name: "a third each: another member holds its third", total: 96, free: 72, share: 24 * hp, whole: 96 * hp, segmnt: 24},
		{name: "a third each: the others hold too much", total: 96, free: 20, share: 24 * hp, whole: 96 * hp, segmnt: 24,
			wantErr: "only 20 of the 96-page pool"},
		{name: "the segment exceeds the share", total: 96, free: 96, share: 24 * hp, whole: 96 * hp, segmnt: 25,
			wantErr: "this cluster's share (pool) is 24 pages"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &facts.Facts{HugePageSize: hp, HugePagesTotal: tt.total, HugePagesFree: tt.free}
			err := roomForShare(f, &facts.Postgres{}, nil, tt.share, tt.whole, tt.segmnt, f.HugePageSize)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
