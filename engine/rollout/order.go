package rollout

import "github.com/pgtune/pgtune/engine/inventory"

// Order is the seam where the replication-cluster order plugs in. Sort
// orders the run's hosts before they are cut into batches (e.g. standbys
// before their primary); Waves splits one batch into groups applied one
// after the other, each group's hosts at once (e.g. never two members of
// one cluster in a group). Nil fields keep the defaults: the hosts as
// given, one wave per batch.
type Order struct {
	Sort  func(hosts []*inventory.Host) []*inventory.Host
	Waves func(batch []*inventory.Host) [][]*inventory.Host
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
