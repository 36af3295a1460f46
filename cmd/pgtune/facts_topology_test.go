package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
)

// TestFactsTopologyText renders replication facts and the clusters (golden
// file): roles, upstream, standbys, WAL clients, Patroni, and host text
// escaped.
func TestFactsTopologyText(t *testing.T) {
	base := func() *facts.Facts {
		return &facts.Facts{Hostname: "h", Kernel: "6.1", User: "root", IsRoot: true, MemTotal: 8 << 30, MemAvailable: 4 << 30,
			HugePageSize: 2 << 20, NUMANodes: 1, SysctlWritable: true, Sysctl: map[string]string{}}
	}
	primary := base()
	primary.Topology = &facts.Topology{Role: "primary", SystemID: "7312345678901234567", Timeline: 2, Standbys: []facts.StandbyInfo{
		{Name: "db2", Addr: "10.0.0.2", State: "streaming", LagBytes: 0},
		{Name: "evil\x1b[2Jname", Addr: "10.0.0.9", State: "catchup", LagBytes: 3 << 20},
	}, IdleSlots: []string{"db3"}, Clients: []facts.WALClient{
		{Name: "barman_receive_wal", Addr: "10.0.0.7", State: "streaming", Kind: facts.ClientArchiver},
		{Name: "cdc\x1b[2J", Addr: "local", State: "streaming", Kind: facts.ClientLogical},
	}}
	standby := base()
	standby.Topology = &facts.Topology{Role: "standby", SystemID: "7312345678901234567", Timeline: 2, Upstream: "10.0.0.1:5432",
		Receiver: "streaming", ReplayLagBytes: 8192}
	managed := base()
	managed.Topology = &facts.Topology{Role: "standby", SystemID: "42", Timeline: 1, Upstream: "10.0.1.1:5432", Receiver: "streaming",
		Patroni: &facts.Patroni{Scope: "demo", Name: "node2", PID: 4242, ConfigFile: "/etc/patroni/config.yml", APIURL: "http://10.0.1.2:8008",
			GeneratedConf: true, Role: "replica", State: "running", PendingRestart: true,
			Members: []facts.PatroniMember{{Name: "node1", Role: "leader", State: "running"}, {Name: "node2", Role: "replica", State: "streaming"}, {Name: "node3", State: "stopped"}}}}
	broken := base()
	broken.TopologyError = "replication topology: psql: connection refused"
	hosts := []engine.HostFacts{{Name: "db1", Facts: primary, Address: "10.0.0.1"}, {Name: "db2", Facts: standby, Address: "10.0.0.2"}, {Name: "pat2", Facts: managed}, {Name: "db9", Facts: broken}}
	var out bytes.Buffer
	for _, h := range hosts {
		writeFactsText(&out, h)
	}
	clusters, _ := engine.Clusters(context.Background(), hosts, 1)
	writeClusters(&out, clusters)
	checkGolden(t, "facts_topology.golden", out.String())
}

// TestWriteTopologyWALClients: pgtune facts lists a primary's WAL
// clients apart from its standbys, each with its kind.
func TestWriteTopologyWALClients(t *testing.T) {
	f := &facts.Facts{Topology: &facts.Topology{Role: "primary", SystemID: "42", Timeline: 1,
		Standbys:    []facts.StandbyInfo{{Name: "standby1", Addr: "10.0.0.2", State: "streaming"}},
		Clients:     []facts.WALClient{{Name: "barman_receive_wal", Addr: "10.0.0.7", State: "streaming", Kind: facts.ClientArchiver}},
		MoreClients: 2}}
	var rows []string
	writeTopology(f, func(k, format string, args ...any) { rows = append(rows, k+": "+fmt.Sprintf(format, args...)) })
	got := strings.Join(rows, "\n")
	for _, w := range []string{
		"standby: standby1 from 10.0.0.2 (streaming, lag 0",
		`wal client: "barman_receive_wal" (WAL archiver, from 10.0.0.7), streaming (no standby)`,
		"wal client: 2 more",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("facts do not say %q:\n%s", w, got)
		}
	}
	if strings.Count(got, "standby:") != 1 {
		t.Errorf("a WAL client listed as a standby:\n%s", got)
	}
}
