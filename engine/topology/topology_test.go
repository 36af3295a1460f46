package topology

import (
	"reflect"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/facts"
)

func primary(id string, standbys int) *facts.Topology {
	t := &facts.Topology{Role: "primary", SystemID: id}
	for i := 0; i < standbys; i++ {
		t.Standbys = append(t.Standbys, facts.StandbyInfo{Name: "s", Addr: "local", State: "streaming"})
	}
	return t
}

// oneMachine puts members without addresses on one machine, reached at
// one address, as the e2e clusters are: the primary's WAL senders to
// unix-socket clients (primary's rows, "local") are theirs to take.
func oneMachine(ms []Member) []Member {
	out := append([]Member(nil), ms...)
	for i := range out {
		if out[i].Addrs == nil {
			out[i].Addrs = []string{"127.0.0.1"}
		}
	}
	return out
}

func standby(id string) *facts.Topology {
	return &facts.Topology{Role: "standby", SystemID: id, Upstream: "10.0.0.1:5432", Receiver: "streaming"}
}

func fleet() []Member {
	return oneMachine([]Member{
		{Host: "a-primary", Topo: primary("1", 2)},
		{Host: "a-s2", Topo: standby("1")},
		{Host: "lone", Topo: primary("3", 0)},
		{Host: "a-s1", Topo: standby("1")},
		{Host: "b-primary", Topo: primary("2", 1)},
		{Host: "b-s1", Topo: standby("2")},
		{Host: "stopped", Topo: nil},
	})
}

func TestGroup(t *testing.T) {
	l := Group(fleet())
	var got []string
	for _, c := range l.Clusters {
		got = append(got, c.String())
	}
	want := []string{
		"cluster 1: primary a-primary, standbys a-s1, a-s2",
		"cluster 2: primary b-primary, standbys b-s1",
		"cluster 3: primary lone",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("clusters:\n got %q\nwant %q", got, want)
	}
	if l.ClusterOf("stopped") != nil || !l.IsPrimary("a-primary") || l.IsPrimary("lone") || l.IsPrimary("a-s1") {
		t.Error("ClusterOf/IsPrimary wrong")
	}
}

func TestGroupOutside(t *testing.T) {
	patroni := func(role, name string) *facts.Topology {
		t := &facts.Topology{Role: role, SystemID: "9", Patroni: &facts.Patroni{Scope: "demo", Name: name,
			Members: []facts.PatroniMember{{Name: "n1", Role: "leader", State: "running", Host: "127.0.0.1"}, {Name: "n2", Role: "replica", State: "streaming", Host: "127.0.0.1"}, {Name: "n3", Role: "replica", State: "running", Host: "127.0.0.1"}}}}
		if role == "primary" { // n2 streams from it, as Patroni names it
			t.Standbys = []facts.StandbyInfo{{Name: "n2", Addr: "local", State: "streaming"}}
		} else {
			t.Receiver = "streaming"
		}
		return t
	}
	for _, tc := range []struct {
		name    string
		members []Member
		want    string
	}{
		{"a standby left out", []Member{{Host: "p", Topo: primary("1", 2)}, {Host: "s1", Topo: standby("1")}}, "cluster 1: primary p, standbys s1; outside this run: 1 standby(s) the primary streams to"},
		{"the primary left out", []Member{{Host: "s1", Topo: standby("1")}, {Host: "s2", Topo: standby("1")}}, "cluster 1: primary not in this run, standbys s1, s2; outside this run: the primary (upstream 10.0.0.1:5432)"},
		{"one server under two names", []Member{{Host: "p", Topo: primary("1", 0), Server: "m:/d:5432"}, {Host: "q", Topo: primary("1", 0), Server: "m:/d:5432"}}, "cluster 1: primary p"},
		// Neither is demoted to a standby on the other's word.
		{"two primaries", []Member{{Host: "p", Topo: primary("1", 0)}, {Host: "q", Topo: primary("1", 0)}}, "cluster 1: primary p; also saying they are its primary: q; outside this run: 2 servers of this cluster say they are primary"},
		{"Patroni names who is missing", []Member{{Host: "h1", Topo: patroni("primary", "n1")}, {Host: "h2", Topo: patroni("standby", "n2")}},
			`cluster 9 (Patroni scope "demo"): primary h1, standbys h2; outside this run: Patroni member "n3" (replica)`},
		{"all in", []Member{{Host: "p", Topo: primary("1", 1)}, {Host: "s1", Topo: standby("1")}}, "cluster 1: primary p, standbys s1"},
		// A lone server left down (an interrupted restart): nothing
		// outside; down in recovery, its primary is outside.
		{"a lone server down", []Member{{Host: "db", Topo: &facts.Topology{Role: facts.RoleStopped, SystemID: "1"}}}, "cluster 1: primary not in this run, standbys db"},
		{"a standby down alone", []Member{{Host: "db", Topo: &facts.Topology{Role: facts.RoleStopped, SystemID: "1", StoppedStandby: true}}}, "cluster 1: primary not in this run, standbys db; outside this run: the primary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := Group(oneMachine(tc.members))
			if strings.Contains(tc.name, "lone server down") && l.Clusters[0].Replicated() {
				t.Error("a lone server down counts as replicated: its rollout would stop")
			}
			if len(l.Clusters) != 1 || l.Clusters[0].String() != tc.want {
				var got []string
				for _, c := range l.Clusters {
					got = append(got, c.String())
				}
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestWavesAndSort(t *testing.T) {
	l := Group(fleet())
	names := []string{"a-primary", "a-s2", "lone", "a-s1", "b-primary", "b-s1", "stopped", "unknown"}
	id := func(s string) string { return s }
	got := Waves(l, names, id)
	want := [][]string{{"lone", "a-s1", "b-s1", "stopped", "unknown"}, {"a-s2", "b-primary"}, {"a-primary"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Waves = %q, want %q", got, want)
	}
	// A batch holding part of a cluster: its members still go one by one,
	// standbys first.
	got = Waves(l, []string{"a-primary", "a-s2"}, id)
	if want := [][]string{{"a-s2"}, {"a-primary"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Waves(part) = %q, want %q", got, want)
	}
	for _, w := range Waves(l, names, id) {
		seen := map[*Cluster]bool{}
		for _, h := range w {
			if c := l.ClusterOf(h); c != nil && c.Replicated() {
				if seen[c] {
					t.Errorf("wave %q holds two members of %s", w, c)
				}
				seen[c] = true
			}
		}
	}
	sorted := Sort(l, names, id)
	if want := []string{"a-s2", "a-s1", "b-s1", "lone", "stopped", "unknown", "a-primary", "b-primary"}; !reflect.DeepEqual(sorted, want) {
		t.Errorf("Sort = %q, want %q", sorted, want)
	}
	if s := strings.Join(names, ","); s != "a-primary,a-s2,lone,a-s1,b-primary,b-s1,stopped,unknown" {
		t.Errorf("Sort changed its input: %s", s)
	}
}

// TestCascadeOrder: a standby streaming from another standby is restarted
// before it (leaves first), however deep the chain, and String says who
// streams from whom.
func TestCascadeOrder(t *testing.T) {
	on := func(upstream string) *facts.Topology {
		return &facts.Topology{Role: "standby", SystemID: "1", Upstream: upstream, Receiver: "streaming"}
	}
	member := func(host string, topo *facts.Topology, port int) Member {
		return Member{Host: host, Topo: topo, Machine: "m", Addrs: []string{"127.0.0.1"}, Reach: []string{Reach("m", "/run/pg"+host, port), Reach("m", "localhost", port), Reach("m", "db-"+host, port)}}
	}
	for _, tc := range []struct {
		name    string
		members []Member
		order   []string
		desc    string
	}{
		{"chain by socket", []Member{
			member("p", primary("1", 1), 5432),
			member("a1", on("/run/pgp:5432"), 5433),
			member("b2", on("/run/pga1:5433"), 5434),
		}, []string{"b2", "a1", "p"}, "cluster 1: primary p, standbys b2, a1 (b2 streams from a1)"},
		{"chain of three by loopback and name", []Member{
			member("p", primary("1", 1), 5432),
			member("s1", on("127.0.0.1:5432"), 5433),
			member("s2", on("db-s1:5433"), 5434),
			member("s3", on("[::1]:5434"), 5435),
		}, []string{"s3", "s2", "s1", "p"}, "cluster 1: primary p, standbys s3, s2, s1 (s3 streams from s2, s2 streams from s1)"},
		{"tree: a leaf of the primary keeps name order", []Member{
			member("p", primary("1", 2), 5432),
			member("a", on("localhost:5432"), 5433),
			member("b", on("localhost:5433"), 5434),
			member("c", on("localhost:5432"), 5435),
		}, []string{"b", "a", "c", "p"}, "cluster 1: primary p, standbys b, a, c (b streams from a)"},
		{"unknown upstream is a first-level standby", []Member{
			member("p", primary("1", 2), 5432),
			member("s1", on("10.9.9.9:5432"), 5433),
			member("s0", on("localhost:5432"), 5434),
		}, []string{"s0", "s1", "p"}, "cluster 1: primary p, standbys s0, s1"},
		{"a loop does not hang", []Member{
			member("p", primary("1", 0), 5432),
			member("x", on("localhost:5434"), 5433),
			member("y", on("localhost:5433"), 5434),
		}, []string{"x", "y", "p"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := Group(tc.members)
			c := l.ClusterOf("p")
			if got := c.Members(); !reflect.DeepEqual(got, tc.order) {
				t.Errorf("Members() = %q, want %q", got, tc.order)
			}
			if tc.desc != "" && !strings.HasPrefix(c.String(), tc.desc) {
				t.Errorf("String() = %q, want %q", c.String(), tc.desc)
			}
			rev := append([]string(nil), tc.order...)
			for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
				rev[i], rev[j] = rev[j], rev[i]
			}
			sorted := Sort(l, rev, func(s string) string { return s })
			at := map[string]int{}
			for i, h := range sorted {
				at[h] = i
			}
			for down, up := range c.Upstreams {
				if tc.desc != "" && at[down] > at[up] {
					t.Errorf("Sort(%q) = %q: %s after its upstream %s", rev, sorted, down, up)
				}
			}
			if sorted[len(sorted)-1] != "p" {
				t.Errorf("Sort(%q) = %q: the primary is not last", rev, sorted)
			}
			for i, w := range Waves(l, tc.order, func(s string) string { return s }) {
				if len(w) != 1 || w[0] != c.Members()[i] {
					t.Errorf("wave %d = %q, want %q alone", i, w, c.Members()[i])
				}
			}
		})
	}
}

// TestGroupNotStreaming: what the run's members show of a member that is
// not streaming and that the run has no facts of, or does not include.
func TestGroupNotStreaming(t *testing.T) {
	withSlots := func(topo *facts.Topology, idle ...string) *facts.Topology { topo.IdleSlots = idle; return topo }
	slotted := func(topo *facts.Topology, slot string) *facts.Topology { topo.SlotName = slot; return topo }
	lost := func(receiver, upstream string) *facts.Topology {
		return &facts.Topology{Role: "standby", SystemID: "1", Upstream: upstream, Receiver: receiver}
	}
	pat := func(role, name string, states ...string) *facts.Topology {
		p := &facts.Patroni{Scope: "demo", Name: name}
		for i, st := range states {
			p.Members = append(p.Members, facts.PatroniMember{Name: "n" + string(rune('1'+i)), Role: "replica", State: st, Host: "127.0.0.1"})
		}
		return &facts.Topology{Role: role, SystemID: "1", Patroni: p}
	}
	sends := func(topo *facts.Topology, names ...string) *facts.Topology {
		for _, n := range names {
			topo.Standbys = append(topo.Standbys, facts.StandbyInfo{Name: n, Addr: "local", State: "streaming"})
		}
		return topo
	}
	streams := func(topo *facts.Topology) *facts.Topology { topo.Receiver = "streaming"; return topo }
	many := make([]string, 12)
	for i := range many {
		many[i] = "slot_" + string(rune('a'+i))
	}
	for _, tc := range []struct {
		name       string
		members    []Member
		want       []string
		replicated bool
	}{
		{name: "every member streams", members: []Member{{Host: "p", Topo: primary("1", 2)}, {Host: "s1", Topo: standby("1")}, {Host: "s2", Topo: standby("1")}},
			replicated: true},
		{name: "a standby unreachable: its slot idle on the primary",
			members: []Member{{Host: "p", Topo: withSlots(primary("1", 1), "s2")}, {Host: "s1", Topo: slotted(standby("1"), "s1")}},
			want:    []string{`replication slot "s2" on p has no standby streaming through it`}, replicated: true},
		// Its slot idle, the standby does not stream through it: its
		// naming the slot is its own word, not the primary's.
		{name: "the idle slot of a standby of the run",
			members: []Member{{Host: "p", Topo: withSlots(primary("1", 0), "s1"), Reach: []string{"p:5432"}}, {Host: "s1", Topo: slotted(lost("waiting", "p:5432"), "s1")}},
			want:    []string{`replication slot "s1" on p has no standby streaming through it`}, replicated: true},
		{name: "a lone primary whose only standby is down",
			members: []Member{{Host: "p", Topo: withSlots(primary("1", 0), "s1")}},
			want:    []string{`replication slot "s1" on p has no standby streaming through it`}, replicated: true},
		{name: "a lone primary", members: []Member{{Host: "p", Topo: primary("1", 0)}}},
		{name: "a standby's idle slots are no evidence",
			members: []Member{{Host: "p", Topo: primary("1", 1)}, {Host: "s1", Topo: withSlots(standby("1"), "copy")}}, replicated: true},
		{name: "Patroni: a member outside the run not running",
			members: []Member{{Host: "h1", Topo: pat("primary", "n1", "running", "streaming", "stopped", "")}, {Host: "h2", Topo: pat("standby", "n2")}},
			want:    []string{`Patroni member "n3" ("replica") is "stopped"`, `Patroni member "n4" ("replica") reports no state`}, replicated: true},
		{name: "Patroni: a member in archive recovery runs",
			members:    []Member{{Host: "h1", Topo: pat("primary", "n1", "running", "streaming", "in archive recovery")}, {Host: "h2", Topo: pat("standby", "n2")}},
			replicated: true},
		{name: "Patroni: the idle slot kept for a member that is up (cascading from a replica)",
			members: []Member{{Host: "h1", Topo: withSlots(pat("primary", "n1", "running", "streaming", "streaming", "stopped"), "n3", "n4")}, {Host: "h2", Topo: pat("standby", "n2")}},
			want:    []string{`Patroni member "n4" ("replica") is "stopped"`, `replication slot "n4" on h1 has no standby streaming through it`}, replicated: true},
		{name: "Patroni: the run's own members answer for themselves",
			members:    []Member{{Host: "h1", Topo: sends(pat("primary", "n1", "running", "starting"), "n2")}, {Host: "h2", Topo: streams(pat("standby", "n2"))}},
			replicated: true},
		// Its Patroni name is its own word: only a WAL sender of its
		// upstream under that name vouches for it.
		// Not streaming, its Patroni name is not vouched for: it is
		// held as a member of the run not streaming (Waiting), not
		// reported as one the run has no facts of.
		{name: "Patroni: a member of the run its upstream shows no sender to",
			members:    []Member{{Host: "h1", Topo: pat("primary", "n1", "running", "starting")}, {Host: "h2", Topo: pat("standby", "n2")}},
			replicated: true},
		{name: "the primary is down: the standbys lost their upstream",
			members: []Member{{Host: "s1", Topo: lost("", "10.0.0.1:5432")}, {Host: "s2", Topo: lost("waiting", "10.0.0.1:5432")}},
			want: []string{`s1 lost its upstream "10.0.0.1:5432" (no WAL receiver; no member of this run)`,
				`s2 lost its upstream "10.0.0.1:5432" (WAL receiver "waiting"; no member of this run)`}, replicated: true},
		{name: "a standby not streaming from a member of the run",
			members:    []Member{{Host: "p", Topo: primary("1", 0), Reach: []string{"10.0.0.1:5432"}}, {Host: "s1", Topo: lost("waiting", "10.0.0.1:5432")}},
			replicated: true},
		{name: "a standby without an upstream (archive only)", members: []Member{{Host: "p", Topo: primary("1", 0)}, {Host: "s1", Topo: lost("", "")}},
			replicated: true},
		{name: "capped", members: []Member{{Host: "p", Topo: withSlots(primary("1", 0), many...)}}, replicated: true},
		{name: "a host's long name is clipped", members: []Member{{Host: "h1", Topo: &facts.Topology{Role: "primary", SystemID: "1",
			Patroni: &facts.Patroni{Name: "n1", Members: []facts.PatroniMember{{Name: strings.Repeat("é", 40), State: strings.Repeat("x", 100)}}}}}},
			want:       []string{`Patroni member "` + strings.Repeat("é", 32) + `…" is "` + strings.Repeat("x", 64) + `…"`},
			replicated: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := Group(oneMachine(tc.members))
			if len(l.Clusters) != 1 {
				t.Fatalf("%d clusters", len(l.Clusters))
			}
			c := l.Clusters[0]
			if tc.name == "capped" {
				if len(c.NotStreaming) != maxNotStreaming+1 || c.NotStreaming[maxNotStreaming] != "4 more" {
					t.Errorf("not streaming %q, want %d and 4 more", c.NotStreaming, maxNotStreaming)
				}
			} else if !reflect.DeepEqual(c.NotStreaming, tc.want) {
				t.Errorf("not streaming\n got %q\nwant %q", c.NotStreaming, tc.want)
			}
			if c.Replicated() != tc.replicated {
				t.Errorf("replicated %t, want %t (%s)", c.Replicated(), tc.replicated, c)
			}
		})
	}
}

// TestPatroniSlotName: the slot names Patroni gives its members.
func TestPatroniSlotName(t *testing.T) {
	for member, want := range map[string]string{
		"pg-node.1":             "pg_node_1",
		"Node_A":                "node_a",
		"db@1":                  "dbu00641",
		"é":                     "u0233",
		strings.Repeat("a", 70): strings.Repeat("a", 63),
	} {
		if got := PatroniSlotName(member); got != want {
			t.Errorf("PatroniSlotName(%q) = %q, want %q", member, got, want)
		}
	}
}

// TestGroupWALClients: WAL clients that are no standby (facts.Topology's
// Clients) are no members: they make no cluster replicated and are
// nothing outside the run; the cluster names them.
func TestGroupWALClients(t *testing.T) {
	archiver := facts.WALClient{Name: "barman_receive_wal", Addr: "10.0.0.7", State: "streaming", Kind: facts.ClientArchiver}
	logical := facts.WALClient{Name: "debezium", Addr: "local", State: "streaming", Kind: facts.ClientLogical}
	withClients := func(t *facts.Topology, more int, cs ...facts.WALClient) *facts.Topology {
		t.Clients, t.MoreClients = cs, more
		return t
	}
	for _, tc := range []struct {
		name       string
		members    []Member
		want       string
		replicated bool
	}{
		{"a standby and two clients", []Member{{Host: "p", Topo: withClients(primary("1", 1), 0, logical, archiver)}, {Host: "s1", Topo: standby("1")}},
			`cluster 1: primary p, standbys s1; WAL clients of the primary (no members): "debezium" (logical decoding client, from local), "barman_receive_wal" (WAL archiver, from 10.0.0.7)`, true},
		{"a lone primary and its archiver", []Member{{Host: "p", Topo: withClients(primary("1", 0), 0, archiver)}},
			`cluster 1: primary p; WAL clients of the primary (no members): "barman_receive_wal" (WAL archiver, from 10.0.0.7)`, false},
		{"a standby left out beside a client", []Member{{Host: "p", Topo: withClients(primary("1", 2), 3, archiver)}, {Host: "s1", Topo: standby("1")}},
			`cluster 1: primary p, standbys s1; outside this run: 1 standby(s) the primary streams to; WAL clients of the primary (no members): "barman_receive_wal" (WAL archiver, from 10.0.0.7), 3 more`, true},
		{"a standby's clients are not the cluster's", []Member{{Host: "p", Topo: primary("1", 1)}, {Host: "s1", Topo: withClients(standby("1"), 0, archiver)}},
			`cluster 1: primary p, standbys s1`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := Group(oneMachine(tc.members))
			if len(l.Clusters) != 1 {
				t.Fatalf("%d clusters", len(l.Clusters))
			}
			c := l.Clusters[0]
			if got := c.String(); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			if c.Replicated() != tc.replicated || l.IsPrimary("p") != tc.replicated {
				t.Errorf("replicated %t, IsPrimary %t; want %t", c.Replicated(), l.IsPrimary("p"), tc.replicated)
			}
		})
	}
}
