package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/topology"
)

// stubLookup puts fn in lookupHost's place for the test: no test asks
// DNS.
func stubLookup(t *testing.T, fn func(ctx context.Context, name string) ([]string, error)) {
	t.Helper()
	old := lookupHost
	lookupHost = fn
	t.Cleanup(func() { lookupHost = old })
}

// fakeDNS answers from a table, records what was asked, and fails a name
// its first fail[name] times (a DNS blip).
type fakeDNS struct {
	mu    sync.Mutex
	table map[string][]string
	fail  map[string]int
	asked []string
}

func (d *fakeDNS) lookup(_ context.Context, name string) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, name)
	if d.fail[name] > 0 {
		d.fail[name]--
		return nil, fmt.Errorf("lookup %s: server misbehaving", name)
	}
	if a, ok := d.table[name]; ok {
		return a, nil
	}
	return nil, fmt.Errorf("lookup %s: no such host", name)
}

// pairFacts is a primary (pg-p) streaming to one standby (pg-s) at
// 10.0.0.2, both known by name, and n hosts alone in clusters of their
// own (solo-i).
func pairFacts(n int) []HostFacts {
	pg := &facts.Postgres{Port: 5432, SocketDir: "/run/postgresql"}
	hosts := []HostFacts{
		{Name: "p", Address: "pg-p", Facts: &facts.Facts{Hostname: "pm", Postgres: pg, Topology: &facts.Topology{Role: "primary", SystemID: "1",
			Standbys: []facts.StandbyInfo{{Name: "s", Addr: "10.0.0.2", State: "streaming"}}}}},
		{Name: "s", Address: "pg-s", Facts: &facts.Facts{Hostname: "sm", Postgres: pg, Topology: &facts.Topology{Role: "standby", SystemID: "1",
			Upstream: "pg-p:5432", Receiver: "streaming"}}},
	}
	for i := range n {
		name := fmt.Sprintf("solo-%d", i)
		hosts = append(hosts, HostFacts{Name: name, Address: name, ReplicationHost: name + "-repl",
			Facts: &facts.Facts{Hostname: name, Postgres: pg, Topology: &facts.Topology{Role: "primary", SystemID: fmt.Sprint(100 + i)}}})
	}
	return hosts
}

// TestClusterLayoutResolvesOnlySharedClusters: a host alone in its
// cluster is never matched against a WAL sender, so its names are not
// looked up (50 of them serially cost a second on a 20 ms resolver, and
// minutes with a nameserver down).
func TestClusterLayoutResolvesOnlySharedClusters(t *testing.T) {
	dns := &fakeDNS{table: map[string][]string{"pg-p": {"10.0.0.1"}, "pg-s": {"10.0.0.2"}}}
	stubLookup(t, dns.lookup)
	l, notes := ClusterLayout(context.Background(), pairFacts(5), 4)
	slices.Sort(dns.asked)
	if want := []string{"pg-p", "pg-s"}; !slices.Equal(dns.asked, want) {
		t.Errorf("asked DNS for %q, want only %q", dns.asked, want)
	}
	if len(notes) != 0 {
		t.Errorf("notes %q, want none", notes)
	}
	if c := l.ClusterOf("p"); c == nil || len(c.Unverified) != 0 {
		t.Errorf("cluster of p: %v, want the standby verified", c)
	}
}

// TestClusterLayoutAsksAgainAfterAFailure: a lookup that failed is not
// remembered: the next layout (the next run, a resumed rollout) asks
// again, and one DNS blip does not leave a standby unverified for good.
func TestClusterLayoutAsksAgainAfterAFailure(t *testing.T) {
	dns := &fakeDNS{table: map[string][]string{"pg-p": {"10.0.0.1"}, "pg-s": {"10.0.0.2"}}, fail: map[string]int{"pg-s": 1}}
	stubLookup(t, dns.lookup)
	l, notes := ClusterLayout(context.Background(), pairFacts(0), 4)
	if c := l.ClusterOf("p"); c == nil || len(c.Unverified) == 0 || len(notes) != 1 {
		t.Fatalf("with pg-s failing: cluster %v, notes %q; want s unverified and one note", c, notes)
	}
	l, notes = ClusterLayout(context.Background(), pairFacts(0), 4)
	if c := l.ClusterOf("p"); c == nil || len(c.Unverified) != 0 || len(notes) != 0 {
		t.Errorf("after the blip: cluster %v, notes %q; want s verified, no note", c, notes)
	}
}

type ctxKey struct{}

// TestResolveAddrsUnderTheRunsContext: lookups run under the caller's
// context (Ctrl-C cancels them), not one of their own.
func TestResolveAddrsUnderTheRunsContext(t *testing.T) {
	var mu sync.Mutex
	var foreign []string
	stubLookup(t, func(ctx context.Context, name string) ([]string, error) {
		if ctx.Value(ctxKey{}) == nil {
			mu.Lock()
			foreign = append(foreign, name)
			mu.Unlock()
		}
		return []string{"10.0.0.9"}, nil
	})
	ctx := context.WithValue(context.Background(), ctxKey{}, true)
	srcs := []addrSource{{host: "a", route: "a.example", replication: "a-repl.example"}, {host: "b", route: "b.example"}}
	resolveAddrs(ctx, srcs, []bool{true, true}, 2)
	if len(foreign) > 0 {
		t.Errorf("looked up %q under a context not derived from the run's", foreign)
	}

	// A run stopped already asks nothing more and returns at once.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	stubLookup(t, func(ctx context.Context, name string) ([]string, error) {
		<-ctx.Done() // a nameserver that never answers
		return nil, ctx.Err()
	})
	addrs, notes := resolveAddrs(cctx, srcs, []bool{true, true}, 1)
	if len(addrs[0])+len(addrs[1]) != 0 || len(notes[0]) != 2 || !strings.Contains(notes[0][0], "context canceled") {
		t.Errorf("cancelled run: addrs %q, notes %q", addrs, notes)
	}
}

// TestResolveAddrsInParallel: names are looked up limit at once, never
// more: with limit 3, three lookups are under way together (one after
// another, the second would never start while the first waits).
func TestResolveAddrsInParallel(t *testing.T) {
	const limit = 3
	started, release := make(chan string), make(chan struct{})
	var mu sync.Mutex
	inFlight, most := 0, 0
	stubLookup(t, func(ctx context.Context, name string) ([]string, error) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		started <- name
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
		return []string{"10.0.0.1"}, nil
	})
	var srcs []addrSource
	for i := range 8 {
		srcs = append(srcs, addrSource{host: fmt.Sprint(i), route: fmt.Sprintf("h%d.example", i)})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		resolveAddrs(context.Background(), srcs, slices.Repeat([]bool{true}, len(srcs)), limit)
	}()
	for i := range limit {
		select {
		case <-started:
		case <-time.After(10 * time.Second): // a failure's bound, not a measure
			t.Fatalf("only %d lookups under way, want %d at once", i, limit)
		}
	}
	close(release)
	for range len(srcs) - limit {
		<-started
	}
	<-done
	if most != limit {
		t.Errorf("at most %d lookups at once, want %d", most, limit)
	}
}

// TestUnresolvedNote: a name that does not resolve says which host, which
// name and why, and, for a host behind a jump host, that the name may
// resolve only there; it points at pgtune_replication_host.
func TestUnresolvedNote(t *testing.T) {
	dnsErr := errors.New("lookup db1.internal on 10.0.0.53:53: no such host")
	for _, tc := range []struct {
		name string
		src  addrSource
		want []string
		not  []string
	}{
		{"direct", addrSource{host: "db1", route: "db1.internal"},
			[]string{`db1: "db1.internal" does not resolve on the controller (lookup db1.internal on 10.0.0.53:53: no such host)`, ReplicationHostVar + " to its IP address"},
			[]string{"jump host"}},
		{"relayed", addrSource{host: "db1", route: "db1.internal", relayed: true},
			[]string{`db1: "db1.internal" does not resolve`, "no such host", "reached through a jump host or proxy command", ReplicationHostVar}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stubLookup(t, func(context.Context, string) ([]string, error) { return nil, dnsErr })
			_, notes := resolveAddrs(context.Background(), []addrSource{tc.src}, []bool{true}, 1)
			if len(notes[0]) != 1 {
				t.Fatalf("notes %q, want one", notes[0])
			}
			for _, w := range tc.want {
				if !strings.Contains(notes[0][0], w) {
					t.Errorf("note %q lacks %q", notes[0][0], w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(notes[0][0], w) {
					t.Errorf("note %q has %q", notes[0][0], w)
				}
			}
		})
	}
}

// TestSourceOfEvaluatesSSHConfig: a host reached through an ssh_config
// alias is resolved by the alias's HostName, the name its connection
// dials, and one behind a ProxyJump is said to be relayed.
func TestSourceOfEvaluatesSSHConfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	cfg := filepath.Join(home, "ssh_config")
	if err := os.WriteFile(cfg, []byte("Host db1\n  HostName db1.internal\n  ProxyJump bastion\nHost db2\n  HostName 10.0.0.2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host, address string
		local         bool
		route         string
		relayed       bool
	}{
		{"db1", "db1", false, "db1.internal", true},
		{"db2", "db2", false, "10.0.0.2", false},
		{"db3", "10.0.0.3", false, "10.0.0.3", false},
		{"db4", "db4.example", true, "127.0.0.1", false},
	} {
		h := &inventory.Host{Name: tc.host, Conn: inventory.Conn{Address: tc.address, ConfigFile: cfg}}
		if tc.local {
			h.Conn.Connection = "local"
		}
		src := sourceOf(h)
		if src.route != tc.route || src.relayed != tc.relayed {
			t.Errorf("%s: route %q relayed %t, want %q %t", tc.host, src.route, src.relayed, tc.route, tc.relayed)
		}
	}
}

// TestSessionResolvesSharedClustersWithNotes: a session's own layout
// resolves only the hosts sharing a cluster, under its context, and a
// name that does not resolve is a note on its host.
func TestSessionResolvesSharedClustersWithNotes(t *testing.T) {
	dns := &fakeDNS{table: map[string][]string{"pg-p": {"10.0.0.1"}}}
	stubLookup(t, dns.lookup)
	s := &Session{runner: &Runner{Forks: 4, Log: slog.New(slog.DiscardHandler)}}
	for _, h := range pairFacts(3) {
		s.hosts = append(s.hosts, &hostRun{host: &inventory.Host{Name: h.Name, Vars: map[string]any{ReplicationHostVar: h.ReplicationHost},
			Conn: inventory.Conn{Address: h.Address}}, facts: h.Facts})
	}
	s.resolveMembers(context.Background())
	slices.Sort(dns.asked)
	if want := []string{"pg-p", "pg-s"}; !slices.Equal(dns.asked, want) {
		t.Errorf("asked DNS for %q, want only %q", dns.asked, want)
	}
	for _, hr := range s.hosts {
		wantNote := hr.host.Name == "s"
		if got := len(hr.notes) == 1 && strings.Contains(hr.notes[0], `s: "pg-s" does not resolve`); got != wantNote || (!wantNote && len(hr.notes) > 0) {
			t.Errorf("%s: notes %q", hr.host.Name, hr.notes)
		}
	}
	if c := s.layout().ClusterOf("p"); c == nil || len(c.Unverified) != 1 {
		t.Errorf("cluster of p: %v, want s unverified (its name did not resolve)", c)
	}

	// A switchover matches senders by the addresses the layout used, not
	// by a second lookup that may answer otherwise.
	stubLookup(t, func(_ context.Context, name string) ([]string, error) { return []string{"10.9.9.9"}, nil })
	if got := s.target(s.hosts[0], nil).Addrs(); !slices.Equal(got, []string{"10.0.0.1"}) {
		t.Errorf("p's target addresses %q, want the layout's [10.0.0.1]", got)
	}
}

// BenchmarkResolveAddrs: 50 names on a resolver taking 20 ms each, one at
// a time (as before) and 8 at a time.
func BenchmarkResolveAddrs(b *testing.B) {
	old := lookupHost
	defer func() { lookupHost = old }()
	lookupHost = func(ctx context.Context, name string) ([]string, error) {
		time.Sleep(20 * time.Millisecond)
		return []string{"10.0.0.1"}, nil
	}
	var srcs []addrSource
	for i := range 50 {
		srcs = append(srcs, addrSource{host: fmt.Sprint(i), route: fmt.Sprintf("h%d.example", i)})
	}
	need := slices.Repeat([]bool{true}, len(srcs))
	for _, limit := range []int{1, lookupLimit} {
		b.Run(fmt.Sprintf("limit=%d", limit), func(b *testing.B) {
			for range b.N {
				resolveAddrs(context.Background(), srcs, need, limit)
			}
		})
	}
}

// TestSessionTakesTheRunnersLayoutAddrs: in a rollout by batches the
// Runner's layout was resolved once; a session's switchover must match
// senders by those answers, not ask DNS again outside the run's context
// (resolveMembers returned early and Target.Addrs looked up anew). An
// interrupted lookup leaves no "context canceled" note on the hosts.
func TestSessionTakesTheRunnersLayoutAddrs(t *testing.T) {
	dns := &fakeDNS{table: map[string][]string{"pg-p": {"10.0.0.1"}, "pg-s": {"10.0.0.2"}}}
	stubLookup(t, dns.lookup)
	l, _ := ClusterLayout(context.Background(), pairFacts(0), 4)
	s := &Session{runner: &Runner{Forks: 4, Log: slog.New(slog.DiscardHandler), Layout: l}}
	for _, h := range pairFacts(0) {
		s.hosts = append(s.hosts, &hostRun{host: &inventory.Host{Name: h.Name, Conn: inventory.Conn{Address: h.Address}}, facts: h.Facts})
	}
	s.resolveMembers(context.Background())
	asked := 0
	stubLookup(t, func(context.Context, string) ([]string, error) { asked++; return []string{"10.9.9.9"}, nil })
	if got := s.target(s.hosts[1], nil).Addrs(); !slices.Equal(got, []string{"10.0.0.2"}) || asked != 0 {
		t.Errorf("s's target addresses %q (DNS asked %d times), want the layout's [10.0.0.2]", got, asked)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s = &Session{runner: &Runner{Forks: 4, Log: slog.New(slog.DiscardHandler)}}
	for _, h := range pairFacts(0) {
		s.hosts = append(s.hosts, &hostRun{host: &inventory.Host{Name: h.Name, Conn: inventory.Conn{Address: h.Address}}, facts: h.Facts})
	}
	s.resolveMembers(ctx)
	for _, hr := range s.hosts {
		if len(hr.notes) > 0 {
			t.Errorf("%s: notes after an interrupt: %q", hr.host.Name, hr.notes)
		}
	}
}

// TestClusterLayoutTiesPatroniNames: the primary's Patroni lists a
// member at its connect_address host; a name there ties the member to a
// host of the run when it is one the controller knows that host by (the
// inventory's address, the ssh_config HostName, pgtune_replication_host)
// or resolves, on the controller, to one of its addresses; never the
// host's own word (its machine name, which the controller does not
// resolve to it). A claim refused leaves the cluster unverified, and
// names no member outside the run.
func TestClusterLayoutTiesPatroniNames(t *testing.T) {
	stubLookup(t, (&fakeDNS{table: map[string][]string{"pg-p": {"10.0.0.1"}, "pg-s": {"10.0.0.2"}, "pg-s.route": {"10.0.0.2"},
		"pg-s.example.com": {"10.0.0.2"}, "pg-x": {"10.0.0.9"}}}).lookup)
	for _, tc := range []struct {
		listed  string
		refused string
	}{
		{"pg-s", ""}, {"PG-S.route", ""}, {"pg-s-repl", ""}, {"10.0.0.2", ""}, {"pg-s.example.com", ""},
		{"sm", `"sm" (it does not resolve on the controller: lookup sm: no such host)`},
		{"pg-x", `"pg-x" (resolved on the controller to 10.0.0.9)`},
		{"", "no host"},
	} {
		t.Run(tc.listed, func(t *testing.T) {
			hosts := pairFacts(0)
			members := []facts.PatroniMember{{Name: "p", Role: "leader", State: "running", Host: "pg-p"}, {Name: "s", Role: "replica", State: "streaming", Host: tc.listed}}
			hosts[0].Facts.Topology.Patroni = &facts.Patroni{Scope: "demo", Name: "p", Members: members}
			hosts[1].Facts.Topology.Patroni = &facts.Patroni{Scope: "demo", Name: "s", Members: members}
			hosts[1].Route, hosts[1].ReplicationHost = "pg-s.route", "pg-s-repl"
			l, _ := ClusterLayout(context.Background(), hosts, 4)
			c := l.ClusterOf("p")
			got := strings.Join(c.Unverified, "; ")
			if len(c.Outside) > 0 || (tc.refused == "") != (got == "") || (got != "" && !strings.Contains(got, "lists that member at "+tc.refused)) {
				t.Errorf("outside %q, unverified %q; want none outside, refused at %q", c.Outside, got, tc.refused)
			}
		})
	}
}

// TestClusterLayoutResolvesPatroniConnectAddress: an honest Patroni
// cluster whose postgresql.connect_address is a DNS name the inventory
// does not use (db2 there, db2.example.com in Patroni) was refused: the
// names were compared as strings. The controller resolves that name from
// the primary's list, as it resolves the inventory's names, and compares
// addresses; it asks for nothing a standby names, nor for the hosts of
// members no standby of the run needs tied. A session's own layout and a
// rollout's (ClusterLayout) alike.
func TestClusterLayoutResolvesPatroniConnectAddress(t *testing.T) {
	pg := &facts.Postgres{Port: 5432, SocketDir: "/run/postgresql"}
	list := []facts.PatroniMember{{Name: "n1", Role: "leader", State: "running", Host: "db1.example.com"},
		{Name: "s2", Role: "replica", State: "streaming", Host: "db2.example.com"},
		{Name: "s3", Role: "replica", State: "streaming", Host: "10.0.0.4"}}
	hostsWith := func() []HostFacts {
		return []HostFacts{
			{Name: "db1", Address: "db1", Facts: &facts.Facts{Hostname: "db1", Postgres: pg, Topology: &facts.Topology{Role: "primary", SystemID: "1",
				Standbys: []facts.StandbyInfo{{Name: "s2", Addr: "10.0.0.3"}, {Name: "s3", Addr: "10.0.0.4"}},
				Patroni:  &facts.Patroni{Scope: "demo", Name: "n1", Members: list}}}},
			{Name: "db2", Address: "db2", Facts: &facts.Facts{Hostname: "db2", Postgres: pg, Topology: &facts.Topology{Role: "standby", SystemID: "1",
				Receiver: "streaming", Upstream: "db1.example.com:5432", Patroni: &facts.Patroni{Scope: "demo", Name: "s2"}}}},
			{Name: "db3", Address: "10.0.0.4", Facts: &facts.Facts{Hostname: "db3", Postgres: pg, Topology: &facts.Topology{Role: "standby", SystemID: "1",
				Receiver: "streaming", Upstream: "db1.example.com:5432", Patroni: &facts.Patroni{Scope: "demo", Name: "s3"}}}},
		}
	}
	for _, tc := range []struct {
		name       string
		table      map[string][]string
		unverified string
	}{
		{"resolves to the standby", map[string][]string{"db1": {"10.0.0.1"}, "db2": {"10.0.0.3"}, "db2.example.com": {"10.0.0.3"}}, ""},
		{"does not resolve", map[string][]string{"db1": {"10.0.0.1"}, "db2": {"10.0.0.3"}},
			`db2 says it is Patroni member "s2", but the primary's Patroni lists that member at "db2.example.com" (it does not resolve on the controller: lookup db2.example.com: no such host), which is none of the addresses or names the controller knows db2 by (10.0.0.3; names db2)`},
	} {
		check := func(how string, c *topology.Cluster, dns *fakeDNS) {
			t.Helper()
			if got := strings.Join(c.Unverified, "; "); len(c.Outside) > 0 || (tc.unverified == "") != (got == "") || !strings.HasPrefix(got, tc.unverified) {
				t.Errorf("%s: outside %q, unverified %q\nwant none outside, unverified %q", how, c.Outside, got, tc.unverified)
			}
			slices.Sort(dns.asked)
			// db3 is tied by the address listed; db1.example.com is
			// the primary's own and the standbys' upstream: not asked.
			if want := []string{"db1", "db2", "db2.example.com"}; !slices.Equal(dns.asked, want) {
				t.Errorf("%s: asked DNS for %q, want %q", how, dns.asked, want)
			}
		}
		t.Run(tc.name, func(t *testing.T) {
			dns := &fakeDNS{table: tc.table}
			stubLookup(t, dns.lookup)
			l, _ := ClusterLayout(context.Background(), hostsWith(), 4)
			check("ClusterLayout", l.ClusterOf("db1"), dns)

			dns = &fakeDNS{table: tc.table}
			stubLookup(t, dns.lookup)
			s := &Session{runner: &Runner{Forks: 4, Log: slog.New(slog.DiscardHandler)}}
			for _, h := range hostsWith() {
				s.hosts = append(s.hosts, &hostRun{host: &inventory.Host{Name: h.Name, Conn: inventory.Conn{Address: h.Address}}, facts: h.Facts})
			}
			s.resolveMembers(context.Background())
			check("session", s.layout().ClusterOf("db1"), dns)
		})
	}
}

// TestCascadeLinkedBySSHHostName: a cascaded standby naming its upstream
// (primary_conninfo's host) by the name that upstream's connection dials
// (its ssh_config HostName, the inventory giving an alias) is linked to
// it, as by its inventory address or pgtune_replication_host: a session's
// own layout and a rollout's (ClusterLayout) alike.
func TestCascadeLinkedBySSHHostName(t *testing.T) {
	stubLookup(t, (&fakeDNS{table: map[string][]string{"s1.internal": {"10.0.0.2"}}}).lookup)
	home := t.TempDir()
	t.Setenv("HOME", home)
	cfg := filepath.Join(home, "ssh_config")
	if err := os.WriteFile(cfg, []byte("Host s1-alias\n  HostName s1.internal\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pg := &facts.Postgres{Port: 5432, SocketDir: "/run/postgresql"}
	hosts := []HostFacts{
		{Name: "p", Address: "10.0.0.1", Facts: &facts.Facts{Hostname: "pm", Postgres: pg, Topology: &facts.Topology{Role: "primary", SystemID: "1",
			Standbys: []facts.StandbyInfo{{Name: "s1", Addr: "10.0.0.2", State: "streaming"}}}}},
		{Name: "s1", Address: "s1-alias", Route: "s1.internal", Facts: &facts.Facts{Hostname: "sm", Postgres: pg, Topology: &facts.Topology{Role: "standby", SystemID: "1",
			Upstream: "10.0.0.1:5432", Receiver: "streaming", Standbys: []facts.StandbyInfo{{Name: "c1", Addr: "10.0.0.3", State: "streaming"}}}}},
		{Name: "c1", Address: "10.0.0.3", Facts: &facts.Facts{Hostname: "cm", Postgres: pg, Topology: &facts.Topology{Role: "standby", SystemID: "1",
			Upstream: "s1.internal:5432", Receiver: "streaming"}}},
	}
	check := func(how string, c *topology.Cluster) {
		t.Helper()
		if c == nil || c.Upstreams["c1"] != "s1" || len(c.Unverified) > 0 {
			t.Errorf("%s: c1 not linked to s1: %v", how, c)
		}
	}
	l, _ := ClusterLayout(context.Background(), hosts, 4)
	check("ClusterLayout", l.ClusterOf("p"))

	s := &Session{runner: &Runner{Forks: 4, Log: slog.New(slog.DiscardHandler)}}
	for _, h := range hosts {
		s.hosts = append(s.hosts, &hostRun{host: &inventory.Host{Name: h.Name, Conn: inventory.Conn{Address: h.Address, ConfigFile: cfg}}, facts: h.Facts})
	}
	s.resolveMembers(context.Background())
	check("session", s.layout().ClusterOf("p"))
}
