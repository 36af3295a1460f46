package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/topology"
)

// Replication clusters: apply never has two members of one cluster down
// at once. Hosts are grouped by their servers' system identifier
// (engine/topology); the members of a replicated cluster are applied one
// at a time, standbys first, each back, streaming and caught up before
// the next, the primary last. Hosts in no replicated cluster are applied
// together with the first standbys, Forks at a time, as before. A member
// that fails stops the rest of its cluster for the whole run (the
// Runner's stops), across the sessions of a rollout's waves and batches.

// PartialClusterVar, set true on a primary's host in the inventory,
// lets apply restart the primary of a cluster some of whose members the
// run does not include (not in the inventory, or left out by --limit).
// In a shard (Runner.Shard) it is asked of every member alike.
const PartialClusterVar = "pgtune_restart_partial_cluster"

// ErrNotTouched is in the error of a host apply left alone because
// another member of its replication cluster failed or is down: the
// cluster's rollout stopped before it. Nothing was done on the host.
var ErrNotTouched = errors.New("not touched")

// clusterStops records, by host name, the members that stopped their
// cluster. Host names, not *topology.Cluster: without Runner.Layout each
// session groups its own hosts into clusters of its own.
type clusterStops struct {
	mu sync.Mutex
	// now: failed in this run; earlier: failed in an earlier attempt of
	// a resumed rollout (StopCluster).
	now, earlier map[string]error
	// byID: members an earlier attempt failed, by their cluster's system
	// identifier (StopClusterID), for a member this run has no facts of.
	byID map[string]map[string]error
}

func (cs *clusterStops) add(host string, why error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.now == nil {
		cs.now = map[string]error{}
	}
	if cs.now[host] == nil {
		cs.now[host] = why
	}
}

// of is why cluster c is stopped for host (nil when it is not): the
// first other member, in restart order, that stopped it. A host is never
// stopped by itself, nor by a primary an earlier attempt failed, and a
// member an earlier attempt failed never by another such member: a resume retries every member that failed, one at
// a time in cluster order (a failure in this run still stops the rest),
// and only the members that did not fail wait.
func (cs *clusterStops) of(c *topology.Cluster, host string) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, m := range c.Members() {
		if m == host {
			continue
		}
		if why := cs.now[m]; why != nil {
			return why
		}
		// A primary an earlier attempt failed holds nothing: its
		// standbys come before it anyway (and a switchover needs one on
		// the new settings), and a primary left down stops its cluster
		// as any down member does.
		if why := cs.earlier[m]; why != nil && cs.earlier[host] == nil && m != c.Primary {
			return why
		}
	}
	// A failed member the layout does not hold (unreachable now, or left
	// out by --limit) cannot be retried first: the cluster waits for it.
	for _, m := range slices.Sorted(maps.Keys(cs.byID[c.ID])) {
		if m != host && !slices.Contains(c.Members(), m) {
			return cs.byID[c.ID][m]
		}
	}
	return nil
}

// retried reports whether host failed in an earlier attempt
// (StopCluster) and is retried now.
func (cs *clusterStops) retried(host string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.earlier[host] != nil
}

// StopClusterID is StopCluster for a member known by its cluster's
// system identifier (from a run state): it holds that cluster even when
// this run has no facts of host or does not include it.
func (r *Runner) StopClusterID(id, host string, why error) {
	if id == "" {
		return
	}
	cs := &r.stops
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.byID == nil {
		cs.byID = map[string]map[string]error{}
	}
	if cs.byID[id] == nil {
		cs.byID[id] = map[string]error{}
	}
	cs.byID[id][host] = why
}

// ClusterID is the system identifier of host's replication cluster as
// the session sees it, "" when it is in none with other members.
func (s *Session) ClusterID(host string) string {
	c := s.layout().ClusterOf(host)
	if c == nil || !c.Replicated() {
		return ""
	}
	return c.ID
}

// StopDownMembers stops, for the whole run, the cluster of every host
// the facts show down (PostgreSQL not running). A rollout reads every
// host's facts before its first batch; a member down then, in a later
// wave, must keep the members of earlier waves up as well, not only its
// own wave's (the rule applyInClusterOrder applies to a session).
func (r *Runner) StopDownMembers(hosts []HostFacts) {
	for _, h := range hosts {
		if h.Facts != nil && h.Facts.Topology.IsStopped() {
			r.stops.add(h.Name, memberDown(h.Name))
		}
	}
}

func memberDown(host string) error {
	return fmt.Errorf("%s of the same cluster is down (PostgreSQL not running: start it, or leave it out with --limit)", host)
}

// StopCluster stops the replication cluster of host for the rest of the
// run: no other member of it is applied (each fails with ErrNotTouched
// and why), but host itself is, and so is any other member given to
// StopCluster. A resumed rollout calls it for each host an earlier
// attempt failed: such a member may be left down or not streaming, and
// no member that did not fail may go down before it is verified again.
func (r *Runner) StopCluster(host string, why error) {
	cs := &r.stops
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.earlier == nil {
		cs.earlier = map[string]error{}
	}
	cs.earlier[host] = why
}

// Defaults for the wait after a standby's apply.
const (
	// DefaultMaxLagBytes is how far a restarted standby's replay may lag
	// the WAL it received before the next member is touched.
	DefaultMaxLagBytes = 16 << 20
	// DefaultStreamTimeout bounds the wait for a restarted standby to
	// stream again: past it the cluster's rollout stops.
	DefaultStreamTimeout = 2 * time.Minute
)

// streamPoll is how often a restarted standby is asked whether it
// streams again.
const streamPoll = 500 * time.Millisecond

// members is the session's hosts with their replication facts, and the
// addresses resolveMembers found (only IP literals before it ran).
func (s *Session) members() []topology.Member {
	out := make([]topology.Member, 0, len(s.hosts))
	for _, hr := range s.hosts {
		src := sourceOf(hr.host)
		m := topology.Member{Host: hr.host.Name, Names: src.names(hr.host.Conn.Address)}
		if hr.facts != nil {
			m.Topo, m.Server = hr.facts.Topology, serverOf(hr.facts)
			setReceiver(&m, hr.facts)
			if m.Topo != nil {
				m.PatroniHosts = hr.patroniHosts
				if hr.addrsResolved {
					m.Addrs = hr.addrs
				} else {
					m.Addrs = ipAddrs(sourceOf(hr.host))
				}
			}
			m.Machine, m.Reach = reachOf(hr.facts, append(append([]string(nil), m.Names...), m.Addrs...)...)
		}
		out = append(out, m)
	}
	return out
}

// setReceiver gives m the WAL receiver's connections and sockets of the
// server f's topology describes, as the gather read them with its
// postmaster, and the port that server listens on.
func setReceiver(m *topology.Member, f *facts.Facts) {
	if pg := f.Postgres; pg != nil {
		m.Receiver, m.ReceiverRead, m.ReceiverSockets, m.Port = pg.WALReceiver, pg.WALReceiverRead, pg.WALReceiverSockets, pg.Port
	}
}

// resolveMembers resolves, on the controller and under ctx, the
// addresses of the session's hosts that share a cluster with another
// (needAddrs), --forks at a time, once a session; a name that does not
// resolve is a note on its host.
func (s *Session) resolveMembers(ctx context.Context) {
	if l := s.runner.Layout; l != nil {
		// Resolved when the layout was made: a switchover checks
		// against the same answers (Target.Addrs), with no lookup
		// outside the run's context.
		for _, hr := range s.hosts {
			if a, ok := l.Addrs(hr.host.Name); ok {
				hr.addrs, hr.addrsResolved = a, true
			}
		}
		return
	}
	ms := s.members()
	need := needAddrs(ms)
	srcs := make([]addrSource, len(s.hosts))
	for i, hr := range s.hosts {
		if need[i] {
			srcs[i] = sourceOf(hr.host)
		}
	}
	addrs, notes := resolveAddrs(ctx, srcs, need, s.runner.Forks)
	for i, hr := range s.hosts {
		hr.addrs, hr.addrsResolved = addrs[i], true
		if ctx.Err() == nil { // interrupted: "context canceled" is no finding
			hr.notes = append(hr.notes, notes[i]...)
		}
	}
	// Then the hosts the primaries' Patroni lists members at, when the
	// names the inventory gives a standby do not tie it to its member.
	hosts := resolvePatroniHosts(ctx, topology.Group(s.members()), s.runner.Forks)
	for _, hr := range s.hosts {
		hr.patroniHosts = hosts[hr.host.Name]
	}
}

func hostName(hr *hostRun) string { return hr.host.Name }

// layout is the run's clusters: the Runner's when set, else the
// session's own hosts grouped.
func (s *Session) layout() *topology.Layout {
	if s.runner.Layout != nil {
		return s.runner.Layout
	}
	if s.clusters != nil {
		return s.clusters
	}
	return topology.Group(s.members())
}

// placeInClusters notes each member's cluster in the plan, and refuses a
// restart of a primary whose cluster reaches outside the run.
func (s *Session) placeInClusters() {
	l := s.layout()
	for _, hr := range s.hosts {
		if hr.facts != nil && hr.facts.TopologyError != "" {
			hr.notes = append(hr.notes, "replication unknown ("+hr.facts.TopologyError+"): this host is applied outside any cluster order")
		}
		c := l.ClusterOf(hr.host.Name)
		if c == nil || !c.Replicated() {
			continue
		}
		hr.notes = append(hr.notes, "replication "+c.String()+"; apply restarts standbys first, one at a time, the primary last")
		if s.shardSplits(c, hr) {
			hr.notes = append(hr.notes, "apply will refuse to restart this member: its replication cluster has members outside this shard, and another shard may restart one of them at the same time ("+shardAdvice+")")
			continue
		}
		if c.Split() {
			hr.notes = append(hr.notes, "apply will not touch this member: "+splitWhy(c))
			continue
		}
		if heldByNotStreaming(c, hr) {
			hr.notes = append(hr.notes, "apply will not restart this member: "+notStreamingWhy(c))
			continue
		}
		if c.Primary == hr.host.Name && len(c.Outside) > 0 && plansRestart(hr) && !partialAccepted(hr) {
			hr.notes = append(hr.notes, fmt.Sprintf("apply will refuse to restart this primary: its cluster has members outside this run (set %s: true on this host to restart it anyway)", PartialClusterVar))
		}
		if c.Primary == hr.host.Name && len(c.Waiting) > 0 && plansRestart(hr) && !partialAccepted(hr) {
			hr.notes = append(hr.notes, "apply will refuse to restart this primary: "+waitingWhy(c))
		}
		if c.Primary == hr.host.Name && len(c.Unverified) > 0 && plansRestart(hr) && !partialAccepted(hr) {
			hr.notes = append(hr.notes, "apply will refuse to restart this primary: "+unverifiedWhy(c))
		}
	}
}

// heldByNotStreaming reports whether hr, a member of c, may not be
// restarted because c's members show another member not streaming that
// the run has no facts of or does not include (topology.Cluster's
// NotStreaming), or a host of the run saying it is a Patroni member does
// not stream and the primary's Patroni does not report that member up
// (Waiting, HoldsEveryMember): restarted, hr would be the second member
// down.
// PartialClusterVar on hr accepts it, as it accepts a cluster the run
// holds only part of.
func heldByNotStreaming(c *topology.Cluster, hr *hostRun) bool {
	return c != nil && c.HoldsEveryMember() && plansRestart(hr) && !partialAccepted(hr)
}

// notStreamingWhy says what holds c's members and the ways out.
func notStreamingWhy(c *topology.Cluster) string {
	var what []string
	if len(c.NotStreaming) > 0 {
		what = append(what, fmt.Sprintf("a member this run has no facts of or does not include that is not streaming (%s)", strings.Join(c.NotStreaming, "; ")))
	}
	if len(c.Waiting) > 0 {
		what = append(what, fmt.Sprintf("a member of this run that is not streaming (%s)", strings.Join(c.Waiting, "; ")))
	}
	way := "bring that member back and streaming (drop a replication slot whose standby is gone for good)"
	switch {
	case len(c.Waiting) > 0 && len(c.NotStreaming) > 0:
		way = "bring those members back and streaming (drop a replication slot whose standby is gone for good) and run again"
	case len(c.Waiting) > 0:
		way = "let it stream again (patronictl list shows it streaming; a replica reconnecting or catching up gets there by itself) and run again"
	}
	return fmt.Sprintf("cluster %s has %s: restarting another member now would take a second one down; %s, or set %s: true on this host to restart it anyway",
		c.ID, strings.Join(what, ", and "), way, PartialClusterVar)
}

// waitingWhy says why the primary of a cluster with a member of the run
// that is not streaming (topology.Cluster's Waiting) is not restarted.
func waitingWhy(c *topology.Cluster) string {
	return fmt.Sprintf("cluster %s has a member of this run that is not streaming (%s), so its upstream shows no WAL sender to it and nothing vouches that it is that member: let it stream again (patronictl list shows it streaming; a replica reconnecting or catching up gets there by itself) and run again, or set %s: true on this host to restart it anyway",
		c.ID, strings.Join(c.Waiting, "; "), PartialClusterVar)
}

// splitWhy says why no member of a cluster that two hosts say they are
// the primary of is touched.
func splitWhy(c *topology.Cluster) string {
	return fmt.Sprintf("%s and %s say they are the primary of cluster %s (a split brain, a promoted copy, or a host claiming the cluster's system identifier): pgtune demotes neither on the other's word and touches no member of the cluster; find out which is the primary, and run again with the other left out (--limit) or made a standby",
		c.Primary, strings.Join(c.OtherPrimaries, ", "), c.ID)
}

// unverifiedWhy says why the primary of a cluster whose standbys do not
// all check out against their upstreams is not restarted.
func unverifiedWhy(c *topology.Cluster) string {
	return fmt.Sprintf("the run's members of cluster %s are not all what they say (%s): a host may be claiming the cluster's system identifier; if a standby replicates over another network than the one it is reached at, set %s on it to that address (the one its upstream's pg_stat_replication shows), or leave it out with --limit; set %s: true on this host to restart it anyway",
		c.ID, strings.Join(c.Unverified, "; "), ReplicationHostVar, PartialClusterVar)
}

// plansRestart reports whether a module plans a service restart.
func plansRestart(hr *hostRun) bool {
	for _, st := range hr.steps {
		if st.plan == nil {
			continue
		}
		for _, c := range st.plan.Changes {
			if c.Kind == plan.KindRestart {
				return true
			}
		}
	}
	return false
}

// shardSplits reports whether a shard would restart hr, a member of
// replicated cluster c that has members outside the run: shards are cut
// by host name alone, so another shard may hold another member of c and
// restart it at the same moment. Refused unless PartialClusterVar. A
// Patroni member that only a host of the run says it is, not streaming
// (Waiting) or listed elsewhere (Incomplete), counts too: that is the
// host's word, and the member may be in another shard.
func (s *Session) shardSplits(c *topology.Cluster, hr *hostRun) bool {
	return s.runner.Shard && c != nil && c.Replicated() && (c.Incomplete() || len(c.Waiting) > 0) && plansRestart(hr) && !partialAccepted(hr)
}

// shardAdvice is what to do about a cluster split across shards.
const shardAdvice = "apply each replication cluster's hosts in one job (a --limit naming all of its members, left out of the --shard jobs), or set " + PartialClusterVar + ": true on this host to restart it anyway"

// shardRefusal is hr's error when shardSplits refuses it.
func shardRefusal(c *topology.Cluster, hr *hostRun) error {
	return fmt.Errorf("%s: refusing to restart a member of a replication cluster with members outside this shard: another shard may restart one of them at the same time (%s); %s",
		hr.host.Name, c, shardAdvice)
}

func partialAccepted(hr *hostRun) bool {
	v, ok := hr.host.Vars[PartialClusterVar]
	if !ok {
		return false
	}
	b, ok := expr.ParseBool(fmt.Sprint(v))
	return ok && b
}

// applyInClusterOrder applies the session wave by wave when some of its
// hosts are members of a replicated cluster, and reports whether it did
// (false: nothing done, no host is).
func (s *Session) applyInClusterOrder(ctx context.Context) bool {
	l := s.layout()
	replicated := false
	for _, hr := range s.hosts {
		if c := l.ClusterOf(hr.host.Name); c != nil && c.Replicated() {
			replicated = true
		}
	}
	if !replicated {
		return false
	}
	// A member's failure stops its cluster for the whole run, not only
	// for this session: a rollout's wave holds one member of a cluster,
	// and the next member comes in a later wave's session.
	stops := &s.runner.stops
	for _, hr := range s.hosts {
		// Every refusal is told on its own host, before any member moves.
		if hr.err == nil && hr.tr != nil {
			hr.err = refusal(hr)
		}
		if c := l.ClusterOf(hr.host.Name); hr.err == nil && hr.tr != nil && s.shardSplits(c, hr) {
			hr.err = shardRefusal(c, hr)
		}
	}
	for _, hr := range s.hosts {
		// A member that already failed (its facts or its check) stops its
		// cluster before any member is touched.
		if c := l.ClusterOf(hr.host.Name); c != nil && c.Replicated() && hr.err != nil {
			stops.add(hr.host.Name, fmt.Errorf("%s of the same cluster failed before apply", hr.host.Name))
		}
	}
	for _, hr := range s.hosts {
		// A member that is down (its server not running) stops its
		// cluster too: with it down, taking any other member down leaves
		// the cluster with no standby (or no primary), and a switchover
		// could not repoint it. Whatever else stopped the cluster: a
		// member an earlier attempt failed is retried, but not while
		// another member is down.
		if c := l.ClusterOf(hr.host.Name); c != nil && c.Replicated() && hr.facts != nil && hr.facts.Topology.IsStopped() {
			stops.add(hr.host.Name, memberDown(hr.host.Name))
			if hr.err == nil && hr.tr != nil {
				hr.err = fmt.Errorf("%s: PostgreSQL is not running: the rollout of its cluster (%s) stops before any member is touched; start it and run again", hr.host.Name, c)
			}
		}
	}
	for _, wave := range topology.Waves(l, s.hosts, hostName) {
		var run []*hostRun
		for _, hr := range wave {
			c := l.ClusterOf(hr.host.Name)
			if c != nil && c.Replicated() && hr.err == nil && hr.tr != nil {
				if why := stops.of(c, hr.host.Name); why != nil {
					hr.err = fmt.Errorf("%s: %w: %w; the cluster's rollout stopped there", hr.host.Name, ErrNotTouched, why)
					notApplied(ctx, hr)
					continue
				}
			}
			if c != nil && hr.err == nil && hr.tr != nil && c.Split() {
				hr.err = fmt.Errorf("%s: %w: %s", hr.host.Name, ErrNotTouched, splitWhy(c))
				notApplied(ctx, hr)
				continue
			}
			if c != nil && hr.err == nil && hr.tr != nil && heldByNotStreaming(c, hr) {
				hr.err = fmt.Errorf("%s: %w: %s", hr.host.Name, ErrNotTouched, notStreamingWhy(c))
				notApplied(ctx, hr)
				continue
			}
			if c != nil && c.Primary == hr.host.Name && c.Replicated() && len(c.Outside) > 0 && hr.err == nil && plansRestart(hr) && !partialAccepted(hr) {
				hr.err = fmt.Errorf("%s: refusing to restart the primary of %s: the run does not include every member; set %s: true on this host to restart it anyway",
					hr.host.Name, c, PartialClusterVar)
				notApplied(ctx, hr)
				continue
			}
			if c != nil && c.Primary == hr.host.Name && len(c.Waiting) > 0 && hr.err == nil && plansRestart(hr) && !partialAccepted(hr) {
				hr.err = fmt.Errorf("%s: refusing to restart the primary: %s", hr.host.Name, waitingWhy(c))
				notApplied(ctx, hr)
				continue
			}
			if c != nil && c.Primary == hr.host.Name && len(c.Unverified) > 0 && hr.err == nil && plansRestart(hr) && !partialAccepted(hr) {
				hr.err = fmt.Errorf("%s: refusing to restart the primary: %s", hr.host.Name, unverifiedWhy(c))
				notApplied(ctx, hr)
				continue
			}
			run = append(run, hr)
		}
		// The wave's own session has no phase: each host's outcome is
		// told (HostDone) only once it is final, after the standby's
		// wait below, and for the hosts not touched as well.
		sub := &Session{runner: s.runner, book: s.book, hosts: run, inv: s.inv, clusters: l, outer: s}
		sub.each(ctx, sub.applyHost)
		for _, hr := range run {
			c := l.ClusterOf(hr.host.Name)
			if c == nil || !c.Replicated() {
				continue
			}
			// A member an earlier attempt failed is waited for even with
			// nothing left to apply: it may have been left not streaming,
			// and verifying it lets the next resume take its primary down.
			if hr.err == nil && (len(hr.applied) > 0 || stops.retried(hr.host.Name)) && c.Primary != hr.host.Name {
				hr.err = s.awaitStreaming(ctx, hr)
			}
			if hr.err != nil {
				stops.add(hr.host.Name, fmt.Errorf("%s of the same cluster failed", hr.host.Name))
			}
		}
		// Only now is a standby's outcome final: a run state must not
		// hold it verified while it may still fail its wait.
		for _, hr := range run {
			hostApplied(ctx, hr, &hr.started)
		}
		for _, hr := range wave {
			s.hostDone(hr)
		}
	}
	return true
}

// notApplied tells Apply's Done hook (ApplyHooks) about a host the
// cluster order left alone, as the wave does for the hosts it applied.
func notApplied(ctx context.Context, hr *hostRun) {
	started := false
	hostApplied(ctx, hr, &started)
}

// awaitStreaming waits until a standby that was just applied streams
// again with its replay caught up to within the lag bound: only then may
// the next member of its cluster go down.
func (s *Session) awaitStreaming(ctx context.Context, hr *hostRun) error {
	maxLag, timeout := s.runner.MaxLagBytes, s.runner.StreamTimeout
	if maxLag <= 0 {
		maxLag = DefaultMaxLagBytes
	}
	if timeout <= 0 {
		timeout = DefaultStreamTimeout
	}
	if hr.tr == nil || hr.facts == nil || hr.facts.Postgres == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	log := s.log(hr)
	last := errors.New("not asked yet")
	for {
		topo, err := facts.GatherTopology(ctx, hr.tr, hr.host.Conn.Become, hr.facts.Postgres)
		switch {
		case err != nil:
			last = err
		case topo == nil || topo.Role != "standby":
			last = errors.New("the server is not a standby any more")
		case topo.Receiver != "streaming":
			last = fmt.Errorf("its WAL receiver is %q, not streaming", topo.Receiver)
		case topo.ReplayLagBytes > maxLag:
			last = fmt.Errorf("its replay lags %d bytes behind (bound %d)", topo.ReplayLagBytes, maxLag)
		default:
			log.Info("standby streaming again", "replay_lag_bytes", topo.ReplayLagBytes)
			hr.facts.Topology = topo
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: standby not back and streaming within %v (%v): the cluster's rollout stops before its next member", hr.host.Name, timeout, last)
		case <-time.After(streamPoll):
		}
	}
}

// ClusterLayout groups hosts' facts (Runner.Facts) into replication
// clusters: set it as Runner.Layout before a rollout that works on a few
// hosts at a time, and use its order for the batches (topology.Sort and
// topology.Waves, e.g. in rollout.Order).
//
// The addresses of the members sharing a cluster are resolved on the
// controller under ctx, at most limit at once; notes says which names did
// not resolve (host, name, error), for the operator.
func ClusterLayout(ctx context.Context, hosts []HostFacts, limit int) (l *topology.Layout, notes []string) {
	members := make([]topology.Member, 0, len(hosts))
	srcs := make([]addrSource, 0, len(hosts))
	for _, h := range hosts {
		src := sourceOfFacts(h)
		m := topology.Member{Host: h.Name, Names: src.names(h.Address)}
		if h.Facts != nil {
			m.Topo, m.Server = h.Facts.Topology, serverOf(h.Facts)
			setReceiver(&m, h.Facts)
		}
		members = append(members, m)
		srcs = append(srcs, src)
	}
	addrs, hostNotes := resolveAddrs(ctx, srcs, needAddrs(members), limit)
	for i, h := range hosts {
		members[i].Addrs = addrs[i]
		notes = append(notes, hostNotes[i]...)
		if h.Facts != nil {
			// as a session's own layout (members): the replication
			// address and the resolved ones link cascades too
			members[i].Machine, members[i].Reach = reachOf(h.Facts, append(append([]string(nil), members[i].Names...), addrs[i]...)...)
		}
	}
	l = topology.Group(members)
	// Then the hosts the primaries' Patroni lists members at, when the
	// names the inventory gives a standby do not tie it to its member.
	if ph := resolvePatroniHosts(ctx, l, limit); len(ph) > 0 {
		for i := range members {
			members[i].PatroniHosts = ph[members[i].Host]
		}
		l = topology.Group(members)
	}
	return l, notes
}

// Clusters is ClusterLayout's clusters, never nil (for pgtune facts).
func Clusters(ctx context.Context, hosts []HostFacts, limit int) ([]*topology.Cluster, []string) {
	l, notes := ClusterLayout(ctx, hosts, limit)
	if l.Clusters != nil {
		return l.Clusters, notes
	}
	return []*topology.Cluster{}, notes
}

// serverOf names the server a host's facts describe (machine, data
// directory, port): two inventory names that reach the same server are
// one member of its cluster, not two.
func serverOf(f *facts.Facts) string {
	if f == nil || f.Postgres == nil {
		return ""
	}
	return fmt.Sprintf("%s:%s:%d", f.Hostname, f.Postgres.DataDir, f.Postgres.Port)
}

// reachOf is the machine a host's server runs on and the addresses a
// standby may name it by (its socket directory, loopback, the machine's
// name, and names: the inventory's address, the ssh_config HostName its
// connection dials, pgtune_replication_host and the addresses the
// controller resolved them to, each with its port):
// cascaded standbys are linked to their upstream by them (topology.Reach),
// over a replication network too.
func reachOf(f *facts.Facts, names ...string) (string, []string) {
	if f == nil || f.Postgres == nil || f.Postgres.Port <= 0 {
		return f.Hostname, nil
	}
	return f.Hostname, topology.Addresses(f.Hostname, f.Postgres.SocketDir, f.Postgres.Port, append([]string{f.Hostname}, names...)...)
}
