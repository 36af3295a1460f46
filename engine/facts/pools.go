package facts

import (
	"fmt"
	"slices"
	"strings"
)

// HugePagePool is the kernel's pool of one huge page size, from
// /sys/kernel/mm/hugepages/hugepages-<size>kB. Counts are pages.
type HugePagePool struct {
	Size    int64 `json:"size"` // bytes
	Pages   int64 `json:"pages"`
	Free    int64 `json:"free"`
	Resv    int64 `json:"resv"`
	Surplus int64 `json:"surplus"`
}

// NodePool is one NUMA node's share of a pool, from
// /sys/devices/system/node/node<N>/hugepages/hugepages-<size>kB.
type NodePool struct {
	Node  int   `json:"node"`
	Size  int64 `json:"size"` // bytes
	Pages int64 `json:"pages"`
	Free  int64 `json:"free"`
}

// Pool returns the pool of the given page size, if the kernel offers it.
func (f *Facts) Pool(size int64) (HugePagePool, bool) {
	for _, p := range f.HugePagePools {
		if p.Size == size {
			return p, true
		}
	}
	return HugePagePool{}, false
}

// PageSizes lists the huge page sizes the kernel offers, smallest first;
// hosts whose gather predates per-size facts report the default size.
func (f *Facts) PageSizes() []int64 {
	var out []int64
	for _, p := range f.HugePagePools {
		out = append(out, p.Size)
	}
	if len(out) == 0 && f.HugePageSize > 0 {
		out = append(out, f.HugePageSize)
	}
	return out
}

// NodesOf returns each node's share of the pool of the given size, by
// node number.
func (f *Facts) NodesOf(size int64) []NodePool {
	var out []NodePool
	for _, n := range f.NodePools {
		if n.Size == size {
			out = append(out, n)
		}
	}
	return out
}

// maxPoolSizes bounds how many page sizes a host may report (x86 has two,
// arm64 four).
const maxPoolSizes = 16

// parsePoolLine reads "P sizekB nr free resv surplus".
func parsePoolLine(rest string) (HugePagePool, error) {
	f := strings.Fields(rest)
	if len(f) != 5 {
		return HugePagePool{}, fmt.Errorf("huge page pool line: want 5 fields, got %d", len(f))
	}
	size, err := parsePageSizeKB(f[0])
	if err != nil {
		return HugePagePool{}, err
	}
	what := fmt.Sprintf("hugepages-%dkB ", size>>10)
	var n [4]int64
	for i, name := range []string{"nr_hugepages", "free_hugepages", "resv_hugepages", "surplus_hugepages"} {
		if n[i], err = ParseInt(what+name, f[i+1], 0, MaxBytes/size); err != nil {
			return HugePagePool{}, err
		}
	}
	return HugePagePool{Size: size, Pages: n[0], Free: n[1], Resv: n[2], Surplus: n[3]}, nil
}

// parseNodePoolLine reads "Q node sizekB nr free".
func parseNodePoolLine(rest string) (NodePool, error) {
	f := strings.Fields(rest)
	if len(f) != 4 {
		return NodePool{}, fmt.Errorf("node huge page line: want 4 fields, got %d", len(f))
	}
	node, err := ParseInt("NUMA node number", f[0], 0, MaxNUMANode)
	if err != nil {
		return NodePool{}, err
	}
	size, err := parsePageSizeKB(f[1])
	if err != nil {
		return NodePool{}, err
	}
	what := fmt.Sprintf("node%d hugepages-%dkB ", node, size>>10)
	nr, err := ParseInt(what+"nr_hugepages", f[2], 0, MaxBytes/size)
	if err != nil {
		return NodePool{}, err
	}
	free, err := ParseInt(what+"free_hugepages", f[3], 0, MaxBytes/size)
	if err != nil {
		return NodePool{}, err
	}
	return NodePool{Node: int(node), Size: size, Pages: nr, Free: free}, nil
}

// parsePageSizeKB reads a huge page size in kB as the sysfs directory
// names it and returns bytes: a power of two from 8 kB to MaxHugePageSize.
func parsePageSizeKB(s string) (int64, error) {
	kb, err := ParseInt("huge page size (kB)", s, 8, MaxHugePageSize>>10)
	if err != nil {
		return 0, err
	}
	if kb&(kb-1) != 0 {
		return 0, &RangeError{What: "huge page size (kB, a power of two)", Value: s, Min: 8, Max: MaxHugePageSize >> 10}
	}
	return kb << 10, nil
}

// setPools stores the per-size and per-node pools, sorted, refusing
// duplicates and more sizes than any machine has.
func (f *Facts) setPools(pools []HugePagePool, nodes []NodePool) error {
	if len(pools) > maxPoolSizes {
		return fmt.Errorf("%d huge page sizes reported: more than %d", len(pools), maxPoolSizes)
	}
	slices.SortFunc(pools, func(a, b HugePagePool) int { return cmpInt(a.Size, b.Size) })
	for i := 1; i < len(pools); i++ {
		if pools[i].Size == pools[i-1].Size {
			return fmt.Errorf("huge page size %d kB reported twice", pools[i].Size>>10)
		}
	}
	if len(nodes) > maxPoolSizes*(MaxNUMANode+1) {
		return fmt.Errorf("%d node huge page pools reported: too many", len(nodes))
	}
	slices.SortFunc(nodes, func(a, b NodePool) int {
		if c := cmpInt(a.Size, b.Size); c != 0 {
			return c
		}
		return a.Node - b.Node
	})
	for i := 1; i < len(nodes); i++ {
		if nodes[i].Size == nodes[i-1].Size && nodes[i].Node == nodes[i-1].Node {
			return fmt.Errorf("node%d hugepages-%dkB reported twice", nodes[i].Node, nodes[i].Size>>10)
		}
	}
	f.HugePagePools, f.NodePools = pools, nodes
	return nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
