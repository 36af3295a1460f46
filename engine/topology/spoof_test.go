package topology

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/facts"
)

// A host of the run claiming another cluster's system identifier (any
// superuser there can answer the topology query as they like) must not
// change what the run decides for that cluster's real members.

// TestSpoofedStandbyHidesNoOutsideStandby: a claimed standby no WAL
// sender of the primary serves does not stand in for a standby outside
// the run.
func TestSpoofedStandbyHidesNoOutsideStandby(t *testing.T) {
	p := primary("42", 2)
	honest := []Member{{Host: "p", Topo: p}, {Host: "s1", Topo: standby("42")}}
	if len(Group(honest).ClusterOf("p").Outside) == 0 {
		t.Fatal("baseline")
	}
	c := Group(append(honest, Member{Host: "evil", Topo: standby("42")})).ClusterOf("p")
	if len(c.Outside) == 0 {
		t.Errorf("spoofed member hides the outside standby: %s", c)
	}
}

// TestSpoofedSlotNameHidesNoIdleSlot: a claimed standby naming a down
// standby's slot as its own does not make that slot used.
func TestSpoofedSlotNameHidesNoIdleSlot(t *testing.T) {
	p := primary("42", 1)
	p.IdleSlots = []string{"s2_slot"}
	honest := []Member{{Host: "p", Topo: p}, {Host: "s1", Topo: standby("42")}}
	if len(Group(honest).ClusterOf("p").NotStreaming) == 0 {
		t.Fatal("baseline")
	}
	evil := standby("42")
	evil.SlotName = "s2_slot"
	c := Group(append(honest, Member{Host: "evil", Topo: evil})).ClusterOf("p")
	if len(c.NotStreaming) == 0 {
		t.Errorf("idle slot hidden: %s", c)
	}
}

// TestSpoofedPrimaryTakesNoSeat: a second host claiming primary, its name
// sorting first, does not demote the real primary to a standby.
func TestSpoofedPrimaryTakesNoSeat(t *testing.T) {
	l := Group([]Member{{Host: "a-evil", Topo: primary("42", 0)}, {Host: "db1", Topo: primary("42", 1)}, {Host: "db2", Topo: standby("42")}})
	if c := l.ClusterOf("db1"); c.Primary != "db1" {
		t.Errorf("real primary demoted: %s", c)
	}
}

// TestVerifyStandbys: the run's streaming standbys are matched to their
// upstream's WAL senders, one each, by what the controller knows of
// their addresses; the primary's senders no member took are outside the
// run.
func TestVerifyStandbys(t *testing.T) {
	rows := func(addrs ...string) *facts.Topology {
		p := &facts.Topology{Role: "primary", SystemID: "1"}
		for _, a := range addrs {
			p.Standbys = append(p.Standbys, facts.StandbyInfo{Name: "walreceiver", Addr: a, State: "streaming"})
		}
		return p
	}
	at := func(host string, topo *facts.Topology, addrs ...string) Member {
		return Member{Host: host, Topo: topo, Machine: host, Addrs: addrs}
	}
	for _, tc := range []struct {
		name       string
		members    []Member
		unverified []string // hosts named first in Unverified
		outside    string
	}{
		{"every standby at its inventory address", []Member{
			at("p", rows("10.0.0.2", "10.0.0.3"), "10.0.0.1"), at("s1", standby("1"), "10.0.0.2"), at("s2", standby("1"), "10.0.0.3")}, nil, ""},
		{"a replication network address (pgtune_replication_host)", []Member{
			at("p", rows("192.168.1.2"), "10.0.0.1"), at("s1", standby("1"), "10.0.0.2", "192.168.1.2")}, nil, ""},
		{"a spoofed standby beside an honest one", []Member{
			at("p", rows("10.0.0.2"), "10.0.0.1"), at("s1", standby("1"), "10.0.0.2"), at("evil", standby("1"), "10.6.6.6")}, []string{"evil"}, ""},
		{"a spoofed standby hides no standby outside the run", []Member{
			at("p", rows("10.0.0.2", "10.0.0.3"), "10.0.0.1"), at("s1", standby("1"), "10.0.0.2"), at("evil", standby("1"), "10.6.6.6")},
			[]string{"evil"}, "1 standby(s) the primary streams to"},
		{"two members claiming one sender", []Member{
			at("p", rows("10.0.0.2"), "10.0.0.1"), at("s1", standby("1"), "10.0.0.2"), at("t1", standby("1"), "10.0.0.2")}, []string{"t1"}, ""},
		{"a unix-socket sender is no member's on another machine", []Member{
			at("p", rows("local"), "10.0.0.1"), at("s1", standby("1"), "10.0.0.1")}, []string{"s1"}, "1 standby(s) the primary streams to"},
		{"a standby not streaming claims no sender", []Member{
			at("p", rows(), "10.0.0.1"), at("s1", &facts.Topology{Role: "standby", SystemID: "1", Receiver: "waiting", Upstream: "10.0.0.1:5432"}, "10.0.0.2")}, nil, ""},
		{"a cascaded standby is checked against its upstream standby", []Member{
			{Host: "p", Topo: rows("10.0.0.2"), Addrs: []string{"10.0.0.1"}, Machine: "p"},
			{Host: "s1", Topo: &facts.Topology{Role: "standby", SystemID: "1", Receiver: "streaming", Upstream: "10.0.0.1:5432"}, Addrs: []string{"10.0.0.2"}, Machine: "s1", Reach: []string{"10.0.0.2:5432"}},
			{Host: "c1", Topo: &facts.Topology{Role: "standby", SystemID: "1", Receiver: "streaming", Upstream: "10.0.0.2:5432"}, Addrs: []string{"10.0.0.3"}, Machine: "c1"}},
			[]string{"c1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Group(tc.members).ClusterOf("p")
			var got []string
			for _, u := range c.Unverified {
				got = append(got, strings.Fields(u)[0])
			}
			if !reflect.DeepEqual(got, tc.unverified) {
				t.Errorf("unverified %q, want hosts %q", c.Unverified, tc.unverified)
			}
			if out := strings.Join(c.Outside, "; "); out != tc.outside {
				t.Errorf("outside %q, want %q (%s)", out, tc.outside, c)
			}
			if len(tc.unverified) > 0 != (len(c.Unverified) > 0) || !c.Replicated() {
				t.Errorf("replicated %t (%s)", c.Replicated(), c)
			}
		})
	}
}

// TestMatchPrefersOwnName: among senders a member's address allows, the
// one whose application_name is the member's own is its; two members
// claiming one sender leave one of them without, named.
func TestMatchPrefersOwnName(t *testing.T) {
	p := Member{Host: "p", Machine: "m", Addrs: []string{"127.0.0.1"}, Topo: &facts.Topology{Role: "primary", SystemID: "1", Standbys: []facts.StandbyInfo{
		{Name: "standby2", Addr: "local"}, {Name: "standby1", Addr: "local"}}}}
	sb := func(host, name string) Member {
		return Member{Host: host, Machine: "m", Addrs: []string{"127.0.0.1"}, Topo: &facts.Topology{Role: "standby", SystemID: "1", Receiver: "streaming", ClusterName: name}}
	}
	got, why := Match(p, []Member{sb("b", "standby1"), sb("a", "standby2")})
	if len(why) > 0 || got["b"] != 1 || got["a"] != 0 {
		t.Errorf("Match = %v %q, want b on sender 1, a on sender 0", got, why)
	}
	got, why = Match(p, []Member{sb("a", "standby1"), sb("b", "standby2"), sb("c", "standby1")})
	if len(got) != 2 || len(why) != 1 || !strings.HasPrefix(why[0], "c says it streams from p, but the WAL senders of p that could be its own are taken by") {
		t.Errorf("Match = %v %q, want c left without a sender", got, why)
	}
}

// TestPatroniClaimCountsNoSender: a host of the run reporting Patroni
// facts (any name, any member list) neither turns off the count of the
// primary's WAL senders no member took nor stands in, by name, for a
// Patroni member that is down; the primary's own Patroni facts and its
// WAL senders decide.
func TestPatroniClaimCountsNoSender(t *testing.T) {
	at := func(host string, topo *facts.Topology, addr string) Member {
		return Member{Host: host, Topo: topo, Machine: host, Addrs: []string{addr}}
	}
	streaming := func(upstream string, p *facts.Patroni) *facts.Topology {
		return &facts.Topology{Role: "standby", SystemID: "1", Receiver: "streaming", Upstream: upstream, Patroni: p}
	}
	pat := func(name string, members ...facts.PatroniMember) *facts.Patroni {
		return &facts.Patroni{Scope: "demo", Name: name, Members: members}
	}
	list := func(s2 string) []facts.PatroniMember {
		return []facts.PatroniMember{{Name: "n1", Role: "leader", State: "running", Host: "10.0.0.1"}, {Name: "s1", Role: "replica", State: "streaming", Host: "10.0.0.2"}, {Name: "s2", Role: "replica", State: s2, Host: "10.0.0.3"}}
	}
	plain := at("p", &facts.Topology{Role: "primary", SystemID: "1", IdleSlots: []string{"s2"},
		Standbys: []facts.StandbyInfo{{Name: "s1", Addr: "10.0.0.2"}, {Name: "x", Addr: "10.0.0.9"}}}, "10.0.0.1")
	evil := at("evil", &facts.Topology{Role: "standby", SystemID: "1",
		Patroni: pat("s2", facts.PatroniMember{Name: "s2", State: "running"})}, "10.6.6.6")
	// An honest Patroni cluster: s2 outside the run, streaming or down.
	patP := func(s2 string, rows ...facts.StandbyInfo) Member {
		t := &facts.Topology{Role: "primary", SystemID: "1", Standbys: rows, Patroni: pat("n1", list(s2)...)}
		if s2 == "stopped" {
			t.IdleSlots = []string{"s2"}
		}
		return at("p", t, "10.0.0.1")
	}
	s1 := at("s1", streaming("10.0.0.1:5432", pat("s1", list("streaming")...)), "10.0.0.2")
	row1, row2 := facts.StandbyInfo{Name: "s1", Addr: "10.0.0.2"}, facts.StandbyInfo{Name: "s2", Addr: "10.0.0.3"}
	for _, tc := range []struct {
		name         string
		members      []Member
		outside      []string
		notStreaming []string
	}{
		{"a Patroni claim beside a primary without Patroni", []Member{plain, at("s1", streaming("10.0.0.1:5432", nil), "10.0.0.2"), evil},
			[]string{"1 standby(s) the primary streams to"},
			[]string{`replication slot "s2" on p has no standby streaming through it`}},
		{"honest Patroni: a replica outside the run streams", []Member{patP("streaming", row1, row2), s1},
			[]string{`Patroni member "s2" (replica)`, "1 standby(s) the primary streams to"}, nil},
		{"honest Patroni: a replica outside the run is down", []Member{patP("stopped", row1), s1},
			[]string{`Patroni member "s2" (replica)`},
			[]string{`Patroni member "s2" ("replica") is "stopped"`, `replication slot "s2" on p has no standby streaming through it`}},
		// Not streaming, its claim moves s2 from one hold to another
		// (Waiting, checked below): it lets nothing through.
		{"a host naming itself after the replica that is down", []Member{patP("stopped", row1), s1, evil},
			nil,
			[]string{`replication slot "s2" on p has no standby streaming through it`}},
		// s1's sender is named s1: its claim to be s2 is not believed.
		{"a streaming standby naming itself after another member", []Member{patP("stopped", row1),
			at("s1", streaming("10.0.0.1:5432", pat("s2", list("running")...)), "10.0.0.2")},
			[]string{`Patroni member "s1" (replica)`, `Patroni member "s2" (replica)`},
			[]string{`Patroni member "s2" ("replica") is "stopped"`, `replication slot "s2" on p has no standby streaming through it`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Group(tc.members).ClusterOf("p")
			if !reflect.DeepEqual(c.Outside, tc.outside) || !reflect.DeepEqual(c.NotStreaming, tc.notStreaming) {
				t.Errorf("outside %q, not streaming %q\nwant %q, %q (%s)", c.Outside, c.NotStreaming, tc.outside, tc.notStreaming, c)
			}
			if want := strings.Contains(tc.name, "naming itself after the replica that is down"); want != (len(c.Waiting) > 0) || (want && !c.HoldsEveryMember()) {
				t.Errorf("waiting %q, holds every member %t (%s)", c.Waiting, c.HoldsEveryMember(), c)
			}
		})
	}
}

// TestSpoofedServerDropsNoPrimary: Server (host name, data directory,
// port) is the host's word. A host listed before the primary that claimed
// the primary's identifier and server made Group drop the real primary as
// "another name" for it: no cluster, so no hold for its outside standby.
// Two names are one server only when the controller resolved them to a
// shared address.
func TestSpoofedServerDropsNoPrimary(t *testing.T) {
	p := Member{Host: "db1", Server: "pm:/var/lib/pg:5432", Machine: "pm", Addrs: []string{"10.0.0.1"}, Topo: primary("42", 1)}
	p.Topo.Standbys[0].Addr = "10.0.0.2"
	evil := Member{Host: "app1", Server: p.Server, Machine: "pm", Addrs: []string{"10.6.6.6"},
		Topo: &facts.Topology{Role: "standby", SystemID: "42"}}
	c := Group([]Member{evil, p}).ClusterOf("db1")
	if c == nil || c.Primary != "db1" || len(c.Outside) == 0 {
		t.Fatalf("the real primary's cluster after app1's claim: %v", c)
	}
	// An honest second name of the primary (same address) is still one
	// server.
	alias := p
	alias.Host = "db1-alias"
	c = Group([]Member{p, alias}).ClusterOf("db1")
	if c == nil || c.Split() || strings.Contains(c.String(), "db1-alias") {
		t.Errorf("a second name of one server: %v", c)
	}
}

// TestPatroniNameAsPostgresShowsIt: PostgreSQL shows a Patroni member's
// name as application_name in printable ASCII ('?' per other byte before
// 16, \xNN from 16), cut to 63 bytes. Compared with the raw name, an
// honest member "nöde2" of the run was listed outside it, and its
// primary refused.
func TestPatroniNameAsPostgresShowsIt(t *testing.T) {
	long := strings.Repeat("n", 62) + "é"
	for _, tc := range []struct{ name, row string }{
		{"nöde2", "n??de2"},
		{"nöde2", `n\xc3\xb6de2`},
		{long, strings.Repeat("n", 62) + "?"},
	} {
		t.Run(tc.row, func(t *testing.T) {
			list := []facts.PatroniMember{{Name: "n1", Role: "leader", State: "running", Host: "10.0.0.1"}, {Name: tc.name, Role: "replica", State: "streaming", Host: "10.0.0.2"}}
			p := Member{Host: "p", Machine: "p", Addrs: []string{"10.0.0.1"}, Topo: &facts.Topology{Role: "primary", SystemID: "1",
				Standbys: []facts.StandbyInfo{{Name: tc.row, Addr: "10.0.0.2"}}, Patroni: &facts.Patroni{Scope: "demo", Name: "n1", Members: list}}}
			s := Member{Host: "s", Machine: "s", Addrs: []string{"10.0.0.2"}, Topo: &facts.Topology{Role: "standby", SystemID: "1",
				Receiver: "streaming", Upstream: "10.0.0.1:5432", Patroni: &facts.Patroni{Scope: "demo", Name: tc.name, Members: list}}}
			c := Group([]Member{p, s}).ClusterOf("p")
			if len(c.Outside) != 0 || len(c.NotStreaming) != 0 || len(c.Unverified) != 0 {
				t.Errorf("a member of the run held: %s", c)
			}
		})
	}
}

// TestPatroniNameTiedToHost: a standby's Patroni name stands for a member
// of the run only where the primary's Patroni lists that member (its
// GET /cluster host) at an address or name the controller knows the
// standby by, or at a DNS name the controller resolved to one of its
// addresses. A real streaming standby that is no Patroni member, its
// application_name set to a down member's, hid that member (no slots to
// tell of it) and its primary was restarted. A claim refused is named
// once, as unverified, not also as a member outside the run.
func TestPatroniNameTiedToHost(t *testing.T) {
	pat := func(name string, members ...facts.PatroniMember) *facts.Patroni {
		return &facts.Patroni{Scope: "demo", Name: name, Members: members}
	}
	list := func(s2host string) []facts.PatroniMember {
		return []facts.PatroniMember{{Name: "n1", Role: "leader", State: "running", Host: "10.0.0.1"},
			{Name: "s2", Role: "replica", State: "stopped", Host: s2host}}
	}
	primaryAt := func(s2host, sender, machine string) Member {
		return Member{Host: "p", Machine: machine, Addrs: []string{"10.0.0.1"}, Topo: &facts.Topology{Role: "primary", SystemID: "1",
			Standbys: []facts.StandbyInfo{{Name: "s2", Addr: sender}}, Patroni: pat("n1", list(s2host)...)}}
	}
	resolving := func(m Member, name string, r Resolved) Member {
		m.PatroniHosts = map[string]Resolved{name: r}
		return m
	}
	claimant := func(host, machine string, addrs, names []string) Member {
		return Member{Host: host, Machine: machine, Addrs: addrs, Names: names, Topo: &facts.Topology{Role: "standby", SystemID: "1",
			Receiver: "streaming", Upstream: "10.0.0.1:5432", Patroni: pat("s2")}}
	}
	down := []string{`Patroni member "s2" ("replica") is "stopped"`}
	const advice = `: if s2 is that member, set pgtune_replication_host on it to the host its postgresql.connect_address names`
	for _, tc := range []struct {
		name       string
		members    []Member
		notStream  []string
		unverified string
		lookups    []string
	}{
		{"a real standby under a down member's name", []Member{primaryAt("10.0.0.3", "10.0.0.9", "p"),
			claimant("evil", "evil", []string{"10.0.0.9"}, []string{"evil.example"})}, down,
			`evil says it is Patroni member "s2", but the primary's Patroni lists that member at "10.0.0.3", which is none of the addresses or names the controller knows evil by (10.0.0.9; names evil.example): if evil is that member, set pgtune_replication_host on it to the host its postgresql.connect_address names`, nil},
		{"the member listed with no host", []Member{primaryAt("", "10.0.0.3", "p"),
			claimant("s2", "s2", []string{"10.0.0.3"}, []string{"10.0.0.3"})}, down,
			`s2 says it is Patroni member "s2", but the primary's Patroni lists that member at no host (Patroni lists none for a member whose key in the DCS holds no postgresql.connect_address yet, as for a member still starting: run again once patronictl list shows its host), which is none of the addresses or names the controller knows s2 by (10.0.0.3; no names)` + advice, nil},
		{"the member listed at its address", []Member{primaryAt("10.0.0.3", "10.0.0.3", "p"),
			claimant("s2", "s2", []string{"10.0.0.3"}, []string{"db2"})}, nil, "", nil},
		{"the member listed by the name the inventory gives", []Member{primaryAt("DB2.example.", "10.0.0.3", "p"),
			claimant("s2", "s2", []string{"10.0.0.3"}, []string{"db2.example"})}, nil, "", nil},
		{"the member listed at localhost, on the primary's machine", []Member{primaryAt("localhost", "local", "m"),
			claimant("s2", "m", []string{"10.0.0.1"}, []string{"db1"})}, nil, "", nil},
		{"the member listed at loopback, on another machine", []Member{primaryAt("127.0.0.1", "10.0.0.3", "m"),
			claimant("s2", "s2", []string{"10.0.0.3"}, []string{"db2"})}, down,
			`s2 says it is Patroni member "s2", but the primary's Patroni lists that member at "127.0.0.1", which is none of the addresses or names the controller knows s2 by (10.0.0.3; names db2)` + advice, nil},
		{"a name the inventory does not use, not resolved yet", []Member{primaryAt("db2.example.com", "10.0.0.3", "p"),
			claimant("s2", "s2", []string{"10.0.0.3"}, []string{"db2"})}, down,
			`s2 says it is Patroni member "s2", but the primary's Patroni lists that member at "db2.example.com", which is none of the addresses or names the controller knows s2 by (10.0.0.3; names db2)` + advice,
			[]string{"db2.example.com"}},
		{"a name the controller resolves to the standby's address", []Member{
			resolving(primaryAt("db2.example.com", "10.0.0.3", "p"), "db2.example.com", Resolved{Addrs: []string{"10.0.0.7", "10.0.0.3"}}),
			claimant("s2", "s2", []string{"10.0.0.3"}, []string{"db2"})}, nil, "", nil},
		{"a name the controller resolves elsewhere", []Member{
			resolving(primaryAt("db2.example.com", "10.0.0.3", "p"), "db2.example.com", Resolved{Addrs: []string{"10.0.0.7"}}),
			claimant("s2", "s2", []string{"10.0.0.3"}, []string{"db2"})}, down,
			`s2 says it is Patroni member "s2", but the primary's Patroni lists that member at "db2.example.com" (resolved on the controller to 10.0.0.7), which is none of the addresses or names the controller knows s2 by (10.0.0.3; names db2)` + advice, nil},
		{"a name the controller resolves to loopback, on another machine", []Member{
			resolving(primaryAt("db2.example.com", "10.0.0.3", "m"), "db2.example.com", Resolved{Addrs: []string{"127.0.0.1"}}),
			claimant("s2", "s2", []string{"10.0.0.3"}, []string{"db2"})}, down,
			`s2 says it is Patroni member "s2", but the primary's Patroni lists that member at "db2.example.com" (resolved on the controller to 127.0.0.1), which is none of the addresses or names the controller knows s2 by (10.0.0.3; names db2)` + advice, nil},
		{"a name that does not resolve", []Member{
			resolving(primaryAt("db2.example.com", "10.0.0.3", "p"), "db2.example.com", Resolved{Err: "lookup db2.example.com on 10.0.0.53:53: no such host"}),
			claimant("s2", "s2", []string{"10.0.0.3"}, []string{"db2"})}, down,
			`s2 says it is Patroni member "s2", but the primary's Patroni lists that member at "db2.example.com" (it does not resolve on the controller: lookup db2.example.com on 10.0.0.53:53: no such host), which is none of the addresses or names the controller knows s2 by (10.0.0.3; names db2)` + advice, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := Group(tc.members)
			c := l.ClusterOf("p")
			if len(c.Outside) > 0 || !reflect.DeepEqual(c.NotStreaming, tc.notStream) {
				t.Errorf("outside %q, not streaming %q\nwant none, %q (%s)", c.Outside, c.NotStreaming, tc.notStream, c)
			}
			if got := strings.Join(c.Unverified, "; "); got != tc.unverified {
				t.Errorf("unverified\n got %q\nwant %q", got, tc.unverified)
			}
			if got := c.Incomplete(); got != (tc.unverified != "") {
				t.Errorf("incomplete %t, want %t", got, tc.unverified != "")
			}
			if got := l.PatroniLookups()["p"]; !slices.Equal(got, tc.lookups) {
				t.Errorf("lookups %q, want %q", got, tc.lookups)
			}
		})
	}
}

// TestPatroniLookupsOnlyWhatATieNeeds: the controller resolves only the
// names on the primary's Patroni list that a standby of the run needs
// (it says it is that member, its WAL sender bears the name, and no name
// the inventory gives it is the one listed): not every member's host, not
// a name a standby gives (its upstream), not a standby's list.
func TestPatroniLookupsOnlyWhatATieNeeds(t *testing.T) {
	list := []facts.PatroniMember{{Name: "n1", Role: "leader", State: "running", Host: "db1.example.com"},
		{Name: "s2", Role: "replica", State: "streaming", Host: "db2.example.com"},
		{Name: "s3", Role: "replica", State: "streaming", Host: "db3.example.com"},
		{Name: "s4", Role: "replica", State: "streaming", Host: "db4.example.com"},
		{Name: "s5", Role: "replica", State: "streaming", Host: "db5"}}
	p := Member{Host: "db1", Machine: "db1", Addrs: []string{"10.0.0.1"}, Names: []string{"db1"}, Topo: &facts.Topology{Role: "primary", SystemID: "1",
		Standbys: []facts.StandbyInfo{{Name: "s2", Addr: "10.0.0.2"}, {Name: "other", Addr: "10.0.0.4"}, {Name: "s5", Addr: "10.0.0.5"}},
		Patroni:  &facts.Patroni{Scope: "demo", Name: "n1", Members: list}}}
	standby := func(host, addr, name string) Member {
		return Member{Host: host, Machine: host, Addrs: []string{addr}, Names: []string{host}, Topo: &facts.Topology{Role: "standby", SystemID: "1",
			Receiver: "streaming", Upstream: "upstream.example.com:5432",
			Patroni: &facts.Patroni{Scope: "demo", Name: name, Members: []facts.PatroniMember{{Name: name, Host: "standby-says.example.com"}}}}}
	}
	l := Group([]Member{p,
		standby("db2", "10.0.0.2", "s2"), // needs db2.example.com
		standby("db4", "10.0.0.4", "s4"), // its sender is "other": no tie to try
		standby("db5", "10.0.0.5", "s5"), // listed by its inventory name
	})
	if got, want := l.PatroniLookups(), map[string][]string{"db1": {"db2.example.com"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("lookups %q, want %q", got, want)
	}
}

// TestPatroniMemberOfTheRunNotStreaming: a Patroni replica of the run
// that does not stream when its facts are read has no WAL sender to vouch
// for its name. It was reported as a member outside the run (or one the
// run has no facts of), and the operator went looking for a host the run
// includes. It is named as a member of the run that is not streaming,
// and still holds the cluster.
func TestPatroniMemberOfTheRunNotStreaming(t *testing.T) {
	pat := func(name, n2state string) *facts.Patroni {
		return &facts.Patroni{Scope: "demo", Name: name, Members: []facts.PatroniMember{
			{Name: "n1", Role: "leader", State: "running", Host: "10.0.0.1"}, {Name: "n2", Role: "replica", State: n2state, Host: "10.0.0.2"}}}
	}
	for _, tc := range []struct {
		name, n2state string
		n2            *facts.Topology
		want          string
	}{
		{"reconnecting", "streaming", &facts.Topology{Role: "standby", SystemID: "1", Receiver: "waiting", Upstream: "10.0.0.1:5432"},
			`h2, which says it is Patroni member "n2", is not streaming (WAL receiver "waiting"; the primary's Patroni reports it "streaming")`},
		{"no receiver, Patroni starting it", "starting", &facts.Topology{Role: "standby", SystemID: "1"},
			`h2, which says it is Patroni member "n2", is not streaming (no WAL receiver; the primary's Patroni reports it "starting")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.n2.Patroni = pat("n2", tc.n2state)
			c := Group([]Member{
				{Host: "h1", Machine: "m1", Addrs: []string{"10.0.0.1"}, Reach: []string{"10.0.0.1:5432"}, Topo: &facts.Topology{Role: "primary", SystemID: "1", Patroni: pat("n1", tc.n2state)}},
				{Host: "h2", Machine: "m2", Addrs: []string{"10.0.0.2"}, Topo: tc.n2},
			}).ClusterOf("h1")
			if len(c.Outside) != 0 || len(c.NotStreaming) != 0 || !reflect.DeepEqual(c.Waiting, []string{tc.want}) || !c.Replicated() {
				t.Errorf("outside %q, not streaming %q, waiting %q\nwant waiting %q (%s)", c.Outside, c.NotStreaming, c.Waiting, tc.want, c)
			}
			if c.HoldsEveryMember() != (tc.n2state != "streaming") {
				t.Errorf("holds every member %t, with n2 %q", c.HoldsEveryMember(), tc.n2state)
			}
			if !strings.Contains(c.String(), "; members of this run not streaming: "+tc.want) {
				t.Errorf("String() = %q", c)
			}
		})
	}
}

// TestUnlinkedStandbyNamesWhoTookItsSender: a standby whose upstream is
// no member of the run is tried against the primary's senders; when the
// one its address fits is another host's, the reason names that host,
// not "no WAL sender at its address" (there is one).
func TestUnlinkedStandbyNamesWhoTookItsSender(t *testing.T) {
	p := Member{Host: "p", Machine: "p", Addrs: []string{"10.0.0.1"}, Reach: []string{"10.0.0.1:5432"}, Topo: &facts.Topology{Role: "primary", SystemID: "1",
		Standbys: []facts.StandbyInfo{{Name: "s1", Addr: "10.0.0.2"}}}}
	sb := func(host, upstream string) Member {
		return Member{Host: host, Machine: "m2", Addrs: []string{"10.0.0.2"}, Topo: &facts.Topology{Role: "standby", SystemID: "1",
			Receiver: "streaming", Upstream: upstream, ClusterName: host}}
	}
	for _, tc := range []struct {
		name    string
		members []Member
		want    string
	}{
		{"its sender taken by a linked standby", []Member{p, sb("s1", "10.0.0.1:5432"), sb("c1", "192.168.9.9:5432")},
			`c1 says it streams from upstream "192.168.9.9:5432", which matches no member of the run, and the WAL senders of the primary p at an address the controller knows c1 by (10.0.0.2) are claimed by s1: more members claim them than p serves`},
		{"its sender taken by another unlinked standby", []Member{p, sb("s1", ""), sb("c1", "192.168.9.9:5432")},
			`c1 says it streams from upstream "192.168.9.9:5432", which matches no member of the run, and the WAL senders of the primary p at an address the controller knows c1 by (10.0.0.2) are claimed by s1: more members claim them than p serves`},
		{"no sender at its address", []Member{p, sb("c1", "192.168.9.9:5432"), {Host: "c2", Machine: "m3", Addrs: []string{"10.0.0.3"},
			Topo: &facts.Topology{Role: "standby", SystemID: "1", Receiver: "streaming", Upstream: "192.168.9.9:5432"}}},
			`c2 says it streams from upstream "192.168.9.9:5432", which matches no member of the run, and no WAL sender of the primary p is to an address the controller knows c2 by (10.0.0.3)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Group(tc.members).ClusterOf("p")
			if got := strings.Join(c.Unverified, "; "); got != tc.want {
				t.Errorf("unverified\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestColocatedClaimantTakesNoSender: a hostile server of the run on the
// machine (the address) of an honest standby outside the run claims that
// standby's WAL sender. The address fits both; the connection is the
// honest standby's, and the claimant's kernel shows no WAL receiver
// holding it: the claimant gets no sender, the cluster is unverified, the
// honest standby stays outside the run. The claimant holding the
// connection's end, or a sender read without ports (as a switchover
// re-reads them), ties as before.
func TestColocatedClaimantTakesNoSender(t *testing.T) {
	conn := func(local string) facts.Conn {
		return facts.Conn{Local: netip.MustParseAddrPort(local), Remote: netip.MustParseAddrPort("10.0.0.1:5432")}
	}
	// The claimant's upstream is the primary as the run reaches it
	// (Match), or an address no member has (tried against the
	// primary's senders all the same).
	for _, reach := range [][]string{{"10.0.0.1:5432"}, nil} {
		prim := func(port int) Member {
			p := &facts.Topology{Role: "primary", SystemID: "42", Standbys: []facts.StandbyInfo{{Name: "walreceiver", Addr: "10.0.0.2", Port: port, State: "streaming"}}}
			return Member{Host: "p", Topo: p, Machine: "p", Addrs: []string{"10.0.0.1"}, Reach: reach, Port: 5432}
		}
		colocated(t, reach != nil, prim, conn)
	}
}

func shared(c facts.Conn, ports ...int) facts.Conn {
	c.SharedPorts = ports
	return c
}

func colocated(t *testing.T, linked bool, prim func(int) Member, conn func(string) facts.Conn) {
	claimant := func(read bool, conns ...facts.Conn) Member {
		return Member{Host: "evil", Topo: standby("42"), Machine: "m2", Addrs: []string{"10.0.0.2"}, Receiver: conns, ReceiverRead: read}
	}
	for _, tc := range []struct {
		name     string
		members  []Member
		verified bool
		why      string
	}{
		{"the honest standby's connection, not the claimant's", []Member{prim(45678), claimant(true, conn("10.0.0.2:45679"))}, false, "no WAL receiver connection of its holds 10.0.0.2:45678"},
		{"the same port on another address of the machine", []Member{prim(45678), claimant(true, conn("192.168.0.2:45678"))}, false, "no WAL receiver connection of its holds 10.0.0.2:45678"},
		{"no receiver connection read", []Member{prim(45678), claimant(false)}, false, "could not be read"},
		{"no receiver connection in its namespace", []Member{prim(45678), claimant(true)}, false, "shows no WAL receiver connection of its own"},
		{"a port PostgreSQL never reports", []Member{prim(-1), claimant(true, conn("10.0.0.2:45678"))}, false, "shows no client port"},
		{"its own connection", []Member{prim(45678), claimant(true, conn("10.0.0.2:45678"))}, true, ""},
		{"its own connection, its local end shared towards another port", []Member{prim(45678), claimant(true, shared(conn("10.0.0.2:45678"), 80))}, true, ""},
		{"its local end shared towards the upstream's port", []Member{prim(45678), claimant(true, shared(conn("10.0.0.2:45678"), 5432))}, false, "shares that end with another connection to port 5432"},
		{"its local end shared more than listed", []Member{prim(45678), claimant(true, shared(conn("10.0.0.2:45678"), -1))}, false, "or was itself translated"},
		{"its connection to another port", []Member{prim(45678), claimant(true, facts.Conn{Local: netip.MustParseAddrPort("10.0.0.2:45678"), Remote: netip.MustParseAddrPort("10.0.0.9:5433")})}, false, "goes to port 5433, not to the upstream's port 5432"},
		{"its own connection, IPv4-mapped", []Member{prim(45678), claimant(true, facts.Conn{Local: netip.MustParseAddrPort("[::ffff:10.0.0.2]:45678"), Remote: netip.MustParseAddrPort("[::ffff:10.0.0.1]:5432")})}, true, ""},
		{"senders read without ports", []Member{prim(0), claimant(false)}, true, ""},
	} {
		t.Run(fmt.Sprintf("%s, linked %v", tc.name, linked), func(t *testing.T) {
			c := Group(tc.members).ClusterOf("p")
			if tc.verified {
				if len(c.Unverified) > 0 || len(c.Outside) > 0 {
					t.Fatalf("not verified: %s (unverified %q)", c, c.Unverified)
				}
				return
			}
			if len(c.Unverified) != 1 || !strings.Contains(c.Unverified[0], tc.why) {
				t.Fatalf("unverified %q; want one reason saying %q", c.Unverified, tc.why)
			}
			if len(c.Outside) == 0 {
				t.Fatalf("the honest standby's sender is not outside the run: %s", c)
			}
			own := Own(tc.members[0], tc.members[1], -1)
			if len(own) != 0 {
				t.Fatalf("Own gives the claimant senders %v", own)
			}
		})
	}
}

// TestUnixSocketSenderTiedByPeer: a WAL sender over a unix socket (a
// standby on the primary's own machine) fits any server there that is
// reached at the primary's address. It is a claimant's only when the
// other end of the sender's socket, as the primary's machine lists it, is
// a socket the claimant's WAL receiver holds: a hostile server of the run
// there does not get the sender of an honest standby outside the run.
func TestUnixSocketSenderTiedByPeer(t *testing.T) {
	prim := func(row facts.StandbyInfo) Member {
		p := &facts.Topology{Role: "primary", SystemID: "42", Standbys: []facts.StandbyInfo{row}}
		return Member{Host: "p", Topo: p, Machine: "m", Addrs: []string{"10.0.0.1"}, Reach: []string{"/run/postgresql:5432"}, Port: 5432}
	}
	row := func(read bool, note string, peers ...uint64) facts.StandbyInfo {
		return facts.StandbyInfo{Name: "walreceiver", Addr: "local", Port: -1, PID: 77, State: "streaming", PeersRead: read, PeersNote: note, Peers: peers}
	}
	claimant := func(read bool, socks ...uint64) Member {
		return Member{Host: "s", Topo: &facts.Topology{Role: "standby", SystemID: "42", Upstream: "/run/postgresql:5432", Receiver: "streaming"},
			Machine: "m", Addrs: []string{"10.0.0.1"}, ReceiverRead: read, ReceiverSockets: socks, Port: 5433}
	}
	for _, tc := range []struct {
		name     string
		row      facts.StandbyInfo
		claimant Member
		why      string // "": verified
	}{
		{"its receiver holds the other end", row(true, "", 9001), claimant(true, 17, 9001), ""},
		{"one of the sender's peers", row(true, "", 5, 9001), claimant(true, 9001), ""},
		{"another socket: the honest standby's is outside the run", row(true, "", 9001), claimant(true, 9002), "no WAL receiver socket of its is the other end of that sender's unix socket (peer inode 9001)"},
		{"its receiver holds no socket", row(true, "", 9001), claimant(true), "no WAL receiver socket of its"},
		{"its receiver not read", row(true, "", 9001), claimant(false, 9001), "its WAL receiver connections could not be read"},
		{"the sender not read", row(false, ""), claimant(true, 9001), "could not be read to tie it (read as the cluster owner"},
		{"no ss on the primary's machine", row(true, "no ss there"), claimant(true, 9001), "no ss there"},
		{"no peer listed", row(true, ""), claimant(true, 9001), "has no socket peer to tie it by"},
		{"a row built without a port ties by address (no read gives one)", facts.StandbyInfo{Name: "walreceiver", Addr: "local", State: "streaming"}, claimant(false), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := []Member{prim(tc.row), tc.claimant}
			c := Group(ms).ClusterOf("p")
			if tc.why == "" {
				if len(c.Unverified) > 0 || len(c.Outside) > 0 {
					t.Fatalf("not verified: %s (unverified %q)", c, c.Unverified)
				}
				if own := Own(ms[0], ms[1], -1); len(own) != 1 {
					t.Fatalf("Own gives the claimant %v; want its sender", own)
				}
				return
			}
			if len(c.Unverified) != 1 || !strings.Contains(c.Unverified[0], tc.why) {
				t.Fatalf("unverified %q; want one reason saying %q", c.Unverified, tc.why)
			}
			if len(c.Outside) == 0 {
				t.Fatalf("the sender is not outside the run: %s", c)
			}
			if own := Own(ms[0], ms[1], -1); len(own) != 0 {
				t.Fatalf("Own gives the claimant senders %v", own)
			}
		})
	}
}
