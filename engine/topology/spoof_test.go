package topology

import (
	"reflect"
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
