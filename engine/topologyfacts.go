package engine

import (
	"context"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/transport"
)

// gatherTopology adds the running cluster's replication topology to the
// facts. A server that cannot be asked does not fail the host: the reason
// is kept in TopologyError, and modules that need the topology refuse.
func gatherTopology(ctx context.Context, tr transport.Transport, become bool, f *facts.Facts) {
	topo, err := facts.GatherTopology(ctx, tr, become, f.Postgres)
	if err != nil {
		f.TopologyError = err.Error()
		return
	}
	f.Topology = topo
}
