package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/internal/fakehost"
)

// shardSession is clusterSession planned by a Runner told the run is a
// shard (or not).
func shardSession(t *testing.T, m *restarter, drop []string, vars map[string]map[string]any, shard bool) *Session {
	t.Helper()
	topos := replicated()
	for _, h := range drop {
		delete(topos, h) // in another shard
	}
	s := clusterSession(t, m, topos, vars)
	s.runner.Shard = shard
	for _, hr := range s.hosts {
		hr.notes = nil
	}
	s.placeInClusters()
	return s
}

// TestShardRefusesSplitCluster: a shard restarts no member of a cluster
// it holds only part of (another shard may restart another member at the
// same moment), unless the partial-cluster var accepts it; check says so
// in the plan. A cluster wholly in the shard is applied as before, and a
// run that is no shard keeps the primary-only rule.
func TestShardRefusesSplitCluster(t *testing.T) {
	shardErr := "refusing to restart a member of a replication cluster with members outside this shard: another shard may restart one of them at the same time (cluster 1: "
	advice := "apply each replication cluster's hosts in one job (a --limit naming all of its members, left out of the --shard jobs), or set pgtune_restart_partial_cluster: true on this host to restart it anyway"
	shardNote := "apply will refuse to restart this member: its replication cluster has members outside this shard, and another shard may restart one of them at the same time (" + advice + ")"
	primaryErr := "refusing to restart the primary of cluster 1: "
	for _, tc := range []struct {
		name    string
		drop    []string // members of cluster 1 in another shard
		shard   bool
		vars    map[string]map[string]any
		refused map[string]string // host: its error
		applied []string          // of cluster 1
	}{
		{name: "shard, standby without its primary", drop: []string{"p", "s2"}, shard: true,
			refused: map[string]string{"s1": shardErr}},
		{name: "shard, primary and a standby without the other", drop: []string{"s2"}, shard: true,
			refused: map[string]string{"s1": shardErr, "p": shardErr}},
		{name: "shard, accepted by the var", drop: []string{"p", "s2"}, shard: true,
			vars: map[string]map[string]any{"s1": {PartialClusterVar: true}}, applied: []string{"s1"}},
		{name: "no shard, standby without its primary", drop: []string{"p", "s2"},
			applied: []string{"s1"}},
		{name: "no shard, primary and a standby", drop: []string{"s2"},
			refused: map[string]string{"p": primaryErr}, applied: []string{"s1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &restarter{}
			s := shardSession(t, m, tc.drop, tc.vars, tc.shard)
			for _, hr := range s.hosts {
				notes := strings.Join(hr.notes, "\n")
				want := tc.shard && tc.refused[hr.host.Name] != ""
				if strings.Contains(notes, shardNote) != want {
					t.Errorf("%s: notes %q; shard note wanted: %t", hr.host.Name, notes, want)
				}
			}
			s.Apply(context.Background())
			for _, hr := range s.hosts {
				want, e := tc.refused[hr.host.Name], errOf(hr)
				if want == "" && e != "" || !strings.Contains(e, want) {
					t.Errorf("%s: error %q, want %q", hr.host.Name, e, want)
				}
				if tc.shard && want != "" && !strings.HasSuffix(e, advice) {
					t.Errorf("%s: error %q does not say what to do", hr.host.Name, e)
				}
				if want != "" && slices.Contains(m.order, hr.host.Name) {
					t.Errorf("%s refused but applied (order %v)", hr.host.Name, m.order)
				}
			}
			for _, h := range append([]string{"q", "q1", "lone"}, tc.applied...) {
				if !slices.Contains(m.order, h) {
					t.Errorf("%s not applied (order %v)", h, m.order)
				}
			}
		})
	}
}

// TestStopClusterOneSession: members an earlier attempt failed
// (StopCluster, seeded by a resumed rollout) stop the rest of their
// cluster in a run of one session too; they themselves are retried, one
// at a time in cluster order, and a retry that fails again stops the
// members after it.
func TestStopClusterOneSession(t *testing.T) {
	for _, tc := range []struct {
		name      string
		seeded    []string
		fail      string
		untouched map[string]string // host: the member named in its error
		applied   []string          // of cluster 1, in order
	}{
		{name: "failed standby", seeded: []string{"s1"},
			untouched: map[string]string{"s2": "s1 of the same cluster failed in run R", "p": "s1 of the same cluster failed in run R"},
			applied:   []string{"s1"}},
		{name: "failed primary holds nothing", seeded: []string{"p"},
			applied: []string{"s1", "s2", "p"}},
		{name: "failed standby and primary", seeded: []string{"s1", "p"},
			untouched: map[string]string{"s2": "s1 of the same cluster failed in run R"},
			applied:   []string{"s1", "p"}},
		{name: "failed standby fails again", seeded: []string{"s1", "p"}, fail: "s1",
			untouched: map[string]string{"s2": "s1 of the same cluster failed;", "p": "s1 of the same cluster failed;"},
			applied:   []string{"s1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &restarter{fail: map[string]bool{tc.fail: true}}
			s := clusterSession(t, m, replicated(), nil)
			for _, h := range tc.seeded {
				s.runner.StopCluster(h, errors.New(h+" of the same cluster failed in run R"))
			}
			s.Apply(context.Background())
			for _, hr := range s.hosts {
				e, why := errOf(hr), tc.untouched[hr.host.Name]
				switch {
				case why != "":
					if !errors.Is(hr.err, ErrNotTouched) || !strings.Contains(e, hr.host.Name+": not touched: "+why) || !strings.HasSuffix(e, "; the cluster's rollout stopped there") {
						t.Errorf("%s: %q, want not touched: %s", hr.host.Name, e, why)
					}
				case hr.host.Name == tc.fail:
					if !strings.Contains(e, "server refused to start") {
						t.Errorf("%s: %q", hr.host.Name, e)
					}
				case e != "":
					t.Errorf("%s: %q, want applied", hr.host.Name, e)
				}
			}
			var got []string
			for _, h := range m.order {
				if h == "s1" || h == "s2" || h == "p" {
					got = append(got, h)
				}
			}
			if !slices.Equal(got, tc.applied) || len(m.order)-len(got) != 3 {
				t.Errorf("applied %v, want %v of cluster 1 and q1, q, lone", m.order, tc.applied)
			}
		})
	}
}

// TestClusterStopAcrossSessions: a rollout applies each wave in a session
// of its own, over one Runner whose Layout knows every member. A standby
// that fails, or is not back and streaming in time, still stops its
// cluster in the sessions after it.
func TestClusterStopAcrossSessions(t *testing.T) {
	for _, tc := range []struct {
		name, fail string
		streams    bool // the standby's server can be asked whether it streams
		want       string
	}{
		{name: "apply fails", fail: "s1", want: "server refused to start"},
		{name: "not streaming again", streams: true, want: "s1: standby not back and streaming within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := replicated()
			m := &restarter{fail: map[string]bool{tc.fail: true}}
			inWaves(t, m, all, func(r *Runner, _ []HostFacts) { r.StreamTimeout = time.Millisecond }, func(s *Session) {
				for _, hr := range s.hosts {
					if hr.host.Name == "s1" && tc.streams {
						neverStreams(hr)
					}
				}
				s.Apply(context.Background())
				for _, hr := range s.hosts {
					e := errOf(hr)
					switch hr.host.Name {
					case "s1":
						if !strings.Contains(e, tc.want) {
							t.Errorf("s1: %q, want %q", e, tc.want)
						}
					case "s2", "p":
						if !errors.Is(hr.err, ErrNotTouched) || !strings.Contains(e, hr.host.Name+": not touched: s1 of the same cluster failed; the cluster's rollout stopped there") {
							t.Errorf("%s: %q, want not touched because of s1", hr.host.Name, e)
						}
					default:
						if e != "" {
							t.Errorf("%s (another cluster): %q", hr.host.Name, e)
						}
					}
				}
			})
			if slices.Contains(m.order, "s2") || slices.Contains(m.order, "p") || len(m.order) != 4 {
				t.Errorf("applied %v, want s1 and the other clusters only", m.order)
			}
		})
	}
}

// TestRetriedStandbyMustStream: a standby an earlier attempt failed and
// that has nothing left to apply (its restart went through, its streaming
// did not come back) is not verified until it streams: verified, the
// next resume would take its primary down.
func TestRetriedStandbyMustStream(t *testing.T) {
	m := &restarter{inPolicy: map[string]bool{"s1": true}}
	s := clusterSession(t, m, replicated(), nil)
	s.runner.StreamTimeout = time.Millisecond
	s.runner.StopCluster("s1", errors.New("s1 of the same cluster failed in run R"))
	for _, hr := range s.hosts {
		if hr.host.Name == "s1" {
			hr.steps = []*step{{module: m, plan: &plan.ModulePlan{Module: "restarter"}}} // in policy
			neverStreams(hr)
		}
	}
	s.Apply(context.Background())
	for _, hr := range s.hosts {
		e := errOf(hr)
		switch hr.host.Name {
		case "s1":
			if !strings.Contains(e, "s1: standby not back and streaming within") {
				t.Errorf("s1: %q, want the streaming wait's error", e)
			}
		case "s2", "p":
			if !errors.Is(hr.err, ErrNotTouched) {
				t.Errorf("%s: %q, want not touched", hr.host.Name, e)
			}
		}
	}
	if slices.Contains(m.order, "s1") {
		t.Errorf("s1 had nothing to apply but was applied (order %v)", m.order)
	}
}

// neverStreams makes hr a running server that, asked whether it streams,
// never answers: a host that runs no commands.
func neverStreams(hr *hostRun) {
	hr.tr = fakehost.New()
	hr.facts.Postgres = &facts.Postgres{Owner: "postgres", Running: true, BinDir: "/nonexistent", Port: 5432}
}

// TestRetriedMemberWaitsForDownMember: a member an earlier attempt failed
// is retried, but not while another member of its cluster is down.
func TestRetriedMemberWaitsForDownMember(t *testing.T) {
	m := &restarter{}
	topos := replicated()
	topos["p"].Standbys = topos["p"].Standbys[:1] // s2 streams no more
	topos["s2"] = &facts.Topology{Role: facts.RoleStopped, SystemID: "1"}
	s := clusterSession(t, m, topos, nil)
	s.runner.StopCluster("s1", errors.New("s1 of the same cluster failed in run R"))
	s.Apply(context.Background())
	for _, hr := range s.hosts {
		switch hr.host.Name {
		case "s1":
			if !errors.Is(hr.err, ErrNotTouched) || !strings.Contains(errOf(hr), "s2 of the same cluster is down") {
				t.Errorf("s1: %q, want not touched because s2 is down", errOf(hr))
			}
		case "p":
			if !errors.Is(hr.err, ErrNotTouched) {
				t.Errorf("p: %q, want not touched", errOf(hr))
			}
		case "s2":
			if !strings.Contains(errOf(hr), "PostgreSQL is not running") {
				t.Errorf("s2: %q, want its own error", errOf(hr))
			}
		}
	}
	if slices.Contains(m.order, "s1") || slices.Contains(m.order, "p") {
		t.Errorf("applied %v while s2 is down", m.order)
	}
}

// TestPlanKeepsRetriedMembersConnection: planning closes the connection
// of a host with nothing to apply, but not of a member an earlier attempt
// failed: its streaming is asked after the wave (awaitStreaming returns
// at once for a host without one).
func TestPlanKeepsRetriedMembersConnection(t *testing.T) {
	m := &restarter{}
	s := clusterSession(t, m, replicated(), nil)
	s.runner.StopCluster("s1", errors.New("s1 of the same cluster failed in run R"))
	for _, hr := range s.hosts {
		hr.steps = []*step{{module: m, plan: &plan.ModulePlan{Module: "restarter"}}} // in policy
		s.releaseIfDone(hr)
		if kept := hr.tr != nil; kept != (hr.host.Name == "s1") {
			t.Errorf("%s: connection kept %t", hr.host.Name, kept)
		}
	}
}

// TestDoneAfterStreamingWait: a rollout's run state learns a standby's
// outcome (ApplyHooks.Done) only once its streaming wait is over, so it
// never holds as verified a standby that then fails the wait.
func TestDoneAfterStreamingWait(t *testing.T) {
	m := &restarter{}
	s := clusterSession(t, m, replicated(), nil)
	s.runner.StreamTimeout = time.Millisecond
	for _, hr := range s.hosts {
		if hr.host.Name == "s1" {
			neverStreams(hr)
		}
	}
	var mu sync.Mutex
	done := map[string][]error{}
	s.Apply(WithApplyHooks(context.Background(), ApplyHooks{Done: func(r HostResult) {
		mu.Lock()
		defer mu.Unlock()
		done[r.Name] = append(done[r.Name], r.Err)
	}}))
	if errs := done["s1"]; len(errs) != 1 || errs[0] == nil || !strings.Contains(errs[0].Error(), "standby not back and streaming within") {
		t.Errorf("Done told s1 %v, want once, with its failed wait", errs)
	}
	for _, h := range []string{"p", "s2", "q", "q1", "lone"} {
		if len(done[h]) != 1 {
			t.Errorf("Done told %s %d times, want once", h, len(done[h]))
		}
	}
}

// TestDownMemberStopsEarlierWaves: under a rollout the waves are sessions
// of their own; a member the first gather saw down (StopDownMembers)
// keeps the members of earlier waves from going down too.
func TestDownMemberStopsEarlierWaves(t *testing.T) {
	all := replicated()
	all["p"].Standbys = all["p"].Standbys[:1] // s2 streams no more
	all["s2"] = &facts.Topology{Role: facts.RoleStopped, SystemID: "1"}
	m := &restarter{}
	inWaves(t, m, all, (*Runner).StopDownMembers, func(s *Session) {
		s.Apply(context.Background())
		for _, hr := range s.hosts {
			if (hr.host.Name == "s1" || hr.host.Name == "p") && (!errors.Is(hr.err, ErrNotTouched) || !strings.Contains(errOf(hr), "s2 of the same cluster is down")) {
				t.Errorf("%s: %q, want not touched because s2 is down", hr.host.Name, errOf(hr))
			}
		}
	})
	if slices.Contains(m.order, "s1") || slices.Contains(m.order, "p") || len(m.order) != 3 {
		t.Errorf("applied %v, want the other clusters only", m.order)
	}
}

// inWaves applies the hosts of all as a rollout does: the waves [s1 q1]
// [s2 lone] [p q], each a session of its own over one Runner, whose
// Layout holds every host's facts; setup prepares that Runner, apply
// applies and checks each wave's session.
func inWaves(t *testing.T, m *restarter, all map[string]*facts.Topology, setup func(*Runner, []HostFacts), apply func(*Session)) {
	t.Helper()
	var hf []HostFacts
	for name, topo := range all {
		hf = append(hf, HostFacts{Name: name, Facts: &facts.Facts{Topology: topo}, Address: "127.0.0.1"}) // as clusterSession
	}
	var r *Runner
	for _, wave := range [][]string{{"s1", "q1"}, {"s2", "lone"}, {"p", "q"}} {
		topos := map[string]*facts.Topology{}
		for _, h := range wave {
			topos[h] = all[h]
		}
		s := clusterSession(t, m, topos, nil)
		if r == nil {
			r = s.runner
			r.Layout, _ = ClusterLayout(context.Background(), hf, 1)
			setup(r, hf)
		}
		s.runner = r // one Runner for the whole rollout
		apply(s)
	}
}

// TestClusterLayoutReachesByAddress: the layout a serial rollout makes
// from the facts read before its first batch knows each member by its
// inventory address too, as a session's own layout does: a standby not
// streaming at that moment whose primary_conninfo names its primary by
// that address has not lost an upstream outside the run (that held the
// cluster, as if a member were down).
func TestClusterLayoutReachesByAddress(t *testing.T) {
	pg := &facts.Postgres{Port: 5432, SocketDir: "/run/postgresql"}
	hosts := []HostFacts{
		{Name: "p", Address: "10.0.0.1", Facts: &facts.Facts{Hostname: "pm", Postgres: pg,
			Topology: &facts.Topology{Role: "primary", SystemID: "1"}}},
		{Name: "s1", Address: "10.0.0.2", Facts: &facts.Facts{Hostname: "sm", Postgres: pg,
			Topology: &facts.Topology{Role: "standby", SystemID: "1", Upstream: "10.0.0.1:5432", Receiver: "waiting"}}},
	}
	l, _ := ClusterLayout(context.Background(), hosts, 1)
	if len(l.Clusters) != 1 || len(l.Clusters[0].NotStreaming) != 0 {
		t.Fatalf("clusters %v, want one with nothing held against it", l.Clusters)
	}
}

// TestClusterLayoutReplicationNetwork: members reached over a replication
// network (pgtune_replication_host) are known by that address too: a
// cascaded standby whose primary_conninfo names its upstream standby's
// replication address is checked against that standby's WAL senders,
// not the primary's; one whose upstream is no member of the run is told
// apart from one its upstream does not serve.
func TestClusterLayoutReplicationNetwork(t *testing.T) {
	pg := &facts.Postgres{Port: 5432, SocketDir: "/run/postgresql"}
	host := func(name, addr, repl, machine string, topo *facts.Topology) HostFacts {
		return HostFacts{Name: name, Address: addr, ReplicationHost: repl, Facts: &facts.Facts{Hostname: machine, Postgres: pg, Topology: topo}}
	}
	standby := func(upstream string, rows ...string) *facts.Topology {
		t := &facts.Topology{Role: "standby", SystemID: "1", Upstream: upstream, Receiver: "streaming"}
		for _, r := range rows {
			t.Standbys = append(t.Standbys, facts.StandbyInfo{Name: "walreceiver", Addr: r, State: "streaming"})
		}
		return t
	}
	p := host("p", "10.0.0.1", "192.168.1.1", "pm", &facts.Topology{Role: "primary", SystemID: "1",
		Standbys: []facts.StandbyInfo{{Name: "walreceiver", Addr: "192.168.1.2", State: "streaming"}}})
	for _, tc := range []struct {
		name       string
		c1         HostFacts
		unverified string
	}{
		{"a cascade over the replication network", host("c1", "10.0.0.3", "192.168.1.3", "cm", standby("192.168.1.2:5432")), ""},
		{"an upstream no member of the run", host("c1", "10.0.0.3", "192.168.1.3", "cm", standby("192.168.9.9:5432")),
			`c1 says it streams from upstream "192.168.9.9:5432", which matches no member of the run, and no WAL sender of the primary p is to an address the controller knows c1 by (10.0.0.3, 192.168.1.3)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, _ := ClusterLayout(context.Background(), []HostFacts{p, host("s1", "10.0.0.2", "192.168.1.2", "sm", standby("192.168.1.1:5432", "192.168.1.3")), tc.c1}, 4)
			c := l.ClusterOf("p")
			if got := strings.Join(c.Unverified, "; "); got != tc.unverified {
				t.Errorf("unverified %q\nwant %q (%s)", got, tc.unverified, c)
			}
			if tc.unverified == "" && c.Upstreams["c1"] != "s1" {
				t.Errorf("c1 not linked to s1: %s", c)
			}
		})
	}
}
