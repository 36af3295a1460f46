package overcommit

import (
	"context"
	"testing"

	"github.com/pgtune/pgtune/modules/internal/fakehost"
)

// Every page size's pool is outside the commit budget: a 2 MiB pool left
// beside a planned 1 GiB one (or the other way round) is counted, so the
// limit and the verdict see the memory that is really reserved.
func TestOtherPageSizesCounted(t *testing.T) {
	const MiB = int64(1) << 20
	gig := func(h *fakehost.Host) { h.ExtraSizesKB = []int64{1 << 20} }
	tests := []struct {
		name string
		host func(h *fakehost.Host)
		// planned is the hugepages outputs (nil: not in the play).
		planned    map[string]any
		pool       int64 // what the limit is computed against
		protective bool
	}{
		{
			name: "1 GiB planned, a 2 MiB pool left from before",
			host: func(h *fakehost.Host) { gig(h); h.Sysctl["vm.nr_hugepages"] = "1024" },
			// no other_pools output: read from the facts
			planned:    map[string]any{"pool": 4 * GiB, "pages": int64(4), "page_size": GiB},
			pool:       6 * GiB,
			protective: true,
		},
		{
			name:       "1 GiB planned, hugepages says what stays reserved",
			host:       func(h *fakehost.Host) { gig(h); h.Sysctl["vm.nr_hugepages"] = "1024" },
			planned:    map[string]any{"pool": 4 * GiB, "pages": int64(4), "page_size": GiB, "other_pools": 512 * MiB},
			pool:       4*GiB + 512*MiB,
			protective: true,
		},
		{
			name:       "back to 2 MiB, the 1 GiB pool given back (other_pools 0)",
			host:       func(h *fakehost.Host) { gig(h); h.SetNodePages(1<<20, 4) },
			planned:    map[string]any{"pool": 4 * GiB, "pages": int64(2048), "page_size": 2 * MiB, "other_pools": int64(0)},
			pool:       4 * GiB,
			protective: true,
		},
		{
			name:       "hugepages not in the play: both pools as they are",
			host:       func(h *fakehost.Host) { gig(h); h.Sysctl["vm.nr_hugepages"] = "1024"; h.SetNodePages(1<<20, 2) },
			pool:       4 * GiB,
			protective: true,
		},
		{
			// Counting only the planned 1 GiB pool would give a limit of
			// 0.8 × 3 GiB + 256 MiB = 2.65 GiB and call it protective
			// against 2.8 GiB outside that pool; with the 1 GiB of 2 MiB
			// pages counted, 1.85 GiB against 1.81 GiB: not protective.
			name: "4 GiB host: the leftover pool turns the verdict",
			host: func(h *fakehost.Host) {
				gig(h)
				h.MemTotalKB, h.MemAvailableKB, h.CommittedKB = 4<<20, 1<<20, 256<<10
				h.Sysctl["vm.nr_hugepages"] = "512"
			},
			planned:    map[string]any{"pool": GiB, "pages": int64(1), "page_size": GiB},
			pool:       2 * GiB,
			protective: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fakehost.New()
			tt.host(h)
			tg := h.Target("fake")
			if tt.planned != nil {
				tg.SetOutputs("hugepages", tt.planned)
			}
			p, err := New().Check(context.Background(), tg, DefaultParams())
			if err != nil {
				t.Fatal(err)
			}
			mem := h.MemTotalKB << 10
			wantKb := Limit(mem, tt.pool, 0.8, min(2*GiB, mem/16))
			if p.Outputs["pool"] != tt.pool || p.Outputs["kbytes"] != wantKb {
				t.Errorf("pool %v kbytes %v, want %d and %d", p.Outputs["pool"], p.Outputs["kbytes"], tt.pool, wantKb)
			}
			if p.Outputs["protective"] != tt.protective {
				t.Errorf("protective = %v, want %v (notes %q)", p.Outputs["protective"], tt.protective, p.Notes)
			}
		})
	}
}
