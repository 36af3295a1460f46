package engine

import (
	"context"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/topology"
	"github.com/pgtune/pgtune/engine/transport"
)

// ReplicationHostVar, set on a host, is the address the other members
// reach its server at for replication, when it is not the inventory's
// address (a replication network of its own). The controller resolves it
// with the host's address: a standby's upstream shows its WAL receiver
// connecting from one of them (topology.Match).
const ReplicationHostVar = "pgtune_replication_host"

// lookupHost resolves a name on the controller (a variable: tests never
// ask DNS).
var lookupHost = func(ctx context.Context, name string) ([]string, error) {
	return net.DefaultResolver.LookupHost(ctx, name)
}

const (
	// lookupTimeout bounds one name's lookup: an unreachable nameserver
	// costs that, once per name, in parallel with the others.
	lookupTimeout = 5 * time.Second
	// lookupLimit bounds the lookups at once when no --forks says.
	lookupLimit = 8
)

// addrSource is what the controller resolves for one host: the name its
// connection dials (the ssh_config's HostName for an alias: the inventory
// address as written may be no DNS name at all) and ReplicationHostVar.
type addrSource struct {
	host        string // the inventory's name, for messages
	route       string
	replication string
	// relayed: reached through a jump host or a proxy command, where the
	// name may resolve only on the far side.
	relayed bool
}

// sourceOf is the addrSource of an inventory host; over the local
// connection the host is the controller's own machine: loopback.
func sourceOf(h *inventory.Host) addrSource {
	src := addrSource{host: h.Name, route: h.Conn.Address, replication: replicationHost(h.Vars)}
	if h.Conn.Connection == "local" {
		src.route = "127.0.0.1"
		return src
	}
	if name, relayed, err := transport.RouteHost(SSHConfigOf(h)); err == nil && name != "" {
		// The connection fails with err anyway; the name as written is
		// the best left to resolve.
		src.route, src.relayed = name, relayed
	}
	return src
}

// names are the names the controller knows a host by: the inventory's
// address (as written), the name its connection dials and
// ReplicationHostVar (topology.Member's Names).
func (s addrSource) names(address string) []string {
	var out []string
	for _, n := range []string{address, s.route, s.replication} {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// sourceOfFacts is sourceOf for a host's gathered facts.
func sourceOfFacts(h HostFacts) addrSource {
	src := addrSource{host: h.Name, route: h.Address, replication: h.ReplicationHost, relayed: h.Relayed}
	if h.Route != "" {
		src.route = h.Route
	}
	if h.Local {
		src.route = "127.0.0.1"
	}
	return src
}

// needAddrs says which members' addresses a layout uses: those sharing a
// system identifier with another server of the run (a claimed standby,
// its upstream). A host alone in its "cluster" is never matched, so its
// names are not looked up at all.
func needAddrs(ms []topology.Member) []bool {
	// Counted by host, not by the server a host says it is: two names of
	// one server are told apart from a claim by their addresses (Group).
	servers := map[string]map[string]bool{}
	for _, m := range ms {
		if m.Topo == nil || m.Topo.SystemID == "" {
			continue
		}
		if servers[m.Topo.SystemID] == nil {
			servers[m.Topo.SystemID] = map[string]bool{}
		}
		servers[m.Topo.SystemID][m.Host] = true
	}
	need := make([]bool, len(ms))
	for i, m := range ms {
		need[i] = m.Topo != nil && m.Topo.SystemID != "" && len(servers[m.Topo.SystemID]) > 1
	}
	return need
}

// resolveAddrs is the controller's addresses of srcs[i] for each need[i]:
// the names resolved here (lookupNames). A name that does not resolve
// adds nothing and a note naming the host, the name and the error.
func resolveAddrs(ctx context.Context, srcs []addrSource, need []bool, limit int) (addrs [][]string, notes [][]string) {
	var names []string
	asked := map[string]bool{}
	for i, s := range srcs {
		if !need[i] {
			continue
		}
		for _, n := range []string{s.route, s.replication} {
			if n != "" && net.ParseIP(n) == nil && !asked[n] {
				asked[n] = true
				names = append(names, n)
			}
		}
	}
	answers := lookupNames(ctx, names, limit)
	addrs, notes = make([][]string, len(srcs)), make([][]string, len(srcs))
	for i, s := range srcs {
		if !need[i] {
			continue
		}
		seen := map[string]bool{}
		for _, n := range []string{s.route, s.replication} {
			if n == "" {
				continue
			}
			got := []string{n}
			if ip := net.ParseIP(n); ip != nil {
				got = []string{ip.String()}
			} else if a := answers[n]; a.err != nil || len(a.addrs) == 0 {
				notes[i] = append(notes[i], unresolvedNote(s, n, a.err))
				continue
			} else {
				got = a.addrs
			}
			for _, ip := range got {
				if !seen[ip] {
					seen[ip] = true
					addrs[i] = append(addrs[i], ip)
				}
			}
		}
	}
	return addrs, notes
}

// answer is the controller's lookup of one name.
type answer struct {
	addrs []string
	err   error
}

// lookupNames resolves names (each given once) on the controller, at
// most limit at once (lookupLimit when limit is not set), each within
// lookupTimeout, all given up when ctx is (Ctrl-C). Nothing outlives the
// call: a lookup that failed is asked again next run.
func lookupNames(ctx context.Context, names []string, limit int) map[string]*answer {
	answers := make(map[string]*answer, len(names))
	for _, n := range names {
		answers[n] = &answer{}
	}
	var wg sync.WaitGroup
	if limit <= 0 {
		limit = lookupLimit
	}
	sem := make(chan struct{}, limit)
	for _, n := range names {
		a := answers[n]
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				a.err = ctx.Err()
				return
			}
			defer func() { <-sem }()
			lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
			defer cancel()
			a.addrs, a.err = lookupHost(lctx, n)
		}()
	}
	wg.Wait()
	return answers
}

// resolvePatroniHosts resolves on the controller, as resolveAddrs does a
// host's names, the DNS names l's primaries' Patroni lists members at
// that a standby's tie needs (topology.Layout.PatroniLookups): for each
// primary host, its answers (topology.Member.PatroniHosts). The names are
// the primary's word, which already decides who the members are; none
// is looked up on a standby's say.
func resolvePatroniHosts(ctx context.Context, l *topology.Layout, limit int) map[string]map[string]topology.Resolved {
	want := l.PatroniLookups()
	var names []string
	for _, ns := range want {
		for _, n := range ns {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	answers := lookupNames(ctx, names, limit)
	out := map[string]map[string]topology.Resolved{}
	for host, ns := range want {
		out[host] = map[string]topology.Resolved{}
		for _, n := range ns {
			a := answers[n]
			r := topology.Resolved{Addrs: a.addrs}
			if a.err != nil {
				r = topology.Resolved{Err: a.err.Error()}
			}
			out[host][n] = r
		}
	}
	return out
}

// unresolvedNote says why a host's replication cannot be tied to its
// upstream's WAL senders, and what makes it so.
func unresolvedNote(s addrSource, name string, err error) string {
	if err == nil {
		err = fmt.Errorf("no address")
	}
	where := ""
	if s.relayed && name == s.route {
		where = ", which is reached through a jump host or proxy command: the name may resolve only beyond it"
	}
	return fmt.Sprintf("%s: %q does not resolve on the controller (%v)%s; its replication cannot be checked against its upstream's WAL senders (set %s to its IP address)",
		s.host, name, err, where, ReplicationHostVar)
}

func replicationHost(vars map[string]any) string {
	s, _ := vars[ReplicationHostVar].(string)
	return s
}

// ipAddrs is what a host's names give without asking DNS: the IP
// literals among them (a layout made before its hosts were resolved).
func ipAddrs(src addrSource) []string {
	var out []string
	for _, n := range []string{src.route, src.replication} {
		if ip := net.ParseIP(n); ip != nil && !slices.Contains(out, ip.String()) {
			out = append(out, ip.String())
		}
	}
	return out
}

// Addrs is the controller's addresses of the target's host (as
// resolveAddrs): the name its connection dials (loopback over the local
// connection) and ReplicationHostVar; those the session's layout used
// when it resolved them. A Target made without an inventory host reads
// ssh_host from its Vars.
func (t *Target) Addrs() []string {
	if t.addrsResolved {
		return t.addrs
	}
	var src addrSource
	if t.host != nil {
		src = sourceOf(t.host)
	} else {
		addr, _ := t.Vars["ssh_host"].(string)
		if addr == "" {
			addr = t.Name
		}
		src = addrSource{host: t.Name, route: addr, replication: replicationHost(t.Vars)}
	}
	addrs, _ := resolveAddrs(context.Background(), []addrSource{src}, []bool{true}, 1)
	return addrs[0]
}
