package patronitest

import (
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
)

// startProber writes a row every 100 ms to whichever member takes writes
// (testhost.Prober, the streaming replication tests' prober too).
func startProber(t *testing.T, pc *testhost.PatroniCluster) *testhost.Prober {
	t.Helper()
	members := make([]*testhost.Cluster, len(pc.Members))
	for i, m := range pc.Members {
		members[i] = m.PG
	}
	return testhost.StartProber(t, members...)
}
