package rollout

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine/inventory"
)

// Shard is one slice of a fleet: Index of Count, from 1. A host's shard
// depends on its name only, so it is the same whatever the order of the
// inventory, and adding or removing a host moves no other host.
type Shard struct {
	Index, Count int
}

// ParseShard reads "i/n" with 1 <= i <= n.
func ParseShard(s string) (Shard, error) {
	is, ns, ok := strings.Cut(strings.TrimSpace(s), "/")
	i, ierr := strconv.Atoi(is)
	n, nerr := strconv.Atoi(ns)
	if !ok || ierr != nil || nerr != nil || n < 1 || i < 1 || i > n {
		return Shard{}, fmt.Errorf("--shard %q: expected i/n with 1 <= i <= n, e.g. 2/8", s)
	}
	return Shard{Index: i, Count: n}, nil
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// IsZero reports an unset shard: every host.
func (s Shard) IsZero() bool { return s.Count == 0 }

// Of is the shard (from 1, of n) a host name lands in.
func Of(name string, n int) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return int(h.Sum64()%uint64(n)) + 1
}

// Has reports whether host name belongs to the shard.
func (s Shard) Has(name string) bool {
	return s.IsZero() || Of(name, s.Count) == s.Index
}

// Filter keeps the hosts of the shard, in their order.
func (s Shard) Filter(hosts []*inventory.Host) []*inventory.Host {
	if s.IsZero() {
		return hosts
	}
	var out []*inventory.Host
	for _, h := range hosts {
		if s.Has(h.Name) {
			out = append(out, h)
		}
	}
	return out
}
