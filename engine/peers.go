package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
)

// Cluster peers: most work touches one host, but moving a replicated
// cluster's primary role (a switchover without a cluster manager) must
// act on every member: promote a standby, repoint the others. A module
// asks its Target for the other members of the host's cluster.

// peersFunc opens the other members of a host's cluster (see
// Target.ClusterPeers).
type peersFunc func(ctx context.Context, suffix string, journaled bool) ([]*Target, func(), error)

// ClusterPeers opens the other members of the host's replication cluster,
// each as a Target with fresh facts over a connection of its own, in the
// cluster's restart order (standbys, cascaded ones first). With a suffix,
// in apply (the Target has a journal), each peer's host lock is taken,
// and what is changed on it goes into the journal of run RunID+suffix
// there: a run of its own, kept apart from the peer's own changes of this
// run, and kept from rollback (KeptRoleChanges). Without one the peers are only read (check). close
// releases the locks and connections. A member the run does not include
// (not in the inventory, or left out by --limit) or cannot reach is an
// error naming it: nothing was opened then. A host in no replicated
// cluster has no peers.
func (t *Target) ClusterPeers(ctx context.Context, suffix string) ([]*Target, func(), error) {
	if t.peers == nil {
		return nil, func() {}, errors.New("this run does not know the host's replication cluster")
	}
	return t.peers(ctx, suffix, suffix != "" && t.Journal != nil)
}

// peersOf is the ClusterPeers of hr's Target.
func (s *Session) peersOf(hr *hostRun) peersFunc {
	return func(ctx context.Context, suffix string, journaled bool) ([]*Target, func(), error) {
		c := s.layout().ClusterOf(hr.host.Name)
		if c == nil || !c.Replicated() {
			return nil, func() {}, nil
		}
		if c.Split() {
			return nil, func() {}, errors.New(splitWhy(c))
		}
		if len(c.Unverified) > 0 {
			// The standby to promote, and those given the new primary's
			// address (and their passwords' destination), must be what
			// they say.
			return nil, func() {}, fmt.Errorf("cluster %s: not every member checks out against its upstream's WAL senders: %s; if a standby replicates over another network than the one it is reached at, set %s on it to that address",
				c.ID, strings.Join(c.Unverified, "; "), ReplicationHostVar)
		}
		if len(c.Outside) > 0 {
			return nil, func() {}, fmt.Errorf("%s has members outside this run (%s)", c, strings.Join(c.Outside, ", "))
		}
		if len(c.NotStreaming) > 0 {
			// A member the run cannot reach would not be repointed.
			return nil, func() {}, fmt.Errorf("%s: a member this run has no facts of or does not include is not streaming, and a switchover would not repoint it: bring it back and streaming, drop a replication slot whose standby is gone for good, or choose primary: restart or skip", c)
		}
		if len(c.Waiting) > 0 {
			return nil, func() {}, fmt.Errorf("%s: a member of this run is not streaming (%s): let it stream again first, or choose primary: restart or skip", c, strings.Join(c.Waiting, "; "))
		}
		var peers []*Target
		var closers []func()
		closeAll := func() {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
		}
		for _, name := range c.Members() {
			if name == hr.host.Name {
				continue
			}
			p, closePeer, err := s.openPeer(ctx, name, suffix, journaled)
			if err != nil {
				closeAll()
				return nil, func() {}, fmt.Errorf("cluster member %s: %w", name, err)
			}
			closers = append(closers, closePeer)
			peers = append(peers, p)
		}
		return peers, closeAll, nil
	}
}

// openPeer dials one member, gathers its facts and, when journaled,
// takes its host lock and starts its journal for run RunID+suffix.
func (s *Session) openPeer(ctx context.Context, name, suffix string, journaled bool) (*Target, func(), error) {
	h := s.inventoryHost(name)
	if h == nil {
		return nil, nil, errors.New("not in the inventory")
	}
	if err := h.ConnError(); err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	tr, err := s.runner.Dial(ctx, h)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	pr := &hostRun{host: h, tr: tr, secrets: hostSecrets(h)}
	closePeer := func() { _ = tr.Close() }
	if err := s.gather(ctx, pr, false); err != nil {
		closePeer()
		return nil, nil, err
	}
	var j *Journal
	if journaled {
		_, unlock, err := s.lockHost(ctx, pr)
		if err != nil {
			closePeer()
			return nil, nil, err
		}
		closePeer = func() { unlock(); _ = tr.Close() }
		j = NewKeptJournal(s.runner.RunID+suffix, h.Name, pr.stateDirPath(), tr, h.Conn.Become, KeptRoleChanges)
	}
	return s.target(pr, j), closePeer, nil
}

// inventoryHost finds a host of the run by name: in the session (or the
// one a wave was cut from), else in the inventory it was planned from.
func (s *Session) inventoryHost(name string) *inventory.Host {
	for _, hr := range s.hosts {
		if hr.host.Name == name {
			return hr.host
		}
	}
	if s.outer != nil {
		return s.outer.inventoryHost(name)
	}
	if s.inv != nil {
		if h, ok := s.inv.Host(name); ok {
			return h
		}
	}
	return nil
}

// ClusterChecker is a module whose plan needs the other members of the
// host's cluster to be read before anything is applied (a switchover
// refuses what it cannot do safely). CheckCluster runs once every host of
// the session is planned, so the clusters are known; an error fails the
// host as a check error does, and the host's cluster is then not touched.
type ClusterChecker interface {
	// WantsClusterCheck says, from the host's own plan, whether
	// CheckCluster has anything to do: the host then keeps its plan whole
	// and its connection until the cluster is checked, and its outcome is
	// streamed only after that.
	WantsClusterCheck(p *plan.ModulePlan) bool
	CheckCluster(ctx context.Context, t *Target, p *plan.ModulePlan) error
}

// wantsClusterCheck reports whether a planned host waits for checkClusters.
func wantsClusterCheck(hr *hostRun) bool {
	if hr.err != nil || hr.skipped || hr.facts == nil {
		return false
	}
	for _, st := range hr.steps {
		if cc, ok := st.module.(ClusterChecker); ok && st.plan != nil && cc.WantsClusterCheck(st.plan) {
			return true
		}
	}
	return false
}

// checkClusters runs the ClusterCheckers of every host that waits for
// them, over the host's connection (kept for it), then lets the host go
// as planning does for the others and streams its outcome.
func (s *Session) checkClusters(ctx context.Context) {
	for _, hr := range s.hosts {
		if !hr.clusterCheck {
			continue
		}
		for _, st := range hr.steps {
			cc, ok := st.module.(ClusterChecker)
			if !ok || st.plan == nil || !cc.WantsClusterCheck(st.plan) {
				continue
			}
			if err := s.checkCluster(ctx, hr, cc, st); err != nil {
				hr.err = fmt.Errorf("%s: %s: %w", hr.host.Name, st.module.Name(), err)
				break
			}
		}
		hr.clusterCheck = false
		s.releaseIfDone(hr)
		s.hostDone(hr)
	}
}

func (s *Session) checkCluster(ctx context.Context, hr *hostRun, cc ClusterChecker, st *step) error {
	tr := hr.tr
	if tr == nil {
		var err error
		if tr, err = s.runner.Dial(ctx, hr.host); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		defer tr.Close()
	}
	t := s.target(hr, nil)
	t.Transport, t.Module = tr, st.module.Name()
	return cc.CheckCluster(ctx, t, st.plan)
}
