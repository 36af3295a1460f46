package fakehost

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine/facts"
)

// Huge page pools per size and per NUMA node, as sysfs shows them: the
// default size's pool is vm.nr_hugepages, other sizes (ExtraSizesKB) have
// their own nr_hugepages under /sys/kernel/mm/hugepages. Writing a global
// nr_hugepages spreads the pool round-robin over the nodes, as the kernel
// does; writing a node's changes that node only.

// pool is one size's state.
type pool struct {
	nodes []int64 // pages per node
}

func (h *Host) poolOf(kb int64) *pool {
	if h.pools == nil {
		h.pools = map[int64]*pool{}
	}
	p := h.pools[kb]
	if p == nil {
		p = &pool{nodes: make([]int64, max(h.Nodes, 1))}
		if kb == h.HugePageKB {
			spread(p.nodes, h.pages())
		}
		h.pools[kb] = p
	}
	return p
}

func (p *pool) total() int64 {
	var n int64
	for _, x := range p.nodes {
		n += x
	}
	return n
}

// spread puts n pages round-robin over the nodes, lowest node first.
func spread(nodes []int64, n int64) {
	k := int64(len(nodes))
	for i := range nodes {
		nodes[i] = n / k
		if int64(i) < n%k {
			nodes[i]++
		}
	}
}

// SetNodePages places a size's pool on the nodes explicitly (kB → pages
// per node), as an uneven boot or a fragmented node leaves it.
func (h *Host) SetNodePages(kb int64, perNode ...int64) {
	p := h.poolOf(kb)
	copy(p.nodes, perNode)
	if kb == h.HugePageKB {
		h.Sysctl["vm.nr_hugepages"] = strconv.FormatInt(p.total(), 10)
	}
}

// NodePages returns a size's pages per node.
func (h *Host) NodePages(kb int64) []int64 {
	h.Lock()
	defer h.Unlock()
	return append([]int64(nil), h.poolOf(kb).nodes...)
}

// sizes lists the page sizes the fake kernel offers, default first.
func (h *Host) sizes() []int64 {
	return append([]int64{h.HugePageKB}, h.ExtraSizesKB...)
}

func (h *Host) offers(kb int64) bool {
	for _, s := range h.sizes() {
		if s == kb {
			return true
		}
	}
	return false
}

// addPools fills the per-size and per-node facts.
func (h *Host) addPools(f *facts.Facts) {
	h.syncDefaultPool() // a test may have set vm.nr_hugepages directly
	for _, kb := range h.sizes() {
		p := h.poolOf(kb)
		c := h.counts(kb)
		used := min(h.inUse(kb), p.total())
		f.HugePagePools = append(f.HugePagePools, facts.HugePagePool{Size: kb << 10, Pages: c.nr, Free: c.free, Surplus: c.surplus})
		for i, n := range p.nodes {
			// Pages in use sit on the lowest nodes first.
			u := min(used, n)
			used -= u
			f.NodePools = append(f.NodePools, facts.NodePool{Node: i, Size: kb << 10, Pages: n, Free: n - u})
		}
	}
}

// poolCounts are a pool's global sysfs counts.
type poolCounts struct{ nr, free, surplus int64 }

// counts is what the kernel shows for a size's pool: pages mapped beyond
// the persistent pool are surplus (a shrink below the pages in use leaves
// them until their mapping goes), and nr_hugepages counts them.
func (h *Host) counts(kb int64) poolCounts {
	persistent, used := h.poolOf(kb).total(), h.inUse(kb)
	surplus := max(0, used-persistent)
	return poolCounts{nr: persistent + surplus, free: persistent + surplus - used, surplus: surplus}
}

// inUse is the pages of a size mapped now: InUsePages of the default size,
// and the Server's segment.
func (h *Host) inUse(kb int64) int64 {
	n := int64(0)
	if kb == h.HugePageKB {
		n = h.InUsePages
	}
	if s := h.Server; s != nil && s.Up && s.SizeKB == kb {
		n += s.Pages
	}
	return n
}

// syncDefaultPool keeps the default size's nodes in step with a write of
// vm.nr_hugepages.
func (h *Host) syncDefaultPool() {
	if p := h.pools[h.HugePageKB]; p != nil && p.total() != h.pages() {
		spread(p.nodes, h.pages())
	}
}

// sysfsPath parses a huge page sysfs path: node (-1: global), size, file.
func sysfsPath(p string) (node int, kb int64, file string, ok bool) {
	node = -1
	rest, found := strings.CutPrefix(p, "/sys/kernel/mm/hugepages/hugepages-")
	if !found {
		var r string
		if r, found = strings.CutPrefix(p, "/sys/devices/system/node/node"); !found {
			return 0, 0, "", false
		}
		id, tail, _ := strings.Cut(r, "/hugepages/hugepages-")
		n, err := strconv.Atoi(id)
		if err != nil {
			return 0, 0, "", false
		}
		node, rest = n, tail
	}
	size, file, found := strings.Cut(rest, "kB/")
	n, err := strconv.ParseInt(size, 10, 64)
	if !found || err != nil {
		return 0, 0, "", false
	}
	return node, n, file, true
}

// readSysfs answers a read of a huge page sysfs file (base.Host.Generated).
func (h *Host) readSysfs(p string) (string, bool) {
	node, kb, file, ok := sysfsPath(p)
	if !ok || !h.offers(kb) || node >= h.Nodes {
		return "", false
	}
	h.syncDefaultPool() // a test may have set vm.nr_hugepages directly
	pl := h.poolOf(kb)
	n := pl.total()
	if node >= 0 {
		n = pl.nodes[node]
	}
	c := h.counts(kb)
	switch {
	case node >= 0 && (file == "nr_hugepages" || file == "free_hugepages"):
	case file == "nr_hugepages":
		n = c.nr
	case file == "free_hugepages":
		n = c.free
	case file == "surplus_hugepages" && node < 0:
		n = c.surplus
	case file == "resv_hugepages", file == "surplus_hugepages":
		n = 0
	default:
		return "", false
	}
	return strconv.FormatInt(n, 10) + "\n", true
}

// writeSysfs answers a write of a huge page pool's nr_hugepages
// (base.Host.OnSysfs; other sysfs files are not its: handled is false).
// The kernel gives at most what MaxPages allows after the compactions so
// far (pages it already holds are kept).
func (h *Host) writeSysfs(_ map[string]string, p, value string) (handled bool, err error) {
	node, kb, file, ok := sysfsPath(p)
	if !ok {
		return false, nil
	}
	if !h.offers(kb) || node >= h.Nodes || file != "nr_hugepages" {
		return true, fmt.Errorf("%s: no such kernel setting", p)
	}
	if h.ReadOnly {
		return true, fmt.Errorf("%s: Read-only file system", p)
	}
	want, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil || want < 0 {
		return true, fmt.Errorf("write error: Invalid argument")
	}
	h.syncDefaultPool()
	pl := h.poolOf(kb)
	limit := func(n, have int64) int64 {
		if h.MaxPages != nil {
			return min(n, max(h.MaxPages(h.Compactions), have))
		}
		return n
	}
	if node < 0 {
		spread(pl.nodes, limit(want, pl.total()))
	} else {
		other := pl.total() - pl.nodes[node]
		pl.nodes[node] = max(0, limit(other+want, pl.total())-other)
		if h.NodeMax != nil {
			pl.nodes[node] = min(pl.nodes[node], max(h.NodeMax(node), 0))
		}
	}
	if kb == h.HugePageKB {
		h.Sysctl["vm.nr_hugepages"] = strconv.FormatInt(pl.total(), 10)
	}
	return true, nil
}
