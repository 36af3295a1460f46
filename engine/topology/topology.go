// Package topology groups a run's hosts into replication clusters and
// orders work on them so that no two members of one cluster are down at
// once: standbys first, one at a time, the primary last.
package topology

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/inventory"
)

// Member is one host of the run and its replication facts (nil when no
// server runs there or it could not be asked).
type Member struct {
	Host string
	Topo *facts.Topology
	// Server names the server the host reaches (machine, data directory,
	// port; "" when unknown): a second host reaching the same server is
	// the same member under another name, not another member.
	Server string
	// Machine is the host's kernel host name, and Reach the addresses
	// its server is reached at (see Reach): they link a cascaded standby
	// to the standby it streams from.
	Machine string
	Reach   []string
	// Addrs are the IP addresses the controller itself resolved the
	// host's inventory address (and pgtune_replication_host) to: unlike
	// everything above, not the host's word. They tie a standby to its
	// upstream's WAL sender (Match).
	Addrs []string
	// Names are the names the inventory gives the host (its address, the
	// ssh_config HostName its connection dials, pgtune_replication_host):
	// the controller's, like Addrs. They tie a standby's Patroni name to
	// the host the primary's Patroni lists for that member (tiePatroni).
	Names []string
	// PatroniHosts are the controller's answers for DNS names this
	// member's Patroni lists members at (facts.PatroniMember.Host), by
	// the name as listed: asked for a primary's list only, and only for
	// the names a standby's tie needs (Layout.PatroniLookups). The
	// controller's, like Addrs; the list is the primary's own word, which
	// decides the cluster's members anyway.
	PatroniHosts map[string]Resolved
	// Receiver are the TCP connections of the host's WAL receiver as its
	// kernel lists them (facts.Postgres.WALReceiver, read as root), and
	// ReceiverRead whether they could be read: a WAL sender whose client
	// port PostgreSQL reports is the member's only when one of them has
	// that address and port as its own end (sameConn).
	Receiver     []facts.Conn
	ReceiverRead bool
	// ReceiverSockets are the inodes of the sockets the host's WAL
	// receiver holds, read with Receiver: a WAL sender over a unix
	// socket is the member's only when one of them is the other end of
	// the sender's socket (facts.PeerWhy).
	ReceiverSockets []uint64
	// Port is the port the host's server listens on (its
	// postmaster.pid): a standby's WAL receiver connects to it.
	Port int
}

// Resolved is the controller's answer for a name: the IP addresses it
// resolved to, or why it did not (Err).
type Resolved struct {
	Addrs []string
	Err   string
}

// Cluster is one replication cluster as far as the run sees it: the
// members sharing a system identifier.
type Cluster struct {
	// ID is the system identifier shared by every member.
	ID string `json:"system_identifier"`
	// Name is Patroni's scope when Patroni manages the cluster.
	Name    string `json:"name,omitempty"`
	Patroni bool   `json:"patroni,omitempty"`
	// Primary is the run's host that is the primary ("" when the primary
	// is not in the run); Standbys the run's hosts that are standbys.
	Primary  string   `json:"primary,omitempty"`
	Standbys []string `json:"standbys,omitempty"`
	// OtherPrimaries are the run's other hosts that say they are this
	// cluster's primary (a split brain, a promoted copy, or a host
	// claiming the identifier): none of them is taken for a standby, and
	// no member of the cluster is touched (Split).
	OtherPrimaries []string `json:"other_primaries,omitempty"`
	// Unverified says which of the run's standbys their upstream does not
	// show streaming to them, one WAL sender each (Match): the cluster's
	// members may not be who they say, and what relies on them (the
	// primary's restart, a switchover) is refused.
	Unverified []string `json:"unverified,omitempty"`
	// Outside describes members the run does not include (not in the
	// inventory, or left out by --limit).
	Outside []string `json:"outside,omitempty"`
	// NotStreaming is what the run's members show of a member that is not
	// streaming and that their own facts do not account for (a member the
	// run has no facts of, or does not include): a Patroni member not
	// running, an idle replication slot on the primary, a standby that
	// lost its upstream. No member of such a cluster may go down: it
	// would be the second one down (see notStreaming).
	NotStreaming []string `json:"not_streaming,omitempty"`
	// Waiting describes the run's hosts that say they are a Patroni
	// member the primary lists but do not stream now, so no WAL sender
	// ties them to that member (a replica reconnecting, restarting,
	// catching up from the archive): they are no members outside the
	// run. They hold what they held as such: the primary's restart, and
	// every member's when the primary's Patroni does not report the
	// member up either (HoldsEveryMember).
	Waiting []string `json:"waiting,omitempty"`
	// Clients describes the WAL clients streaming from the primary that
	// are no standby (a WAL archiver, a base backup, a logical decoding
	// client: facts.Topology's Clients). They are no members: they hold
	// no restart, and a restart only cuts them off until they reconnect.
	Clients []string `json:"wal_clients,omitempty"`
	// Upstreams names, for each standby that streams from another
	// standby of the run (cascading replication), that upstream standby.
	Upstreams map[string]string `json:"upstreams,omitempty"`
	// depth is each standby's distance from the primary (1: streams from
	// it), for Sort.
	depth map[string]int
	// verified is, for each standby its upstream's WAL sender shows
	// (verify), that sender's application_name.
	verified map[string]string
	// patroniIn are the Patroni member names that stand for a member of
	// the run (tiePatroni); waiting, by member name, the host of the run
	// saying it is that member but not streaming (Waiting).
	patroniIn map[string]bool
	waiting   map[string]string
	// refused, by member name, is the host of the run whose claim to be
	// that Patroni member tiePatroni refused (Unverified names it there,
	// not as a member outside the run); lookups are the names on the
	// primary's list the controller must resolve to try such a claim
	// again (Layout.PatroniLookups).
	refused map[string]string
	lookups []string
	// waitingDown: a member in Waiting the primary's Patroni does not
	// report up.
	waitingDown bool
}

// HoldsEveryMember reports whether the cluster's members show a member
// that is not streaming and that may be down: restarting any other
// member would take a second one down. A member the run has no facts of
// or does not include (NotStreaming), or a host of the run saying it is
// a Patroni member that does not stream while the primary's Patroni does
// not report that member up (Waiting).
func (c *Cluster) HoldsEveryMember() bool {
	return len(c.NotStreaming) > 0 || c.waitingDown
}

// Incomplete reports whether the run may not include every member of
// the cluster: members outside it (Outside), or a Patroni member whose
// name a host of the run claims while the primary's Patroni lists it
// elsewhere (Unverified names the claim: the member may be another host,
// in another shard).
func (c *Cluster) Incomplete() bool {
	return len(c.Outside) > 0 || len(c.refused) > 0
}

// Replicated reports whether the cluster has more than one member (in the
// run or outside it, or one the members show not streaming): only then
// does order matter.
func (c *Cluster) Replicated() bool {
	n := len(c.Standbys) + len(c.Outside) + len(c.OtherPrimaries)
	if c.Primary != "" {
		n++
	}
	return n > 1 || len(c.NotStreaming) > 0 || len(c.Unverified) > 0 || len(c.Waiting) > 0
}

// Split reports whether more than one of the run's hosts says it is the
// cluster's primary: none of them is demoted to a standby on its word,
// and no member of the cluster may be touched.
func (c *Cluster) Split() bool { return len(c.OtherPrimaries) > 0 }

// isPrimary reports whether host says it is the cluster's primary.
func (c *Cluster) isPrimary(host string) bool {
	return host != "" && (host == c.Primary || contains(c.OtherPrimaries, host))
}

// Members lists the cluster's hosts in the run in restart order:
// standbys (a cascaded standby before the standby it streams from, by
// name otherwise), then the other hosts saying they are primary, then the
// primary.
func (c *Cluster) Members() []string {
	out := append(append([]string(nil), c.Standbys...), c.OtherPrimaries...)
	if c.Primary != "" {
		out = append(out, c.Primary)
	}
	return out
}

// String is a one-line description: "cluster 73… (patroni scope "x"):
// primary db1, standbys db2, db3; outside this run: 1 standby".
func (c *Cluster) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster %s", c.ID)
	if c.Patroni {
		fmt.Fprintf(&b, " (Patroni scope %q)", c.Name)
	}
	primary := c.Primary
	if primary == "" {
		primary = "not in this run"
	}
	fmt.Fprintf(&b, ": primary %s", primary)
	if len(c.Standbys) > 0 {
		fmt.Fprintf(&b, ", standbys %s", strings.Join(c.Standbys, ", "))
	}
	var cascades []string
	for _, s := range c.Standbys {
		if up, ok := c.Upstreams[s]; ok {
			cascades = append(cascades, s+" streams from "+up)
		}
	}
	if len(cascades) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(cascades, ", "))
	}
	if len(c.OtherPrimaries) > 0 {
		fmt.Fprintf(&b, "; also saying they are its primary: %s", strings.Join(c.OtherPrimaries, ", "))
	}
	if len(c.Unverified) > 0 {
		fmt.Fprintf(&b, "; unverified: %s", strings.Join(c.Unverified, "; "))
	}
	if len(c.Outside) > 0 {
		fmt.Fprintf(&b, "; outside this run: %s", strings.Join(c.Outside, ", "))
	}
	if len(c.NotStreaming) > 0 {
		fmt.Fprintf(&b, "; not streaming: %s", strings.Join(c.NotStreaming, ", "))
	}
	if len(c.Waiting) > 0 {
		fmt.Fprintf(&b, "; members of this run not streaming: %s", strings.Join(c.Waiting, ", "))
	}
	if len(c.Clients) > 0 {
		fmt.Fprintf(&b, "; WAL clients of the primary (no members): %s", strings.Join(c.Clients, ", "))
	}
	return b.String()
}

// Layout is the run's hosts grouped into clusters.
type Layout struct {
	Clusters []*Cluster
	of       map[string]*Cluster
	addrs    map[string][]string // Member.Addrs, by host
}

// Addrs is the addresses the controller resolved host to when the layout
// was made (Member.Addrs), for later checks against the same answers.
func (l *Layout) Addrs(host string) ([]string, bool) {
	a, ok := l.addrs[host]
	return a, ok
}

// Group groups members by system identifier. Members without topology
// belong to no cluster.
func Group(members []Member) *Layout {
	l := &Layout{of: map[string]*Cluster{}, addrs: map[string][]string{}}
	for _, m := range members {
		if m.Addrs != nil {
			l.addrs[m.Host] = m.Addrs
		}
	}
	byID := map[string]*Cluster{}
	byIDTopos := map[string][]Member{}
	seen := map[string][]Member{}
	for _, m := range members {
		if m.Topo == nil || m.Topo.SystemID == "" {
			continue
		}
		if m.Server != "" {
			// Another name for a server already grouped: it is left out
			// of the cluster (and of its order) rather than counted as a
			// second primary. Server (host name, data directory, port)
			// is the host's word: only an address the controller itself
			// resolved both names to makes them one server; a host
			// claiming another's server otherwise dropped the real one
			// from its cluster.
			key := m.Topo.SystemID + "|" + m.Server
			alias := false
			for _, o := range seen[key] {
				alias = alias || sharesAddr(o.Addrs, m.Addrs)
			}
			if alias {
				continue
			}
			seen[key] = append(seen[key], m)
		}
		c := byID[m.Topo.SystemID]
		if c == nil {
			c = &Cluster{ID: m.Topo.SystemID}
			byID[c.ID] = c
			l.Clusters = append(l.Clusters, c)
		}
		byIDTopos[c.ID] = append(byIDTopos[c.ID], m)
		l.of[m.Host] = c
		if p := m.Topo.Patroni; p != nil {
			c.Patroni = true // the primary's own facts decide, below
			if c.Name == "" {
				c.Name = p.Scope
			}
		}
		if m.Topo.IsPrimary() {
			// A second server claiming primary with the same identifier
			// (a split brain, a promoted copy, a host claiming another
			// cluster's identifier) is never taken for a standby on the
			// others' word: choosePrimary picks the one shown, and the
			// cluster is split.
			c.OtherPrimaries = append(c.OtherPrimaries, m.Host)
		} else {
			c.Standbys = append(c.Standbys, m.Host)
		}
	}
	for _, c := range l.Clusters {
		members := byIDTopos[c.ID]
		sort.Strings(c.Standbys)
		c.choosePrimary(members)
		if p := primaryPatroni(c, members); p != nil {
			c.Patroni, c.Name = true, p.Scope
		} else if c.Primary != "" {
			// A standby's word that Patroni manages the cluster is no
			// reason to trust its member list (outside, notStreaming).
			c.Patroni, c.Name = false, ""
		}
		parent := c.orderStandbys(members)
		free := c.verify(members, parent)
		c.tiePatroni(members)
		c.Waiting = waiting(c, members)
		c.Outside = outside(c, members, free)
		c.NotStreaming = notStreaming(c, members)
		c.Clients = clients(byIDTopos[c.ID], c.Primary)
	}
	sort.Slice(l.Clusters, func(i, j int) bool { return l.Clusters[i].first() < l.Clusters[j].first() })
	return l
}

// choosePrimary makes one of the hosts saying they are primary the
// cluster's Primary, the others staying OtherPrimaries: the one whose WAL
// senders the most of the run's standbys match (Match), then the one with
// the most standby senders, then by name. Which one it is only names the
// cluster: a split cluster is not touched.
func (c *Cluster) choosePrimary(members []Member) {
	if len(c.OtherPrimaries) == 0 {
		return
	}
	var standbys []Member
	byHost := map[string]Member{}
	for _, m := range members {
		byHost[m.Host] = m
		if contains(c.Standbys, m.Host) && claims(m) {
			standbys = append(standbys, m)
		}
	}
	score := func(h string) (int, int) {
		got, _ := Match(byHost[h], standbys)
		return len(got), len(byHost[h].Topo.Standbys)
	}
	cands := append([]string(nil), c.OtherPrimaries...)
	sort.SliceStable(cands, func(i, j int) bool {
		mi, ri := score(cands[i])
		mj, rj := score(cands[j])
		if mi != mj {
			return mi > mj
		}
		if ri != rj {
			return ri > rj
		}
		return cands[i] < cands[j]
	})
	c.Primary, c.OtherPrimaries = cands[0], cands[1:]
	if len(c.OtherPrimaries) == 0 {
		c.OtherPrimaries = nil
	}
}

func (c *Cluster) first() string {
	if m := c.Members(); len(m) > 0 {
		return m[0]
	}
	return c.ID
}

// outside finds members the run does not include: the primary's standby
// WAL senders that no member of the run took (free, see verify) count
// them, and the primary's Patroni member list names those not in the run
// (patroniView); a run without the primary misses at least the primary.
// The member list only adds to the count: a host of the run can claim any
// Patroni name, and the senders are the primary's.
func outside(c *Cluster, members []Member, free int) []string {
	var out []string
	if primaries := len(c.OtherPrimaries) + 1; primaries > 1 {
		out = append(out, fmt.Sprintf("%d servers of this cluster say they are primary", primaries))
	}
	if c.Primary == "" {
		if loneStopped(members) {
			// One server, down, that starts as a primary: nothing says
			// it has standbys (pgtune starting it after an interrupted
			// restart is the usual case).
			return out
		}
		upstream := ""
		for _, m := range members {
			if m.Topo.Upstream != "" {
				upstream = " (upstream " + m.Topo.Upstream + ")"
				break
			}
		}
		out = append(out, "the primary"+upstream)
		return out
	}
	if c.Patroni {
		inRun, list := c.patroniView(members)
		for _, pm := range list {
			// A member a host of the run says it is, refused
			// (tiePatroni), is in Unverified, which holds the primary
			// and a switchover as this list does (Incomplete, a shard).
			if !inRun[pm.Name] && c.waiting[pm.Name] == "" && c.refused[pm.Name] == "" {
				d := fmt.Sprintf("Patroni member %q", clip(pm.Name))
				if pm.Role != "" {
					d += " (" + clip(pm.Role) + ")"
				}
				out = append(out, d)
			}
		}
	}
	if free > 0 {
		out = append(out, fmt.Sprintf("%d standby(s) the primary streams to", free))
	}
	return out
}

// clients describes the primary's WAL clients that are no standby:
// pg_stat_replication rows that are no member, inside the run or out.
func clients(members []Member, primary string) []string {
	for _, m := range members {
		if m.Host == primary {
			return ClientList(m.Topo)
		}
	}
	return nil
}

// ClientList describes a server's WAL clients that are no standby, each
// as facts.WALClient.String (names clipped), and how many more there are.
func ClientList(t *facts.Topology) []string {
	if t == nil {
		return nil
	}
	var out []string
	for _, c := range t.Clients {
		c.Name = clip(c.Name)
		out = append(out, c.String())
	}
	if t.MoreClients > 0 {
		out = append(out, fmt.Sprintf("%d more", t.MoreClients))
	}
	return out
}

// ClusterOf is the cluster host belongs to, or nil.
func (l *Layout) ClusterOf(host string) *Cluster {
	if l == nil {
		return nil
	}
	return l.of[host]
}

// IsPrimary reports whether host is the primary of a replicated cluster.
func (l *Layout) IsPrimary(host string) bool {
	c := l.ClusterOf(host)
	return c != nil && c.Primary == host && c.Replicated()
}

// rank is a host's place in its cluster's restart order (0 for the first
// standby), and false for hosts in no replicated cluster.
func (l *Layout) rank(host string, present map[string]bool) (int, bool) {
	c := l.ClusterOf(host)
	if c == nil || !c.Replicated() {
		return 0, false
	}
	r := 0
	for _, m := range c.Members() {
		if m == host {
			return r, true
		}
		if present == nil || present[m] {
			r++
		}
	}
	return 0, false
}

// Waves splits items (hosts, by name) into groups worked on one after
// the other, each group's items at once: the k-th member (in restart
// order, counting only the items given) of every replicated cluster goes
// into wave k, so no wave holds two members of one cluster, standbys come
// before their primary, and hosts in no replicated cluster all go into the
// first wave. Order within a wave follows the input.
func Waves[T any](l *Layout, items []T, name func(T) string) [][]T {
	present := map[string]bool{}
	for _, it := range items {
		present[name(it)] = true
	}
	var waves [][]T
	for _, it := range items {
		r, _ := l.rank(name(it), present)
		for len(waves) <= r {
			waves = append(waves, nil)
		}
		waves[r] = append(waves[r], it)
	}
	out := waves[:0]
	for _, w := range waves {
		if len(w) > 0 {
			out = append(out, w)
		}
	}
	return out
}

// Sort orders items so that cutting them into batches keeps cluster
// order: standbys of replicated clusters first (deepest cascaded ones
// first), then hosts in no replicated cluster, then primaries; stable
// otherwise.
func Sort[T any](l *Layout, items []T, name func(T) string) []T {
	class := func(it T) int {
		h := name(it)
		switch c := l.ClusterOf(h); {
		case c == nil || !c.Replicated():
			return 1
		case c.isPrimary(h):
			return 2
		default:
			return 0
		}
	}
	depth := func(it T) int {
		if c := l.ClusterOf(name(it)); c != nil {
			return c.depth[name(it)]
		}
		return 0
	}
	out := append([]T(nil), items...)
	sort.SliceStable(out, func(i, j int) bool {
		ci, cj := class(out[i]), class(out[j])
		if ci != cj {
			return ci < cj
		}
		return ci == 0 && depth(out[i]) > depth(out[j])
	})
	return out
}

// SortHosts and WavesHosts are Sort and Waves over inventory hosts, the
// shape of rollout.Order's Sort and Waves.
func (l *Layout) SortHosts(hosts []*inventory.Host) []*inventory.Host {
	return Sort(l, hosts, inventoryName)
}

// WavesHosts: see SortHosts.
func (l *Layout) WavesHosts(batch []*inventory.Host) [][]*inventory.Host {
	return Waves(l, batch, inventoryName)
}

func inventoryName(h *inventory.Host) string { return h.Name }

// loneStopped reports whether the only member in the run is a stopped
// server that would start as a primary.
func loneStopped(members []Member) bool {
	return len(members) == 1 && members[0].Topo.IsStopped() && !members[0].Topo.StoppedStandby
}
