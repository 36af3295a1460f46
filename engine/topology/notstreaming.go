package topology

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pgtune/pgtune/engine/facts"
)

// A member the run has no facts of (its host unreachable: the commonest
// way a member is down), or does not include (--limit, not in the
// inventory), is in no cluster of the layout; if it is down, restarting
// any other member takes a second one down. The members the run does
// reach are the only witnesses: their facts are read for what they say of
// a member that is not streaming, and only names are compared (they come
// from hosts: they match, they decide nothing else).

// maxNotStreaming bounds the evidence kept for one cluster.
const maxNotStreaming = 8

// notStreaming lists what the run's members show of a member of their
// cluster that is not streaming and that their own facts do not account
// for: a Patroni member in a state other than running, a physical slot on
// the primary that no standby streams through and no standby of the run
// names as its own, a standby of the run that does not stream from an
// upstream outside the run.
func notStreaming(c *Cluster, members []Member) []string {
	var out []string
	out = append(out, patroniNotRunning(c, members)...)
	out = append(out, idleSlots(c, members)...)
	out = append(out, lostUpstreams(members)...)
	if len(out) > maxNotStreaming {
		out = append(out[:maxNotStreaming], fmt.Sprintf("%d more", len(out)-maxNotStreaming))
	}
	return out
}

// patroniUp are the member states of Patroni's GET /cluster that mean
// its server runs and replicates: a replica reports its replication
// state since Patroni 3.0.4, "streaming", or "in archive recovery" when
// it replays from the archive (a nostream member, a standby cluster's
// leader fed from the archive, a replica reconnecting), "running" before.
var patroniUp = []string{"running", "streaming", "in archive recovery"}

// patroniNotRunning lists the Patroni members the run does not include
// whose state says their server is not up (stopped, crashed, starting…).
// A member whose host is off is not among them: its key leaves the DCS
// with its TTL, and only its replication slot may still tell of it.
func patroniNotRunning(c *Cluster, members []Member) []string {
	inRun, list := c.patroniView(members)
	var out []string
	for _, pm := range list {
		if inRun[pm.Name] || c.waiting[pm.Name] != "" || slices.Contains(patroniUp, pm.State) {
			continue
		}
		d := fmt.Sprintf("Patroni member %q", clip(pm.Name))
		if pm.Role != "" {
			d += fmt.Sprintf(" (%q)", clip(pm.Role))
		}
		if pm.State == "" {
			out = append(out, d+" reports no state") // Patroni always does: unknown is not up
			continue
		}
		out = append(out, d+fmt.Sprintf(" is %q", clip(pm.State)))
	}
	return out
}

// waiting lists the run's hosts (other than the primary) that say they
// are a member on the primary's Patroni list and do not stream (claims):
// their upstream shows no WAL sender to vouch for the name, so the member
// cannot count as in the run; reported as outside it (or as a member the
// run has no facts of), it sent the operator looking for a host the run
// does include. It fills c.waiting and c.waitingDown. A host's claim only
// moves a member from one list to another that holds the same
// (Cluster.Waiting): it never lets a restart through.
func waiting(c *Cluster, members []Member) []string {
	c.waiting = map[string]string{}
	inRun, _ := c.patroniView(members)
	pp := primaryPatroni(c, members)
	if pp == nil {
		return nil
	}
	var out []string
	for _, m := range members {
		p := m.Topo.Patroni
		if p == nil || p.Name == "" || m.Host == c.Primary || c.isPrimary(m.Host) || inRun[p.Name] || claims(m) || c.waiting[p.Name] != "" {
			continue
		}
		i := slices.IndexFunc(pp.Members, func(pm facts.PatroniMember) bool { return pm.Name == p.Name })
		if i < 0 {
			continue
		}
		c.waiting[p.Name] = m.Host
		recv := "no WAL receiver"
		switch {
		case m.Topo.IsStopped():
			recv = "PostgreSQL not running"
		case m.Topo.Role != "standby":
			recv = fmt.Sprintf("role %q", clip(m.Topo.Role))
		case m.Topo.Receiver != "":
			recv = fmt.Sprintf("WAL receiver %q", clip(m.Topo.Receiver))
		}
		state := "no state"
		if st := pp.Members[i].State; st != "" {
			state = strconv.Quote(clip(st))
		}
		if !slices.Contains(patroniUp, pp.Members[i].State) {
			c.waitingDown = true // patroniNotRunning would have listed it
		}
		out = append(out, fmt.Sprintf("%s, which says it is Patroni member %q, is not streaming (%s; the primary's Patroni reports it %s)",
			m.Host, clip(p.Name), recv, state))
	}
	return out
}

// patroniView is the Patroni members of the run (by member name, see
// tiePatroni) and the member list to check them against: the primary's
// (its seat is guarded: Split); without the primary in the run, the
// longest one a member reported, which then only adds evidence.
func (c *Cluster) patroniView(members []Member) (map[string]bool, []facts.PatroniMember) {
	var list []facts.PatroniMember
	for _, m := range members {
		if p := m.Topo.Patroni; p != nil && c.Primary == "" && len(p.Members) > len(list) {
			list = p.Members
		}
	}
	if p := primaryPatroni(c, members); p != nil {
		list = p.Members
	}
	return c.patroniIn, list
}

// tiePatroni fills c.patroniIn: which Patroni member names stand for a
// member of the run. A member's Patroni name is its own word: it counts
// for the primary, and for a standby only when the controller ties it to
// that member twice over: its upstream shows a WAL sender to it (verify)
// under that name (Patroni's receivers connect with application_name =
// the member name), and the primary's Patroni lists the member at a host
// the controller knows the standby by (patroniAt). The name alone is the
// client's word: a streaming standby that is no Patroni member at all
// could take a down member's name and hide it. A standby whose name the
// primary lists elsewhere is unverified (c.refused), and a DNS name the
// controller has not resolved yet is asked for (c.lookups).
func (c *Cluster) tiePatroni(members []Member) {
	c.patroniIn = map[string]bool{}
	c.refused = map[string]string{}
	c.lookups = nil
	var primary Member
	for _, m := range members {
		if m.Host == c.Primary && m.Topo != nil {
			primary = m
		}
	}
	pp := primaryPatroni(c, members)
	if pp != nil && pp.Name != "" {
		c.patroniIn[pp.Name] = true
	}
	for _, m := range members {
		p := m.Topo.Patroni
		if p == nil || p.Name == "" || m.Host == c.Primary {
			continue
		}
		app, ok := c.verified[m.Host]
		if !ok || !slices.Contains(appNames(p.Name), app) || pp == nil {
			continue
		}
		i := slices.IndexFunc(pp.Members, func(pm facts.PatroniMember) bool { return pm.Name == p.Name })
		if i < 0 {
			continue // not on the primary's list: it stands for no one
		}
		pm := pp.Members[i]
		ok, ask, resolved := patroniAt(primary, m, pm.Host)
		if ok {
			c.patroniIn[p.Name] = true
			continue
		}
		if ask && !slices.Contains(c.lookups, pm.Host) {
			c.lookups = append(c.lookups, pm.Host)
		}
		if c.refused[p.Name] == "" {
			c.refused[p.Name] = m.Host
		}
		at := "no host (Patroni lists none for a member whose key in the DCS holds no postgresql.connect_address yet, as for a member still starting: run again once patronictl list shows its host)"
		if pm.Host != "" {
			at = strconv.Quote(clip(pm.Host)) + resolved
		}
		c.Unverified = append(c.Unverified, fmt.Sprintf("%s says it is Patroni member %q, but the primary's Patroni lists that member at %s, which is none of the addresses or names the controller knows %s by (%s; %s): if %s is that member, set pgtune_replication_host on it to the host its postgresql.connect_address names",
			m.Host, clip(p.Name), at, m.Host, addrList(m.Addrs), nameList(m.Names), m.Host))
	}
}

// patroniAt reports whether host, where the primary's Patroni lists a
// member (its GET /cluster "host": postgresql.connect_address), is m's as
// the controller knows it: an IP address m's names resolved to (loopback:
// m on the primary's own machine, as for a WAL sender: sameClient), one
// of m's names, or a DNS name the controller resolved (the primary's
// PatroniHosts) to one of those addresses. When it is not, ask says the
// name is yet to be resolved, and resolved what the controller made of it.
func patroniAt(primary, m Member, host string) (ok, ask bool, resolved string) {
	if host == "" {
		return false, false, ""
	}
	if strings.EqualFold(host, "localhost") {
		host = "127.0.0.1"
	}
	if net.ParseIP(host) != nil {
		return sameClient(primary, m, host), false, ""
	}
	bare := strings.TrimSuffix(host, ".")
	if slices.ContainsFunc(m.Names, func(n string) bool { return strings.EqualFold(strings.TrimSuffix(n, "."), bare) }) {
		return true, false, ""
	}
	r, asked := primary.PatroniHosts[host]
	switch {
	case !asked:
		return false, true, ""
	case r.Err != "":
		return false, false, fmt.Sprintf(" (it does not resolve on the controller: %s)", clipTo(r.Err, maxError))
	case len(r.Addrs) == 0:
		return false, false, " (it resolves to no address on the controller)"
	}
	for _, a := range r.Addrs {
		if sameClient(primary, m, a) {
			return true, false, ""
		}
	}
	return false, false, fmt.Sprintf(" (resolved on the controller to %s)", strings.Join(r.Addrs, ", "))
}

// PatroniLookups lists, by primary host, the DNS names its Patroni lists
// a member at that only resolving them could tie to the standby of the
// run saying it is that member (Member.PatroniHosts): a name is looked up
// only when a standby needs it, never because a standby names it.
func (l *Layout) PatroniLookups() map[string][]string {
	out := map[string][]string{}
	for _, c := range l.Clusters {
		if len(c.lookups) > 0 {
			out[c.Primary] = append(out[c.Primary], c.lookups...)
		}
	}
	return out
}

func nameList(names []string) string {
	var out []string
	for _, n := range names {
		if n != "" && net.ParseIP(n) == nil && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return "no names"
	}
	return "names " + strings.Join(out, ", ")
}

// primaryPatroni is the Patroni facts of the cluster's primary, if it is
// in the run and reports any.
func primaryPatroni(c *Cluster, members []Member) *facts.Patroni {
	if c.Primary == "" {
		return nil
	}
	for _, m := range members {
		if m.Host == c.Primary && m.Topo != nil {
			return m.Topo.Patroni
		}
	}
	return nil
}

// appNames are the forms name takes as pg_stat_replication's
// application_name (as facts read it): PostgreSQL keeps printable ASCII
// only, each other byte a '?' before version 16 and \xNN from 16 on, then
// cuts it to 63 bytes (NAMEDATALEN-1). A Patroni member "nöde2" streams as
// "n??de2" or "n\xc3\xb6de2"; compared with the raw name, it never matched
// and its cluster was refused as missing a member.
func appNames(name string) []string {
	var q, x strings.Builder
	for _, c := range []byte(name) {
		if c < 0x20 || c > 0x7e {
			q.WriteByte('?')
			fmt.Fprintf(&x, `\x%02x`, c)
			continue
		}
		q.WriteByte(c)
		x.WriteByte(c)
	}
	cut := func(s string) string { return s[:min(len(s), 63)] }
	return []string{cut(q.String()), cut(x.String())}
}

// idleSlots lists the primary's physical slots no one streams through,
// but for those Patroni keeps for a member the primary's Patroni reports
// up (Patroni 4 keeps
// an idle slot on the primary for every member, one cascading from
// another replica included): that member's state speaks for it. A slot
// is in use only when the primary says so: a standby of the run naming
// it (primary_slot_name) is that standby's word, which any host can give,
// and a standby whose slot is idle does not stream through it anyway.
func idleSlots(c *Cluster, members []Member) []string {
	primary := c.Primary
	used := map[string]bool{}
	var list []facts.PatroniMember
	if p := primaryPatroni(c, members); p != nil {
		list = p.Members // the primary's word only: a slot is the primary's
	}
	for _, pm := range list {
		if slices.Contains(patroniUp, pm.State) {
			used[PatroniSlotName(pm.Name)] = true
		}
	}
	var idle []string
	for _, m := range members {
		if m.Host == primary {
			idle = m.Topo.IdleSlots
		}
	}
	var out []string
	for _, s := range idle {
		if !used[s] {
			out = append(out, fmt.Sprintf("replication slot %q on %s has no standby streaming through it", s, primary))
		}
	}
	return out
}

// lostUpstreams lists the run's running standbys that do not stream and
// whose upstream is no member of the run: that upstream (the primary, or
// a cascading standby) may be down.
func lostUpstreams(members []Member) []string {
	inRun := map[string]bool{}
	for _, m := range members {
		for _, r := range m.Reach {
			if r != "" {
				inRun[r] = true
			}
		}
	}
	var out []string
	for _, m := range members {
		t := m.Topo
		if t.Role != "standby" || t.Receiver == "streaming" || t.Upstream == "" {
			continue
		}
		if r := UpstreamReach(m.Machine, t.Upstream); r != "" && inRun[r] {
			continue
		}
		recv := "no WAL receiver"
		if t.Receiver != "" {
			recv = fmt.Sprintf("WAL receiver %q", clip(t.Receiver))
		}
		out = append(out, fmt.Sprintf("%s lost its upstream %q (%s; no member of this run)", m.Host, clip(t.Upstream), recv))
	}
	return out
}

// PatroniSlotName is the replication slot Patroni names after a member:
// lower case, "-" and "." as "_", any other character but [a-z0-9_] as
// "u" and its code point in four or more decimal digits, cut at 63 bytes.
func PatroniSlotName(member string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(member) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		case r == '-', r == '.':
			b.WriteByte('_')
		default:
			fmt.Fprintf(&b, "u%04d", r)
		}
	}
	name := b.String()
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}

// maxShown bounds a name from a host in the evidence (Patroni's member
// list is any JSON up to 1 MiB).
const maxShown = 64

// maxError bounds a resolver's error in the evidence (it quotes the name,
// which is the primary's word).
const maxError = 256

// clip shortens s to maxShown bytes, on a rune boundary.
func clip(s string) string { return clipTo(s, maxShown) }

// clipTo shortens s to n bytes, on a rune boundary.
func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
