package hugepages

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/modules/internal/sysctlconf"
)

// NUMA policies (the numa key).
const (
	// NUMAKernel leaves the distribution to the kernel, which interleaves
	// a global pool over the nodes as far as each node's free memory
	// allows: a fragmented node silently gets fewer pages.
	NUMAKernel = "kernel"
	// NUMASpread sets every node's share itself (the pool divided evenly,
	// the remainder to the lowest nodes) and fails with the node's numbers
	// when one falls short, so a postmaster on any node finds its memory
	// local.
	NUMASpread = "spread"
)

func validNUMA(s string) error {
	if s != NUMAKernel && s != NUMASpread {
		return fmt.Errorf("numa must be %q or %q, got %q", NUMAKernel, NUMASpread, s)
	}
	return nil
}

// nodeShare is one NUMA node's planned share of the pool.
type nodeShare struct {
	Node          int
	Path          string // the node's nr_hugepages for the page size
	Before, After int64
	Held          int64 // pages in use on the node: it cannot go below
}

func nodePath(node int, size int64) string {
	return fmt.Sprintf("/sys/devices/system/node/node%d/hugepages/hugepages-%dkB/nr_hugepages", node, size>>10)
}

// evenShares divides pages over the nodes: the same number on each, the
// remainder one page each to the lowest-numbered nodes.
func evenShares(nodes []facts.NodePool, pages int64) []nodeShare {
	out := make([]nodeShare, len(nodes))
	k := int64(len(nodes))
	for i, n := range nodes {
		after := pages / k
		if int64(i) < pages%k {
			after++
		}
		out[i] = nodeShare{Node: n.Node, Path: nodePath(n.Node, n.Size), Before: n.Pages, After: after, Held: n.Pages - n.Free}
	}
	return out
}

// planSpread adds a change for every node whose share moves, refusing to
// take pages in use from a node.
func planSpread(p *plan.ModulePlan, shares []nodeShare, size int64) error {
	for _, s := range shares {
		if s.After < s.Before && s.After < s.Held {
			return fmt.Errorf("numa spread: node%d has %d huge pages of %s in use; it cannot shrink to %d (lower shared_buffers and restart PostgreSQL first)",
				s.Node, s.Held, sizeName(size), s.After)
		}
		if s.After != s.Before {
			p.Add(plan.Change{Kind: plan.KindSysfs, Target: s.Path, Before: sysctlconf.Itoa(s.Before), After: sysctlconf.Itoa(s.After)})
		}
	}
	return nil
}

// unevenNote reports a distribution the kernel left uneven (more than one
// page between the fullest and the emptiest node).
func unevenNote(nodes []facts.NodePool, size int64) string {
	if len(nodes) < 2 {
		return ""
	}
	var total, lo, hi int64 = 0, nodes[0].Pages, nodes[0].Pages
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		total += n.Pages
		lo, hi = min(lo, n.Pages), max(hi, n.Pages)
		parts[i] = fmt.Sprintf("node%d=%d", n.Node, n.Pages)
	}
	if hi-lo <= 1 {
		return ""
	}
	return fmt.Sprintf("%s pages are uneven over %d NUMA nodes (%s of %d): a node short of its share of %d makes its backends reach across nodes; numa: spread evens the pool",
		sizeName(size), len(nodes), strings.Join(parts, " "), total, total/int64(len(nodes)))
}

// setNodes writes each node's share that is not there yet, shrinking
// nodes first so that growing ones never push the pool above its planned
// size, and returns the nodes that fell short.
func setNodes(ctx context.Context, t *engine.Target, shares []nodeShare) ([]string, error) {
	type move struct {
		s   nodeShare
		now int64
	}
	var moves []move
	for _, s := range shares {
		now, err := readCount(ctx, t, s.Path)
		if err != nil {
			return nil, err
		}
		if now != s.After {
			moves = append(moves, move{s, now})
		}
	}
	slices.SortStableFunc(moves, func(a, b move) int {
		return cmpInt(a.s.After-a.now, b.s.After-b.now)
	})
	for _, m := range moves {
		if err := t.SetSysfs(ctx, m.s.Path, sysctlconf.Itoa(m.s.After)); err != nil {
			return nil, err
		}
	}
	return shortNodes(ctx, t, shares)
}

// shortNodes reads every node back: "node1 holds 300 of 512".
func shortNodes(ctx context.Context, t *engine.Target, shares []nodeShare) ([]string, error) {
	var short []string
	for _, s := range shares {
		got, err := readCount(ctx, t, s.Path)
		if err != nil {
			return nil, err
		}
		if got != s.After {
			short = append(short, fmt.Sprintf("node%d holds %d of %d", s.Node, got, s.After))
		}
	}
	return short, nil
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
