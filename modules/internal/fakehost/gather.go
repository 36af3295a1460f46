package fakehost

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// gather answers the engine's facts gather (engine/facts gatherScript)
// from the host's state, so that a real engine run (plan, apply,
// rollback) works on the fake: keys are the declared kernel keys the
// script is given. Cluster discovery is not answered (no D line): the
// engine then asks on its own, and that fails, as on a host without
// PostgreSQL.
func (h *Host) gather(keys []string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSuffix(h.Meminfo(), "\n"), "\n") {
		fmt.Fprintf(&b, "M %s\n", line)
	}
	uid := 0
	if h.NotRoot {
		uid = 1000
	}
	fmt.Fprintf(&b, "H fake\nK 6.1.0-fake\nU root\nI %d\n", uid)
	for _, k := range keys {
		if v, ok := h.Sysctl[k]; ok {
			fmt.Fprintf(&b, "S %s %s\n", k, v)
		}
	}
	w := 1
	if h.ReadOnly || h.NotRoot {
		w = 0
	}
	fmt.Fprintf(&b, "W %d\nR %d\n", w, h.MinFreeKB)
	h.syncDefaultPool()
	for node := 0; node < max(h.Nodes, 1); node++ {
		fmt.Fprintf(&b, "N %d %d\n", node, h.poolOf(h.HugePageKB).nodes[node])
		for _, kb := range h.sizes() {
			n := h.poolOf(kb).nodes[node]
			fmt.Fprintf(&b, "Q %d %d %d %d\n", node, kb, n, n-min(n, h.inUseOn(kb, node)))
		}
	}
	for _, kb := range h.sizes() {
		c := h.counts(kb)
		fmt.Fprintf(&b, "P %d %d %d 0 %d\n", kb, c.nr, c.free, c.surplus)
	}
	for _, p := range h.sysctlFiles() {
		fmt.Fprintf(&b, "F %s\n", p)
		for _, l := range strings.Split(strings.TrimSuffix(h.Files[h.resolve(p)], "\n"), "\n") {
			fmt.Fprintf(&b, "L %s\n", l)
		}
	}
	return b.String()
}

// inUseOn is the pages of a size in use on one node: the lowest nodes
// first (as addPools places them).
func (h *Host) inUseOn(kb int64, node int) int64 {
	used := h.inUse(kb)
	for i, n := range h.poolOf(kb).nodes {
		u := min(used, n)
		if i == node {
			return u
		}
		used -= u
	}
	return 0
}

// sysctlFiles are the files the gather reads, in its order.
func (h *Host) sysctlFiles() []string {
	var out []string
	for _, d := range []string{"/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d"} {
		var names []string
		for p := range h.Files {
			if path.Dir(p) == d && strings.HasSuffix(p, ".conf") {
				names = append(names, p)
			}
		}
		for p := range h.Links {
			if path.Dir(p) == d && strings.HasSuffix(p, ".conf") {
				names = append(names, p)
			}
		}
		sort.Strings(names)
		out = append(out, names...)
	}
	if _, ok := h.Files["/etc/sysctl.conf"]; ok {
		out = append(out, "/etc/sysctl.conf")
	}
	return out
}
