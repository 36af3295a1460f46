package hugepages

import (
	"strconv"
	"testing"

	"github.com/pgtune/pgtune/engine/facts"
)

// Sysfs nr_hugepages counts surplus pages, as HugePages_Total does: a pool
// of another size must read the same as the default size's for the same
// kernel state (the persistent pool, and pages that cannot be given back).
func TestCurrentCountsSurplusOnce(t *testing.T) {
	const mib2, gib = 2 << 20, 1 << 30
	for _, tc := range []struct {
		name                    string
		nr, free, resv, surplus int64
		wantCur, wantHeld       int64
	}{
		{"idle", 4, 4, 0, 0, 4, 0},
		{"mapped and reserved", 4, 3, 1, 0, 4, 2},
		{"surplus in use", 6, 0, 0, 2, 4, 6},
		{"surplus reserved", 6, 2, 2, 2, 4, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The default size, from vm.nr_hugepages and /proc/meminfo.
			def := &facts.Facts{HugePageSize: gib, HugePagesTotal: tc.nr, HugePagesFree: tc.free,
				HugePagesRsvd: tc.resv, HugePagesSurp: tc.surplus,
				Sysctl: map[string]string{key: strconv.FormatInt(tc.nr-tc.surplus, 10)}}
			// The same pool as a non-default size, from sysfs.
			other := &facts.Facts{HugePageSize: mib2, HugePagePools: []facts.HugePagePool{
				{Size: gib, Pages: tc.nr, Free: tc.free, Resv: tc.resv, Surplus: tc.surplus}}}
			for name, f := range map[string]*facts.Facts{"default size": def, "sysfs": other} {
				cur, held, err := current(f, poolFor(f, gib))
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if cur != tc.wantCur || held != tc.wantHeld {
					t.Errorf("%s: cur, held = %d, %d; want %d, %d", name, cur, held, tc.wantCur, tc.wantHeld)
				}
			}
		})
	}
}
