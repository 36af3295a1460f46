package facts

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestParseGatherPools(t *testing.T) {
	f := numaFacts(t)
	want := []HugePagePool{
		{Size: 2 << 20, Pages: 1024, Free: 512, Resv: 100},
		{Size: 1 << 30, Pages: 4, Free: 3, Resv: 1},
	}
	if len(f.HugePagePools) != len(want) {
		t.Fatalf("pools: %+v", f.HugePagePools)
	}
	for i := range want {
		if f.HugePagePools[i] != want[i] {
			t.Errorf("pool %d: %+v, want %+v", i, f.HugePagePools[i], want[i])
		}
	}
	if got := f.PageSizes(); len(got) != 2 || got[0] != 2<<20 || got[1] != 1<<30 {
		t.Errorf("PageSizes = %v", got)
	}
	if p, ok := f.Pool(1 << 30); !ok || p.Pages != 4 {
		t.Errorf("Pool(1 GiB) = %+v, %v", p, ok)
	}
	if _, ok := f.Pool(16 << 30); ok {
		t.Errorf("Pool(16 GiB) found")
	}
	nodes := f.NodesOf(2 << 20)
	if len(nodes) != 2 || nodes[0] != (NodePool{Node: 0, Size: 2 << 20, Pages: 512, Free: 300}) ||
		nodes[1] != (NodePool{Node: 1, Size: 2 << 20, Pages: 512, Free: 212}) {
		t.Errorf("NodesOf(2 MiB) = %+v", nodes)
	}
	if g := f.NodesOf(1 << 30); len(g) != 2 || g[0].Node != 0 || g[1].Free != 1 {
		t.Errorf("NodesOf(1 GiB) = %+v", g)
	}
}

// Hosts whose gather has no per-size lines still report their default size.
func TestPageSizesFallback(t *testing.T) {
	f := &Facts{HugePageSize: 2 << 20}
	if got := f.PageSizes(); len(got) != 1 || got[0] != 2<<20 {
		t.Errorf("PageSizes = %v", got)
	}
}

func TestParseGatherPoolsHostile(t *testing.T) {
	const base = "M MemTotal: 1000 kB\nM Hugepagesize: 2048 kB\n"
	for _, tc := range []struct{ name, out, wantErr string }{
		{"size not a power of two", base + "P 3000 0 0 0 0\n", "huge page size (kB, a power of two) 3000 out of range [8, 1073741824]"},
		{"size huge", base + "P 2147483648 0 0 0 0\n", "huge page size (kB) 2147483648 out of range [8, 1073741824]"},
		{"count wraps bytes", base + "P 1048576 1099511627776 0 0 0\n", "hugepages-1048576kB nr_hugepages 1099511627776 out of range [0, 1073741824]"},
		{"free negative", base + "P 2048 5 -1 0 0\n", "hugepages-2048kB free_hugepages -1 out of range [0, 549755813888]"},
		{"node number", base + "Q 5000 2048 1 1\n", "NUMA node number 5000 out of range [0, 1023]"},
		{"node pages", base + "Q 1 2048 x 1\n", `node1 hugepages-2048kB nr_hugepages "x" is not a number`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseGather([]byte(tc.out))
			var re *RangeError
			if !errors.As(err, &re) || err.Error() != tc.wantErr {
				t.Fatalf("ParseGather = %+v, %v\nwant error %q", f, err, tc.wantErr)
			}
		})
	}
	for _, tc := range []struct{ name, out, wantErr string }{
		{"short line", base + "P 2048 1 1\n", "huge page pool line: want 5 fields, got 3"},
		{"size twice", base + "P 2048 0 0 0 0\nP 2048 0 0 0 0\n", "huge page size 2048 kB reported twice"},
		{"node twice", base + "Q 0 2048 1 1\nQ 0 2048 1 1\n", "node0 hugepages-2048kB reported twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseGather([]byte(tc.out)); err == nil || err.Error() != tc.wantErr {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// checkPoolsAgainstSysfs compares the gathered pools with what this
// machine's sysfs lists (sizes only: another package may change counts).
func checkPoolsAgainstSysfs(t *testing.T, f *Facts) {
	t.Helper()
	dirs, _ := filepath.Glob("/sys/kernel/mm/hugepages/hugepages-*kB")
	if len(f.HugePagePools) != len(dirs) {
		t.Fatalf("pools %+v, sysfs lists %v", f.HugePagePools, dirs)
	}
	for _, p := range f.HugePagePools {
		if _, err := os.Stat(fmt.Sprintf("/sys/kernel/mm/hugepages/hugepages-%dkB", p.Size>>10)); err != nil {
			t.Errorf("pool %+v: %v", p, err)
		}
	}
	if _, ok := f.Pool(f.HugePageSize); !ok && f.HugePageSize > 0 {
		t.Errorf("no pool of the default size %d in %+v", f.HugePageSize, f.HugePagePools)
	}
	nodes, _ := filepath.Glob("/sys/devices/system/node/node[0-9]*/hugepages/hugepages-*kB")
	if len(f.NodePools) != len(nodes) {
		t.Errorf("node pools %+v, sysfs lists %v", f.NodePools, nodes)
	}
}
