package topology

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"

	"github.com/pgtune/pgtune/engine/facts"
)

// What a member says of itself (role, system identifier, upstream, slot,
// host name) is its own word: any host of the run can claim to be a
// standby of any cluster whose system identifier it knows (not a secret).
// A claimed standby is checked against its upstream, another host: it
// counts as that upstream's standby only if one of the upstream's WAL
// senders (pg_stat_replication) serves it, one sender each (Match). A
// sender is tied to a member by what the controller knows on its own:
// the sender's client address must be one the controller resolved the
// member's inventory address (or pgtune_replication_host) to, or, for a
// unix socket or loopback client, the member must be reached at the
// upstream's own address and say it runs on the upstream's machine. The
// client's application_name (the client's word) only breaks ties. A
// member that no sender is left for makes its cluster unverified
// (Cluster.Unverified): what depends on the cluster's members being who
// they say is refused then.

// Match assigns up's standby WAL senders (up.Topo.Standbys) to the
// claimants (members saying they stream from up), one each: the index of
// each claimant's sender by host, and a reason for every claimant left
// without one. Claimants are tried in name order; a sender whose
// application_name is the claimant's own name for itself is preferred.
func Match(up Member, claimants []Member) (map[string]int, []string) {
	got, miss := match(up, claimants)
	var why []string
	for _, u := range miss {
		why = append(why, u.reason(up))
	}
	return got, why
}

// unmatched is a claimant Match left without a sender: rivals are the
// claimants holding the senders its address fits (none: no sender of
// the upstream is at an address the controller knows it by); others are
// the senders at its address whose connection is not its WAL receiver's.
type unmatched struct {
	m      Member
	rivals []string
	others []facts.StandbyInfo
}

// reason says why u has no sender of up.
func (u unmatched) reason(up Member) string {
	m := u.m
	if why := u.connWhy(up); why != "" {
		return fmt.Sprintf("%s says it streams from %s, and %s", m.Host, up.Host, why)
	}
	if len(u.rivals) == 0 {
		var rows []facts.StandbyInfo
		if up.Topo != nil {
			rows = up.Topo.Standbys
		}
		return fmt.Sprintf("%s says it streams from %s, but %s has no WAL sender to a client at an address the controller knows %s by (%s; %s's standby senders: %s)",
			m.Host, up.Host, up.Host, m.Host, addrList(m.Addrs), up.Host, rowAddrs(rows))
	}
	return fmt.Sprintf("%s says it streams from %s, but the WAL senders of %s that could be its own are taken by %s: more members claim them than %s serves",
		m.Host, up.Host, up.Host, strings.Join(u.rivals, ", "), up.Host)
}

// connWhy says, when up's only senders at u's address are connections
// u's WAL receiver does not hold (sameConn), why u has none; else "".
func (u unmatched) connWhy(up Member) string {
	m := u.m
	if len(u.rivals) > 0 || len(u.others) == 0 {
		return ""
	}
	seen := ""
	if len(m.Receiver) > 0 {
		seen = fmt.Sprintf(" (its receiver's connections: %s); another server on its machine may stream there, or it connected again between the two reads (check again)", connList(m.Receiver))
	}
	return fmt.Sprintf("%s has a WAL sender to its address (%s), but %s: %s%s",
		up.Host, rowEnds(u.others), m.Host, notOwnConn(up, m, u.others[0]), seen)
}

// match is Match, with the claimants left without a sender as unmatched.
func match(up Member, claimants []Member) (map[string]int, []unmatched) {
	var rows []facts.StandbyInfo
	if up.Topo != nil {
		rows = up.Topo.Standbys
	}
	cs := append([]Member(nil), claimants...)
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Host < cs[j].Host })
	edges := make([][]int, len(cs))
	named := make([][]int, len(cs))
	others := make([][]facts.StandbyInfo, len(cs))
	for i, m := range cs {
		for r, row := range rows {
			if !sameClient(up, m, row.Addr) {
				continue
			}
			if !sameConn(up, m, row) {
				others[i] = append(others[i], row)
				continue
			}
			edges[i] = append(edges[i], r)
			if row.Name != "" && slices.Contains(selfNames(m), row.Name) {
				named[i] = append(named[i], r)
			}
		}
	}
	owner := make([]int, len(rows)) // row → claimant index, -1 free
	for r := range owner {
		owner[r] = -1
	}
	var augment func(i int, adj [][]int, seen []bool) bool
	augment = func(i int, adj [][]int, seen []bool) bool {
		for _, r := range adj[i] {
			if seen[r] {
				continue
			}
			seen[r] = true
			if owner[r] < 0 || augment(owner[r], edges, seen) {
				owner[r] = i
				return true
			}
		}
		return false
	}
	// First by name and address, then by address alone: an augmenting
	// path keeps every claimant matched so far matched.
	for _, adj := range [][][]int{named, edges} {
		for i := range cs {
			if slices.Contains(owner, i) {
				continue
			}
			augment(i, adj, make([]bool, len(rows)))
		}
	}
	got := map[string]int{}
	for r, i := range owner {
		if i >= 0 {
			got[cs[i].Host] = r
		}
	}
	var miss []unmatched
	for i, m := range cs {
		if _, ok := got[m.Host]; ok {
			continue
		}
		u := unmatched{m: m, others: others[i]}
		for _, r := range edges[i] {
			if o := owner[r]; o >= 0 && !slices.Contains(u.rivals, cs[o].Host) {
				u.rivals = append(u.rivals, cs[o].Host)
			}
		}
		miss = append(miss, u)
	}
	return got, miss
}

// Own returns the indexes of up's standby WAL senders that can be m's:
// the one Match gave it when its application_name is m's own name for
// itself, else every sender whose client address fits m (on one machine,
// unnamed senders cannot be told apart: what is asked of m's sender is
// asked of each).
func Own(up, m Member, matched int) []int {
	rows := up.Topo.Standbys
	if matched >= 0 && matched < len(rows) && slices.Contains(selfNames(m), rows[matched].Name) {
		return []int{matched}
	}
	var out []int
	for i, r := range rows {
		if sameClient(up, m, r.Addr) && sameConn(up, m, r) {
			out = append(out, i)
		}
	}
	return out
}

// sameConn reports whether row, a WAL sender of up whose client address
// fits m, is m's by its connection: the client's address and port are
// the local end of the connection to up's port that m's WAL receiver
// holds, as m's kernel lists it, and no other connection from that end
// goes to such a port (facts.ReceiverFor). Over a unix socket
// ("local"), the other end of the sender's socket must be one of the
// sockets m's WAL receiver holds (facts.PeerWhy). The address alone does
// not tell apart two servers on one machine (an honest standby outside
// the run and a hostile one in it). A row with Port 0 ties by address
// alone: no read of a host gives one (the topology query and the
// switchover's re-read read a client port 0 as -1, never a tie); tests
// of the address rules build such rows.
func sameConn(up, m Member, row facts.StandbyInfo) bool {
	return notOwnConn(up, m, row) == ""
}

// notOwnConn is why row is not m's by its connection (sameConn), ""
// when it is.
func notOwnConn(up, m Member, row facts.StandbyInfo) string {
	if row.Port == 0 {
		return ""
	}
	if !m.ReceiverRead {
		return "its WAL receiver connections could not be read to tie one to it (they are read as root: set become)"
	}
	if row.Addr == "local" {
		return facts.PeerWhy(row, m.ReceiverSockets)
	}
	if len(m.Receiver) == 0 {
		return "its kernel shows no WAL receiver connection of its own to tie it to (one in a network namespace of its own, a container's, or through a proxy, cannot be tied; nor one whose local end another connection shares)"
	}
	if row.Port < 0 {
		return "the sender shows no client port to tie it by"
	}
	ip, err := netip.ParseAddr(row.Addr)
	if err != nil {
		return fmt.Sprintf("the sender's client address %q is no IP address", row.Addr)
	}
	if up.Port <= 0 {
		return fmt.Sprintf("the port %s listens on is not known", up.Host)
	}
	return facts.ReceiverWhy(m.Receiver, ip, row.Port, up.Port)
}

// rowEnds lists the senders' client ends, for a message.
func rowEnds(rows []facts.StandbyInfo) string { return rowList(rows, true) }

// connList lists a WAL receiver's connections by their local end, for a
// message.
func connList(conns []facts.Conn) string {
	if len(conns) == 0 {
		return "none"
	}
	var out []string
	for _, c := range conns {
		out = append(out, c.Local.String()+" to "+c.Remote.String())
	}
	return strings.Join(out, ", ")
}

// sameClient reports whether a WAL sender of up whose client is at addr
// (an IP address, "local" for a unix socket, "?") can be m's.
func sameClient(up, m Member, addr string) bool {
	ip := net.ParseIP(addr)
	if addr == "local" || (ip != nil && ip.IsLoopback()) {
		// On up's own machine: m is reached where up is, and says so.
		return m.Machine == up.Machine && sharesAddr(m.Addrs, up.Addrs)
	}
	if ip == nil {
		return false
	}
	for _, a := range m.Addrs {
		if b := net.ParseIP(a); b != nil && b.Equal(ip) {
			return true
		}
	}
	return false
}

func sharesAddr(a, b []string) bool {
	for _, x := range a {
		xi := net.ParseIP(x)
		for _, y := range b {
			if yi := net.ParseIP(y); xi != nil && yi != nil && xi.Equal(yi) {
				return true
			}
		}
	}
	return false
}

// selfNames are the application_names a member's WAL receiver may
// connect with: its cluster_name, its Patroni member name.
func selfNames(m Member) []string {
	var out []string
	if m.Topo != nil {
		if m.Topo.ClusterName != "" {
			out = append(out, m.Topo.ClusterName)
		}
		if p := m.Topo.Patroni; p != nil && p.Name != "" {
			out = append(out, p.Name)
		}
	}
	return out
}

func addrList(addrs []string) string {
	if len(addrs) == 0 {
		return "none resolved"
	}
	return strings.Join(addrs, ", ")
}

func rowAddrs(rows []facts.StandbyInfo) string { return rowList(rows, false) }

// rowList lists senders by name and client address (and port), "none"
// for none.
func rowList(rows []facts.StandbyInfo, ports bool) string {
	if len(rows) == 0 {
		return "none"
	}
	var out []string
	for _, r := range rows {
		e := fmt.Sprintf("%q from %s", clip(r.Name), r.Addr)
		if ports {
			e += fmt.Sprintf(" port %d", r.Port)
		}
		out = append(out, e)
	}
	return strings.Join(out, ", ")
}

// claims is whether m, a standby of the run, says its WAL receiver
// streams: only then must its upstream show a sender to it.
func claims(m Member) bool {
	return m.Topo != nil && m.Topo.Role == "standby" && m.Topo.Receiver == "streaming"
}

// verify matches the run's streaming standbys to their upstreams' WAL
// senders (the primary, or the run's standby a cascaded one streams
// from): it fills c.Unverified and c.verified and returns how many of the
// primary's standby senders no member of the run took. A standby whose
// upstream is no member of the run (a virtual address, a name the
// inventory does not give) is tried against the primary's senders too,
// and when none is its own, says so.
func (c *Cluster) verify(members []Member, parent map[string]string) int {
	byHost := map[string]Member{}
	for _, m := range members {
		byHost[m.Host] = m
	}
	c.verified = map[string]string{}
	record := func(up Member, got map[string]int) {
		for h, r := range got {
			c.verified[h] = up.Topo.Standbys[r].Name
		}
	}
	claimants := map[string][]Member{}
	unlinked := map[string]bool{}
	for _, s := range c.Standbys {
		m := byHost[s]
		if !claims(m) {
			continue
		}
		up, ok := parent[s]
		if !ok {
			up = c.Primary // no upstream in the run: the primary's, if any
			unlinked[s] = true
		}
		claimants[up] = append(claimants[up], m)
	}
	free := 0
	if p, ok := byHost[c.Primary]; ok && c.Primary != "" {
		got, miss := match(p, claimants[c.Primary])
		record(p, got)
		for _, u := range miss {
			m := u.m
			if !unlinked[m.Host] {
				c.Unverified = append(c.Unverified, u.reason(p))
				continue
			}
			// Its upstream is no member of the run: tried against the
			// primary's senders, it says so, and who took the one its
			// address fits, if any.
			from := fmt.Sprintf("from upstream %q, which matches no member of the run", clip(m.Topo.Upstream))
			if m.Topo.Upstream == "" {
				from = "but names no upstream"
			}
			if why := u.connWhy(p); why != "" {
				c.Unverified = append(c.Unverified, fmt.Sprintf("%s says it streams %s, and the primary %s", m.Host, from, why))
				continue
			}
			if len(u.rivals) > 0 {
				c.Unverified = append(c.Unverified, fmt.Sprintf("%s says it streams %s, and the WAL senders of the primary %s at an address the controller knows %s by (%s) are claimed by %s: more members claim them than %s serves",
					m.Host, from, c.Primary, m.Host, addrList(m.Addrs), strings.Join(u.rivals, ", "), c.Primary))
				continue
			}
			c.Unverified = append(c.Unverified, fmt.Sprintf("%s says it streams %s, and no WAL sender of the primary %s is to an address the controller knows %s by (%s)",
				m.Host, from, c.Primary, m.Host, addrList(m.Addrs)))
		}
		free = len(p.Topo.Standbys) - len(got)
	}
	for _, up := range slices.Sorted(maps.Keys(claimants)) {
		if up == c.Primary {
			continue
		}
		got, why := Match(byHost[up], claimants[up])
		record(byHost[up], got)
		c.Unverified = append(c.Unverified, why...)
	}
	return free
}
