package engine

import (
	"context"
	"net"
	"sync"
	"time"

	"github.com/pgtune/pgtune/engine/inventory"
)

// ReplicationHostVar, set on a host, is the address the other members
// reach its server at for replication, when it is not the inventory's
// address (a replication network of its own). The controller resolves it
// with the inventory's address: a standby's upstream shows its WAL
// receiver connecting from one of them (topology.Match).
const ReplicationHostVar = "pgtune_replication_host"

// lookupHost resolves a name on the controller (a variable: tests never
// ask DNS).
var lookupHost = func(ctx context.Context, name string) ([]string, error) {
	return net.DefaultResolver.LookupHost(ctx, name)
}

// resolved caches lookupHost's answers for the process: a layout is
// made more than once a run.
var resolved sync.Map // name → []string

// ControllerAddrs is the IP addresses the controller itself knows a host
// by: names (the inventory's address, ReplicationHostVar) resolved here,
// not anything the host says. A name that does not resolve adds nothing.
func ControllerAddrs(names ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" {
			continue
		}
		var addrs []string
		if ip := net.ParseIP(n); ip != nil {
			addrs = []string{ip.String()}
		} else if v, ok := resolved.Load(n); ok {
			addrs = v.([]string)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			addrs, _ = lookupHost(ctx, n)
			cancel()
			resolved.Store(n, addrs)
		}
		for _, a := range addrs {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// hostAddrs is ControllerAddrs of an inventory host.
func hostAddrs(h *inventory.Host) []string {
	return memberAddrs(h.Conn.Address, replicationHost(h.Vars), h.Conn.Connection == "local")
}

// memberAddrs is ControllerAddrs of a host at address; a host over the
// local connection is the controller's own machine: loopback.
func memberAddrs(address, replication string, local bool) []string {
	if local {
		address = "127.0.0.1"
	}
	return ControllerAddrs(address, replication)
}

func replicationHost(vars map[string]any) string {
	s, _ := vars[ReplicationHostVar].(string)
	return s
}

// Addrs is ControllerAddrs of the target's host: its inventory address
// (loopback over the local connection) and ReplicationHostVar. A Target
// made without an inventory host reads ssh_host from its Vars.
func (t *Target) Addrs() []string {
	if t.host != nil {
		return hostAddrs(t.host)
	}
	addr, _ := t.Vars["ssh_host"].(string)
	if addr == "" {
		addr = t.Name
	}
	return ControllerAddrs(addr, replicationHost(t.Vars))
}
