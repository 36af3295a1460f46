package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/transport"
)

// TestSpoofedMemberRefusals: a host of the run ("lone") claims cluster
// 1's system identifier. Claiming its primary role splits the cluster:
// no member is touched, the real primary is not taken for a standby.
// Claiming to be a standby that the primary's WAL senders do not show
// leaves the cluster unverified: its primary is not restarted (unless
// the operator accepts it) and no switchover opens its peers.
func TestSpoofedMemberRefusals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		lone    *facts.Topology
		vars    map[string]map[string]any
		applied []string // of cluster 1 and lone
		errs    map[string]string
	}{
		{"a second primary", &facts.Topology{Role: "primary", SystemID: "1"}, nil, nil, map[string]string{
			"p": "not touched: p and lone say they are the primary of cluster 1", "s1": "not touched: p and lone", "s2": "not touched: p and lone", "lone": "not touched: p and lone"}},
		{"a standby the primary does not stream to", &facts.Topology{Role: "standby", SystemID: "1", Receiver: "streaming"}, nil,
			[]string{"lone", "s1", "s2"}, map[string]string{"p": "p: refusing to restart the primary: the run's members of cluster 1 are not all what they say (lone says it streams but names no upstream, and no WAL sender of the primary p is to an address the controller knows lone by (10.6.6.6"}},
		{"accepted by the var", &facts.Topology{Role: "standby", SystemID: "1", Receiver: "streaming"}, map[string]map[string]any{"p": {PartialClusterVar: true}},
			[]string{"lone", "p", "s1", "s2"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topos := replicated()
			topos["lone"] = tc.lone
			m := &restarter{}
			s := clusterSession(t, m, topos, tc.vars)
			for _, hr := range s.hosts {
				if hr.host.Name == "lone" {
					hr.host.Conn.Address = "10.6.6.6" // another machine
				}
			}
			s.Apply(context.Background())
			for _, hr := range s.hosts {
				want, e := tc.errs[hr.host.Name], errOf(hr)
				if want == "" && e != "" || !strings.Contains(e, want) {
					t.Errorf("%s: %q, want %q", hr.host.Name, e, want)
				}
				if strings.Contains(want, "not touched") && !errors.Is(hr.err, ErrNotTouched) {
					t.Errorf("%s: not ErrNotTouched: %v", hr.host.Name, hr.err)
				}
			}
			var got []string
			for _, h := range m.order {
				if h != "q" && h != "q1" {
					got = append(got, h)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.applied) {
				t.Errorf("applied %q, want %q", got, tc.applied)
			}
		})
	}
}

// TestClusterPeersRefuseUnverified: a switchover opens no peer of a
// cluster a member of which its upstream does not show streaming.
func TestClusterPeersRefuseUnverified(t *testing.T) {
	topos := replicated()
	topos["lone"] = &facts.Topology{Role: "standby", SystemID: "1", Receiver: "streaming"}
	o := &peerOpener{peers: map[string][]string{}, runIDs: map[string][]string{}, errs: map[string]error{}}
	s := clusterSession(t, &o.restarter, topos, map[string]map[string]any{"p": {PartialClusterVar: true}})
	s.runner.Dial = func(context.Context, *inventory.Host) (transport.Transport, error) { return transport.NewLocal(), nil }
	for _, hr := range s.hosts {
		hr.steps[0].module = o
		hr.facts.Postgres = nil
		if hr.host.Name == "lone" {
			hr.host.Conn.Address = "10.6.6.6"
		}
	}
	s.Apply(context.Background())
	if err := o.errs["p"]; err == nil || !strings.Contains(err.Error(), "cluster 1: not every member checks out against its upstream's WAL senders: lone says it streams but names no upstream, and no WAL sender of the primary p") {
		t.Fatalf("p: ClusterPeers err = %v, want the unverified member named", err)
	}
	if len(o.peers["p"]) > 0 {
		t.Errorf("peers opened: %q", o.peers["p"])
	}
}

// TestMemberAddrs: what the controller knows a host by: an address
// literal as it is, the local connection as loopback (a name there would
// be asked of DNS), pgtune_replication_host beside it.
func TestMemberAddrs(t *testing.T) {
	for _, tc := range []struct {
		addr, repl string
		local      bool
		want       []string
	}{
		{"10.0.0.2", "", false, []string{"10.0.0.2"}},
		{"10.0.0.2", "192.168.1.2", false, []string{"10.0.0.2", "192.168.1.2"}},
		{"db-primary", "", true, []string{"127.0.0.1"}},
		{"::ffff:10.0.0.2", "10.0.0.2", false, []string{"10.0.0.2"}},
	} {
		src := sourceOfFacts(HostFacts{Name: "h", Address: tc.addr, ReplicationHost: tc.repl, Local: tc.local})
		got, _ := resolveAddrs(context.Background(), []addrSource{src}, []bool{true}, 1)
		if !slices.Equal(got[0], tc.want) {
			t.Errorf("addresses of (%q, %q, %t) = %q, want %q", tc.addr, tc.repl, tc.local, got[0], tc.want)
		}
	}
}
