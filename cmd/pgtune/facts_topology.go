package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/topology"
	"github.com/pgtune/pgtune/internal/termsafe"
)

// writeTopology prints a host's place in replication.
func writeTopology(f *facts.Facts, row func(string, string, ...any)) {
	if f.TopologyError != "" {
		row("replication", "unknown: %s", f.TopologyError)
	}
	topo := f.Topology
	if topo == nil {
		return
	}
	row("replication", "%s, system identifier %s, timeline %d", topo.Role, topo.SystemID, topo.Timeline)
	if topo.Role == "standby" {
		up := topo.Upstream
		if up == "" {
			up = "unknown"
		}
		recv := topo.Receiver
		if recv == "" {
			recv = "no WAL receiver"
		}
		row("upstream", "%s (%s, replay lag %s)", up, recv, size(topo.ReplayLagBytes))
	}
	for _, s := range topo.Standbys {
		lag := "unknown"
		if s.LagBytes >= 0 {
			lag = size(s.LagBytes)
		}
		row("standby", "%s from %s (%s, lag %s)", s.Name, s.Addr, s.State, lag)
	}
	for _, c := range topo.Clients {
		row("wal client", "%s, %s (no standby)", c, c.State)
	}
	if topo.MoreClients > 0 {
		row("wal client", "%d more", topo.MoreClients)
	}
	for _, s := range topo.IdleSlots {
		row("idle slot", "%s (no standby streams through it)", s)
	}
	if p := topo.Patroni; p != nil {
		row("patroni", "cluster %q, member %q (pid %d, config %s)", p.Scope, p.Name, p.PID, p.ConfigFile)
		if p.APIURL != "" {
			row("patroni api", "%s: %s %s, pending restart %t, paused %t, %d members", p.APIURL, p.Role, p.State, p.PendingRestart, p.Paused, len(p.Members))
		}
		if p.APIError != "" {
			row("patroni note", "%s", p.APIError)
		}
	}
}

// writeClusters prints the hosts grouped into replication clusters.
func writeClusters(w io.Writer, clusters []*topology.Cluster) {
	if len(clusters) == 0 {
		return
	}
	fmt.Fprintln(w, "clusters:")
	for _, c := range clusters {
		fmt.Fprintf(w, "  %s\n", strings.Join(termsafe.Lines(c.String()), " "))
	}
	fmt.Fprintln(w)
}
