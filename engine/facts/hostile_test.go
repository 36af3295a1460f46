package facts

import (
	"errors"
	"testing"
)

// A host's gather output may lie: every number in it is bounds-checked,
// and a bad one fails the gather with what it meant, never wraps around
// or panics.
func TestParseGatherHostileNumbers(t *testing.T) {
	const base = "M MemTotal: 1000 kB\nM Hugepagesize: 2048 kB\n"
	tests := []struct {
		name, out, wantErr string
	}{
		{name: "negative size", out: "M MemTotal: -2 kB\n", wantErr: "meminfo MemTotal -2 out of range [0, 1125899906842624]"},
		{name: "kB overflowing bytes", out: "M MemTotal: 9007199254740992 kB\n", wantErr: "meminfo MemTotal 9007199254740992 out of range [0, 1125899906842624]"},
		{name: "int64 overflow", out: "M MemTotal: 99999999999999999999 kB\n", wantErr: "meminfo MemTotal 99999999999999999999 out of range [0, 1125899906842624]"},
		{name: "not a number", out: base + "M HugePages_Total: many\n", wantErr: `meminfo HugePages_Total "many" is not a number`},
		{name: "count negative", out: base + "M HugePages_Free: -1\n", wantErr: "meminfo HugePages_Free -1 out of range [0, 1099511627776]"},
		{name: "value missing", out: base + "M Committed_AS: kB\n", wantErr: `meminfo Committed_AS "kB" is not a number`},
		{name: "node number negative", out: base + "N -1 5\n", wantErr: "NUMA node number -1 out of range [0, 1023]"},
		{name: "node number huge", out: base + "N 4294967296 5\n", wantErr: "NUMA node number 4294967296 out of range [0, 1023]"},
		{name: "node number empty", out: base + "N  5\n", wantErr: `NUMA node number "" is not a number`},
		{name: "node pages negative", out: base + "N 0 -3\n", wantErr: "node0 nr_hugepages -3 out of range [0, 1099511627776]"},
		{name: "node pages overflow", out: base + "N 1 18446744073709551616\n", wantErr: "node1 nr_hugepages 18446744073709551616 out of range [0, 1099511627776]"},
		{name: "node pages garbage", out: base + "N 1 12x\n", wantErr: `node1 nr_hugepages "12x" is not a number`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseGather([]byte(tc.out), testSets...)
			var re *RangeError
			if !errors.As(err, &re) || err.Error() != tc.wantErr {
				t.Fatalf("ParseGather = %+v, %v\nwant error %q", f, err, tc.wantErr)
			}
		})
	}

	// In range, a node without a pool of the default size reads as 0.
	f, err := ParseGather([]byte(base+"N 0 \nN 1 7\n"), testSets...)
	if err != nil || f.NodeHugePages[0] != 0 || f.NodeHugePages[1] != 7 || f.MemTotal != 1000*1024 {
		t.Fatalf("ParseGather = %+v, %v", f, err)
	}
}

func TestParseMeminfoHostile(t *testing.T) {
	for in, wantErr := range map[string]string{
		"MemTotal: -2 kB":                    "meminfo MemTotal -2 out of range [0, 1125899906842624]",
		"HugePages_Total: 1099511627777":     "meminfo HugePages_Total 1099511627777 out of range [0, 1099511627776]",
		"Hugepagesize: 0x800 kB":             `meminfo Hugepagesize "0x800" is not a number`,
		"MemTotal: 1000 kB\nSwapTotal: + kB": `meminfo SwapTotal "+" is not a number`,
	} {
		if m, err := ParseMeminfo([]byte(in)); err == nil || err.Error() != wantErr {
			t.Errorf("ParseMeminfo(%q) = %v, %v; want %q", in, m, err, wantErr)
		}
		if k, n, ok := ParseMeminfoLine(in); ok && k != "MemTotal" {
			t.Errorf("ParseMeminfoLine(%q) = %s %d ok", in, k, n)
		}
	}
	m, err := ParseMeminfo([]byte("MemTotal: 1000 kB\nHugePages_Total: 4\n\nVmallocChunk:\n"))
	if err != nil || m["MemTotal"] != 1024000 || m["HugePages_Total"] != 4 || len(m) != 2 {
		t.Fatalf("ParseMeminfo = %v, %v", m, err)
	}
}

// Huge page counts times the page size must fit the bytes bound: modules
// multiply them.
func TestParseGatherPoolOverflow(t *testing.T) {
	for out, wantErr := range map[string]string{
		"M MemTotal: 1000 kB\nM Hugepagesize: 2147483648 kB\n":                             "meminfo Hugepagesize (bytes) 2199023255552 out of range [0, 1099511627776]",
		"M MemTotal: 1000 kB\nM Hugepagesize: 1073741824 kB\nM HugePages_Total: 1048577\n": "meminfo HugePages_Total 1048577 out of range [0, 1048576]",
		"M MemTotal: 1000 kB\nM Hugepagesize: 2048 kB\nM HugePages_Rsvd: 1099511627776\n":  "meminfo HugePages_Rsvd 1099511627776 out of range [0, 549755813888]",
	} {
		if f, err := ParseGather([]byte(out), testSets...); err == nil || err.Error() != wantErr {
			t.Errorf("ParseGather(%q) = %+v, %v\nwant %s", out, f, err, wantErr)
		}
	}
}
