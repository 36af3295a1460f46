package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
)

// slotted is replicated() with every standby streaming through a slot
// named after it, and the primary's slots of standbys that stream no
// more (idle) as given.
func slotted(idle ...string) map[string]*facts.Topology {
	topos := replicated()
	for _, h := range []string{"s1", "s2", "q1"} {
		topos[h].SlotName = h
	}
	topos["p"].IdleSlots = idle
	return topos
}

// unreachable makes host of s one the run could not reach: no facts, no
// connection, failed (as a dial error leaves it).
func unreachable(s *Session, host string) {
	for _, hr := range s.hosts {
		if hr.host.Name == host {
			hr.facts, hr.tr, hr.err = nil, nil, errors.New(host+": connect: no route to host")
		}
	}
}

const heldBy = "not touched: cluster 1 has a member this run has no facts of or does not include that is not streaming ("

// TestNotStreamingMemberHoldsCluster: a member the run has no facts of
// (unreachable) or does not include (--limit, not in the inventory) that
// its cluster's reachable members show not streaming holds every other
// member: none is restarted, each says what was seen and the ways out.
// A member outside the run that streams holds nothing (the primary's own
// refusal aside), and the partial-cluster var accepts the risk per host.
func TestNotStreamingMemberHoldsCluster(t *testing.T) {
	s2Gone := func() map[string]*facts.Topology {
		topos := slotted("s2")
		topos["p"].Standbys = topos["p"].Standbys[:1] // s2 streams no more
		return topos
	}
	patroni := func() map[string]*facts.Topology {
		topos := replicated()
		delete(topos, "s2")
		topos["p"].Standbys = topos["p"].Standbys[:1]
		list := []facts.PatroniMember{{Name: "p", Role: "leader", State: "running"}, {Name: "s1", Role: "replica", State: "streaming"}, {Name: "s2", Role: "replica", State: "stopped"}}
		for _, h := range []string{"p", "s1"} {
			topos[h].Patroni = &facts.Patroni{Scope: "demo", Name: h, Members: list}
		}
		return topos
	}
	for _, tc := range []struct {
		name        string
		topos       map[string]*facts.Topology
		unreachable string
		vars        map[string]map[string]any
		noRestart   []string          // hosts in policy: no restart planned
		held        []string          // of cluster 1
		evidence    string            // in every held member's error
		refused     map[string]string // other errors
		applied     []string          // of cluster 1, in order
	}{
		{name: "a standby unreachable", topos: s2Gone(), unreachable: "s2",
			held: []string{"s1", "p"}, evidence: `replication slot "s2" on p has no standby streaming through it`},
		{name: "a standby left out by --limit, down", topos: func() map[string]*facts.Topology { t := s2Gone(); delete(t, "s2"); return t }(),
			held: []string{"s1", "p"}, evidence: `replication slot "s2" on p has no standby streaming through it`},
		{name: "a Patroni member outside the run, stopped", topos: patroni(),
			held: []string{"s1", "p"}, evidence: `Patroni member "s2" ("replica") is "stopped"`},
		{name: "the primary unreachable: the standbys lost their upstream", unreachable: "p",
			topos: func() map[string]*facts.Topology {
				t := replicated()
				for _, h := range []string{"s1", "s2"} {
					t[h].Receiver, t[h].Upstream = "", "10.0.0.1:5432"
				}
				return t
			}(),
			held: []string{"s1", "s2"}, evidence: `s1 lost its upstream "10.0.0.1:5432" (no WAL receiver; no member of this run)`},
		{name: "the only standby left out by --limit, down",
			topos: func() map[string]*facts.Topology { t := s2Gone(); delete(t, "s1"); delete(t, "s2"); return t }(),
			held:  []string{"p"}, evidence: `replication slot "s2" on p has no standby streaming through it`},
		{name: "accepted by the var, host by host", topos: s2Gone(), unreachable: "s2",
			vars: map[string]map[string]any{"s1": {PartialClusterVar: true}},
			held: []string{"p"}, evidence: `replication slot "s2" on p`, applied: []string{"s1"}},
		{name: "a member that plans no restart is not held", topos: s2Gone(), unreachable: "s2", noRestart: []string{"s1"},
			held: []string{"p"}, evidence: `replication slot "s2" on p`},
		{name: "a standby outside the run that streams holds nothing",
			topos:   func() map[string]*facts.Topology { t := slotted(); delete(t, "s2"); return t }(),
			refused: map[string]string{"p": "refusing to restart the primary of cluster 1"}, applied: []string{"s1"}},
		{name: "every member in the run and streaming", topos: slotted(), applied: []string{"s1", "s2", "p"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &restarter{inPolicy: map[string]bool{}}
			s := clusterSession(t, m, tc.topos, tc.vars)
			for _, hr := range s.hosts {
				if slices.Contains(tc.noRestart, hr.host.Name) {
					m.inPolicy[hr.host.Name] = true
					hr.steps = []*step{{module: m, plan: &plan.ModulePlan{Module: "restarter"}}}
				}
			}
			unreachable(s, tc.unreachable)
			for _, hr := range s.hosts { // check says it ahead
				hr.notes = nil
			}
			s.placeInClusters()
			s.Apply(context.Background())
			for _, hr := range s.hosts {
				h, e := hr.host.Name, errOf(hr)
				notes := strings.Join(hr.notes, "\n")
				switch {
				case slices.Contains(tc.held, h):
					if !errors.Is(hr.err, ErrNotTouched) || !strings.Contains(e, h+": "+heldBy) || !strings.Contains(e, tc.evidence) ||
						!strings.HasSuffix(e, "bring that member back and streaming (drop a replication slot whose standby is gone for good), or set pgtune_restart_partial_cluster: true on this host to restart it anyway") {
						t.Errorf("%s: %q, want held by %q", h, e, tc.evidence)
					}
					if !strings.Contains(notes, "apply will not restart this member: cluster 1 has a member") {
						t.Errorf("%s: check did not say it is held: %q", h, notes)
					}
				case h == tc.unreachable:
					if !strings.Contains(e, "no route to host") {
						t.Errorf("%s: %q", h, e)
					}
				case tc.refused[h] != "":
					if !strings.Contains(e, tc.refused[h]) {
						t.Errorf("%s: %q, want %q", h, e, tc.refused[h])
					}
				case e != "":
					t.Errorf("%s: %q, want applied", h, e)
				}
			}
			var got []string
			for _, h := range m.order {
				if h == "s1" || h == "s2" || h == "p" {
					got = append(got, h)
				}
			}
			if !slices.Equal(got, tc.applied) {
				t.Errorf("applied %v of cluster 1, want %v (order %v)", got, tc.applied, m.order)
			}
			if len(m.overlap) > 0 {
				t.Errorf("members of one cluster down together: %v", m.overlap)
			}
		})
	}
}

// TestNotStreamingMemberHoldsWaves: under a rollout the cluster is known
// from the facts read before the first batch (Runner.Layout); a standby
// that did not answer then holds its cluster in every wave.
func TestNotStreamingMemberHoldsWaves(t *testing.T) {
	all := slotted("s2")
	all["p"].Standbys = all["p"].Standbys[:1]
	all["s2"] = nil // no facts: unreachable
	m := &restarter{}
	inWaves(t, m, all, (*Runner).StopDownMembers, func(s *Session) {
		unreachable(s, "s2")
		s.Apply(context.Background())
		for _, hr := range s.hosts {
			if (hr.host.Name == "s1" || hr.host.Name == "p") && (!errors.Is(hr.err, ErrNotTouched) || !strings.Contains(errOf(hr), heldBy)) {
				t.Errorf("%s: %q, want held", hr.host.Name, errOf(hr))
			}
			if hr.host.Name == "s1" || hr.host.Name == "p" {
				if id := s.ClusterID(hr.host.Name); id != "1" {
					t.Errorf("%s: cluster id %q for the run state", hr.host.Name, id)
				}
			}
		}
	})
	if slices.Contains(m.order, "s1") || slices.Contains(m.order, "p") || len(m.order) != 3 {
		t.Errorf("applied %v, want the other clusters only", m.order)
	}
}

// TestPatroniMemberOfTheRunNotStreamingHolds: a Patroni replica of the
// run whose WAL receiver is not streaming when its facts are read (it
// reconnects) was reported as a member outside the run. It holds what it
// held, as a member of the run that is not streaming, named, with what to
// do: the primary, and every member when the primary's Patroni does not
// report it up either.
func TestPatroniMemberOfTheRunNotStreamingHolds(t *testing.T) {
	const who = `cluster 1 has a member of this run that is not streaming (s2, which says it is Patroni member "s2", is not streaming (WAL receiver "waiting"; the primary's Patroni reports it %q)`
	const primaryHeld = `p: refusing to restart the primary: ` + who + `), so its upstream shows no WAL sender to it and nothing vouches that it is that member: let it stream again (patronictl list shows it streaming; a replica reconnecting or catching up gets there by itself) and run again, or set pgtune_restart_partial_cluster: true on this host to restart it anyway`
	const held = `%s: not touched: ` + who + `): restarting another member now would take a second one down; let it stream again (patronictl list shows it streaming; a replica reconnecting or catching up gets there by itself) and run again, or set pgtune_restart_partial_cluster: true on this host to restart it anyway`
	for _, tc := range []struct {
		state   string
		errs    map[string]string
		applied []string
	}{
		{"streaming", map[string]string{"p": fmt.Sprintf(primaryHeld, "streaming")}, []string{"s1", "s2"}},
		{"starting", map[string]string{"p": fmt.Sprintf(held, "p", "starting"), "s1": fmt.Sprintf(held, "s1", "starting"), "s2": fmt.Sprintf(held, "s2", "starting")}, nil},
	} {
		t.Run(tc.state, func(t *testing.T) {
			topos := replicated()
			delete(topos, "q")
			delete(topos, "q1")
			delete(topos, "lone")
			topos["p"].Standbys = topos["p"].Standbys[:1] // s2 reconnects
			topos["s2"].Receiver = "waiting"
			list := []facts.PatroniMember{{Name: "p", Role: "leader", State: "running", Host: "127.0.0.1"},
				{Name: "s1", Role: "replica", State: "streaming", Host: "127.0.0.1"}, {Name: "s2", Role: "replica", State: tc.state, Host: "127.0.0.1"}}
			for _, h := range []string{"p", "s1", "s2"} {
				topos[h].Patroni = &facts.Patroni{Scope: "demo", Name: h, Members: list}
			}
			m := &restarter{}
			s := clusterSession(t, m, topos, nil)
			s.Apply(context.Background())
			for _, hr := range s.hosts {
				if e := errOf(hr); e != tc.errs[hr.host.Name] {
					t.Errorf("%s: %q\nwant %q", hr.host.Name, e, tc.errs[hr.host.Name])
				}
				if notes := strings.Join(hr.notes, "\n"); strings.Contains(notes, "outside this run") {
					t.Errorf("%s: notes say outside the run: %q", hr.host.Name, notes)
				}
			}
			if !slices.Equal(m.order, tc.applied) {
				t.Errorf("restarted %v, want %v", m.order, tc.applied)
			}
		})
	}
}

// TestShardHoldsOnAWaitingClaim: in a shard, a host not streaming that
// says it is a Patroni member another shard may hold (its word only)
// refuses the cluster's restarts as a member outside the shard did before
// it was named as a member of the run (Waiting).
func TestShardHoldsOnAWaitingClaim(t *testing.T) {
	topos := replicated()
	delete(topos, "q")
	delete(topos, "q1")
	delete(topos, "lone")
	topos["p"].Standbys = topos["p"].Standbys[:1]
	topos["s2"].Receiver = "waiting"
	list := []facts.PatroniMember{{Name: "p", Role: "leader", State: "running", Host: "127.0.0.1"},
		{Name: "s1", Role: "replica", State: "streaming", Host: "127.0.0.1"}, {Name: "s3", Role: "replica", State: "streaming", Host: "10.0.0.3"}}
	for h, name := range map[string]string{"p": "p", "s1": "s1", "s2": "s3"} {
		topos[h].Patroni = &facts.Patroni{Scope: "demo", Name: name, Members: list}
	}
	m := &restarter{}
	s := clusterSession(t, m, topos, nil)
	s.runner.Shard = true
	s.Apply(context.Background())
	for _, hr := range s.hosts {
		if e := errOf(hr); !strings.Contains(e, "refusing to restart a member of a replication cluster with members outside this shard") ||
			!strings.Contains(e, `members of this run not streaming: s2, which says it is Patroni member "s3"`) {
			t.Errorf("%s: %q", hr.host.Name, e)
		}
	}
	if len(m.order) > 0 {
		t.Errorf("restarted %v", m.order)
	}
}

// TestRefusedPatroniClaimHolds: a standby of the run whose Patroni name
// the primary's Patroni lists at another host is unverified, and was also
// named a member outside the run (the plan saying so of a host it holds).
// It is named once, and holds what it held: the primary's restart (with
// what to do), and, in a shard, every member's (the member may be another
// host, in another shard).
func TestRefusedPatroniClaimHolds(t *testing.T) {
	const refused = `s2 says it is Patroni member "s2", but the primary's Patroni lists that member at "10.0.0.3"`
	for _, shard := range []bool{false, true} {
		t.Run(fmt.Sprintf("shard=%t", shard), func(t *testing.T) {
			topos := replicated()
			delete(topos, "q")
			delete(topos, "q1")
			delete(topos, "lone")
			list := []facts.PatroniMember{{Name: "p", Role: "leader", State: "running", Host: "127.0.0.1"},
				{Name: "s1", Role: "replica", State: "streaming", Host: "127.0.0.1"}, {Name: "s2", Role: "replica", State: "streaming", Host: "10.0.0.3"}}
			for _, h := range []string{"p", "s1", "s2"} {
				topos[h].Patroni = &facts.Patroni{Scope: "demo", Name: h, Members: list}
			}
			m := &restarter{}
			s := clusterSession(t, m, topos, nil)
			s.runner.Shard = shard
			s.Apply(context.Background())
			for _, hr := range s.hosts {
				if notes := strings.Join(hr.notes, "\n"); strings.Contains(notes, "outside this run") || !strings.Contains(notes, "unverified: "+refused) {
					t.Errorf("%s: notes %q", hr.host.Name, notes)
				}
				e := errOf(hr)
				switch {
				case shard:
					if !strings.Contains(e, "refusing to restart a member of a replication cluster with members outside this shard") || !strings.Contains(e, refused) {
						t.Errorf("%s: %q, want the shard's refusal naming the claim", hr.host.Name, e)
					}
				case hr.host.Name == "p":
					if !strings.HasPrefix(e, "p: refusing to restart the primary: the run's members of cluster 1 are not all what they say ("+refused) {
						t.Errorf("p: %q, want the primary held by the claim", e)
					}
				case e != "":
					t.Errorf("%s: %v", hr.host.Name, e)
				}
			}
			want := []string{"s1", "s2"}
			if shard {
				want = nil
			}
			if !slices.Equal(m.order, want) {
				t.Errorf("restarted %v, want %v", m.order, want)
			}
		})
	}
}
