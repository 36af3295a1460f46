package engine

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/transport"
)

// peerOpener is a restarter whose Apply on a cluster's primary opens its
// cluster peers, as a switchover does, and records what it got.
type peerOpener struct {
	restarter
	mu     sync.Mutex
	peers  map[string][]string
	runIDs map[string][]string
	errs   map[string]error
}

func (o *peerOpener) Apply(ctx context.Context, t *Target, p *plan.ModulePlan) error {
	if t.Facts.Topology.IsPrimary() {
		peers, closePeers, err := t.ClusterPeers(ctx, "-peer")
		o.mu.Lock()
		defer o.mu.Unlock()
		if err != nil {
			o.errs[t.Name] = err
			return err
		}
		defer closePeers()
		for _, pt := range peers {
			o.peers[t.Name] = append(o.peers[t.Name], pt.Name)
			o.runIDs[t.Name] = append(o.runIDs[t.Name], pt.RunID())
		}
		return nil
	}
	return o.restarter.Apply(ctx, t, p)
}

func TestClusterPeers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		drop    string
		idle    string // an idle slot on p: a standby the run cannot reach
		want    string
		wantErr string
	}{
		{"every member in the run", "", "", "s1,s2", ""},
		{"a member outside the run", "s2", "", "", "has members outside this run"},
		{"a member the run cannot reach, not streaming", "", "s3", "", "a member this run has no facts of or does not include is not streaming, and a switchover would not repoint it"},
		{"a Patroni member of the run, not streaming", "", "", "", `a member of this run is not streaming (s2, which says it is Patroni member "s2", is not streaming (WAL receiver "waiting"`},
		{"a standby whose Patroni member is listed elsewhere", "", "", "", `not every member checks out against its upstream's WAL senders: s2 says it is Patroni member "s2", but the primary's Patroni lists that member at "10.0.0.3"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topos := replicated()
			if tc.drop != "" {
				delete(topos, tc.drop)
			}
			if tc.idle != "" {
				topos["p"].IdleSlots = []string{tc.idle}
			}
			if strings.HasPrefix(tc.name, "a Patroni member") {
				topos["p"].Standbys = topos["p"].Standbys[:1]
				topos["s2"].Receiver = "waiting"
				list := []facts.PatroniMember{{Name: "p", Role: "leader", State: "running", Host: "127.0.0.1"},
					{Name: "s1", Role: "replica", State: "streaming", Host: "127.0.0.1"}, {Name: "s2", Role: "replica", State: "streaming", Host: "127.0.0.1"}}
				for _, h := range []string{"p", "s1", "s2"} {
					topos[h].Patroni = &facts.Patroni{Scope: "demo", Name: h, Members: list}
				}
			}
			if strings.HasPrefix(tc.name, "a standby whose Patroni") {
				list := []facts.PatroniMember{{Name: "p", Role: "leader", State: "running", Host: "127.0.0.1"},
					{Name: "s1", Role: "replica", State: "streaming", Host: "127.0.0.1"}, {Name: "s2", Role: "replica", State: "streaming", Host: "10.0.0.3"}}
				for _, h := range []string{"p", "s1", "s2"} {
					topos[h].Patroni = &facts.Patroni{Scope: "demo", Name: h, Members: list}
				}
			}
			o := &peerOpener{peers: map[string][]string{}, runIDs: map[string][]string{}, errs: map[string]error{}}
			s := clusterSession(t, &o.restarter, topos, map[string]map[string]any{"p": {PartialClusterVar: true}})
			s.runner.Dial = func(context.Context, *inventory.Host) (transport.Transport, error) { return transport.NewLocal(), nil }
			for _, hr := range s.hosts {
				hr.steps[0].module = o
				hr.facts.Postgres = nil
			}
			s.Apply(context.Background())
			if tc.wantErr != "" {
				if err := o.errs["p"]; err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("p: ClusterPeers err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err := o.errs["p"]; err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(o.peers["p"], ","); got != tc.want {
				t.Errorf("p's peers %s, want %s", got, tc.want)
			}
			if got := strings.Join(o.peers["q"], ","); got != "q1" {
				t.Errorf("q's peers %s, want q1", got)
			}
			for _, id := range o.runIDs["p"] {
				if id != "test-run-peer" {
					t.Errorf("a peer journals as run %q, want test-run-peer", id)
				}
			}
		})
	}
}
