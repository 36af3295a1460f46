package engine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/topology"
	"github.com/pgtune/pgtune/engine/transport"
)

// DialFunc opens the transport to a host.
type DialFunc func(ctx context.Context, h *inventory.Host) (transport.Transport, error)

// Runner plans and applies a playbook across hosts.
type Runner struct {
	// Modules is the registry, by name.
	Modules map[string]Module
	// Forks bounds how many hosts are worked on at once.
	Forks int
	Dial  DialFunc
	Log   *slog.Logger
	// RunID names this run's journal and backups on every host.
	RunID string
	// HostTimeout bounds all the work on one host in one phase.
	HostTimeout time.Duration
	// PlanOnly says no Apply follows Plan (check): each host's connection
	// is closed as soon as its plan is done.
	PlanOnly bool
	// MaxLagBytes and StreamTimeout bound the wait for a restarted
	// standby before the next member of its cluster (clusters.go); zero
	// means the defaults.
	MaxLagBytes   int64
	StreamTimeout time.Duration
	// Layout, when set, is the whole run's replication clusters (from
	// facts gathered before the run, see ClusterLayout): a rollout that
	// plans and applies a few hosts at a time then still knows every
	// member of their clusters. Unset, each session groups its own hosts.
	Layout *topology.Layout
	// Shard says the run is one shard of a fleet (--shard i/n): another
	// shard's run may restart a member of a cluster this one has only
	// part of at the same moment (clusters.go).
	Shard bool
	// HostDone, when set, is told each host's outcome as soon as the host
	// finishes a phase ("plan", "apply"), so results can be shown as
	// they come. It is called from the hosts' goroutines, concurrently.
	HostDone func(phase string, h report.Host)

	// stops are the members that stopped their cluster: kept for the
	// whole run, as a rollout applies each wave in a session of its own
	// (clusters.go).
	stops clusterStops
}

// Registry returns the module registry in the form the playbook loader
// decodes against.
func Registry(mods ...Module) (map[string]Module, playbook.Registry) {
	byName := map[string]Module{}
	reg := playbook.Registry{}
	for _, m := range mods {
		byName[m.Name()] = m
		reg[m.Name()] = m.NewParams
	}
	return byName, reg
}

// Session is a planned run: one connection per host, kept open from plan
// to apply so that each host is dialled once for the whole run.
type Session struct {
	runner *Runner
	book   *playbook.Playbook
	hosts  []*hostRun
	phase  string // "plan" or "apply" while each runs them, for HostDone
	// inv is the inventory the session was planned from: cluster peers
	// outside the session are found there (peers.go).
	inv *inventory.Inventory
	// clusters, when set, is the layout of the session a wave was cut
	// from (clusters.go), and outer that session.
	clusters *topology.Layout
	outer    *Session
}

type hostRun struct {
	host        *inventory.Host
	tr          transport.Transport
	facts       *facts.Facts
	steps       []*step
	err         error
	unreachable bool
	// addrs are the controller's addresses of the host (resolveMembers),
	// when addrsResolved.
	addrs         []string
	addrsResolved bool
	// patroniHosts are the controller's answers for the names the host's
	// Patroni lists members at, when it is a primary whose standbys need
	// them (resolveMembers, topology.Member.PatroniHosts).
	patroniHosts map[string]topology.Resolved
	// named: a play names the host (not only through "all"); skipped: it
	// does not and has no PostgreSQL cluster, so it is left untouched.
	named, skipped bool
	// applied lists the changes made, per step, in apply.
	applied []plan.Change
	// started: apply began changing the host (told to the Done hook).
	started bool
	// secrets are the host's sensitive var values, masked in every output.
	secrets []string
	// notes are the engine's own notes on the host (its replication
	// cluster, see clusters.go), reported after the modules' notes.
	notes []string
	// clusterCheck: planned, waiting for checkClusters (peers.go), which
	// sets clusterChecked once it has taken the host.
	clusterCheck, clusterChecked bool
	// stateDir is the host's state directory as resolved on the host by
	// lockHost's check; only it is written once set (hostlock.go).
	stateDir string
}

// stateDirPath is the state directory to use: the resolved one once the
// host is locked, else the inventory's (planning only reads through it
// after its own check).
func (hr *hostRun) stateDirPath() string {
	if hr.stateDir != "" {
		return hr.stateDir
	}
	return stateDir(hr.host)
}

type step struct {
	module Module
	params any
	plan   *plan.ModulePlan
}

// each runs fn for every host, at most Forks at a time. A failing host
// never stops the others: fn records errors on its hostRun.
func (s *Session) each(ctx context.Context, fn func(context.Context, *hostRun)) {
	var g errgroup.Group
	g.SetLimit(max(1, s.runner.Forks))
	for _, hr := range s.hosts {
		g.Go(func() error {
			hctx := ctx
			if s.runner.HostTimeout > 0 {
				var cancel context.CancelFunc
				hctx, cancel = context.WithTimeout(ctx, s.runner.HostTimeout)
				defer cancel()
			}
			s.runHost(hctx, hr, fn)
			if !hr.clusterCheck {
				s.hostDone(hr) // else once its cluster is checked (peers.go)
			}
			return nil
		})
	}
	_ = g.Wait()
}

func (s *Session) log(hr *hostRun) *slog.Logger {
	return redactLogger(s.runner.Log.With("host", hr.host.Name), hr.secrets)
}

// releaseIfDone closes a host's connection once the run needs it no more:
// after its plan in a check, or when it failed or has nothing to apply, so
// a large run does not hold every host's sshd session until the end.
func (s *Session) releaseIfDone(hr *hostRun) {
	if s.phase == "plan" && wantsClusterCheck(hr) && !hr.clusterChecked {
		hr.clusterCheck, hr.clusterChecked = true, true // checkClusters releases it
		return
	}
	if s.runner.PlanOnly {
		keepOnlyReport(hr) // release.go
	}
	if hr.tr == nil {
		return
	}
	changes := false
	for _, st := range hr.steps {
		changes = changes || st.plan.HasChanges()
	}
	// A member an earlier attempt failed keeps its connection even with
	// nothing to apply: applyInClusterOrder asks it whether it streams
	// before its cluster goes on.
	if s.runner.PlanOnly || hr.err != nil || (!changes && !s.runner.stops.retried(hr.host.Name)) {
		_ = hr.tr.Close()
		hr.tr = nil
	}
}

// Close closes every connection.
func (s *Session) Close() {
	for _, hr := range s.hosts {
		if hr.tr != nil {
			_ = hr.tr.Close()
		}
	}
}

// Validate checks, without contacting any host, that each host's plays
// resolve to a runnable module order.
func (r *Runner) Validate(inv *inventory.Inventory, book *playbook.Playbook, hosts []*inventory.Host) error {
	members, err := playMembers(inv, book)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if err := h.ConnError(); err != nil {
			return err
		}
		if _, err := r.steps(book, members, h); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
	return nil
}
