package rollout

import (
	"fmt"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/topology"
)

// Order is the seam where the replication-cluster order plugs in. Sort
// orders the run's hosts before they are cut into batches (e.g. standbys
// before their primary); Waves splits one batch into groups applied one
// after the other, each group's hosts at once (e.g. never two members of
// one cluster in a group). Nil fields keep the defaults: the hosts as
// given, one wave per batch.
type Order struct {
	Sort  func(hosts []*inventory.Host) []*inventory.Host
	Waves func(batch []*inventory.Host) [][]*inventory.Host
	// Unplaced are the hosts the order could not place, with why: they
	// are not applied in this attempt (failed; a resume retries them).
	Unplaced map[string]Unplaced
}

// Unplaced is why a host has no place in the order.
type Unplaced struct {
	Why         string
	Unreachable bool
}

// ClusterOrder is the order of the cluster layout l, made from facts
// read of every host before the first batch. A host those facts missed
// (it did not answer) that no member's word placed in a replicated
// cluster has no place: in its batch, from fresh facts, it would go into
// the first wave, beside another member of its cluster.
func ClusterOrder(l *topology.Layout, facts []engine.HostFacts) Order {
	o := Order{Sort: l.SortHosts, Waves: l.WavesHosts}
	for _, f := range facts {
		if f.Facts != nil {
			continue
		}
		if c := l.ClusterOf(f.Name); c != nil && c.Replicated() {
			continue
		}
		why := "no facts"
		if f.Error != nil {
			why = *f.Error
		}
		if o.Unplaced == nil {
			o.Unplaced = map[string]Unplaced{}
		}
		o.Unplaced[f.Name] = Unplaced{
			Why: fmt.Sprintf("%s: not applied: it did not answer before the first batch (%s), so its place in its replication cluster is unknown and it could restart beside another member; resume once it answers",
				f.Name, why),
			Unreachable: f.Unreachable,
		}
	}
	return o
}

func (o Order) sort(hosts []*inventory.Host) []*inventory.Host {
	if o.Sort == nil {
		return hosts
	}
	return o.Sort(hosts)
}

func (o Order) waves(batch []*inventory.Host) [][]*inventory.Host {
	if o.Waves == nil {
		return [][]*inventory.Host{batch}
	}
	return o.Waves(batch)
}
