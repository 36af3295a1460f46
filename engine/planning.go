package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/transport"
)

// Plan connects to every host, gathers facts and runs every module's
// check. It changes nothing on any host. Errors stay per host.
func (r *Runner) Plan(ctx context.Context, inv *inventory.Inventory, book *playbook.Playbook, hosts []*inventory.Host) (*Session, error) {
	s := &Session{runner: r, book: book, phase: "plan", inv: inv}
	members, err := playMembers(inv, book)
	if err != nil {
		return nil, err
	}
	named, err := namedHosts(inv, book)
	if err != nil {
		return nil, err
	}
	for _, h := range hosts {
		steps, err := r.steps(book, members, h)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.Name, err)
		}
		s.hosts = append(s.hosts, &hostRun{host: h, steps: steps, secrets: hostSecrets(h), named: named[h.Name]})
	}
	s.each(ctx, s.planHost)
	s.resolveMembers(ctx) // clusters.go
	s.placeInClusters()   // clusters.go
	s.checkClusters(ctx)  // peers.go
	return s, nil
}

func (s *Session) planHost(ctx context.Context, hr *hostRun) {
	defer s.releaseIfDone(hr)
	log := s.log(hr)
	log.Debug("connecting")
	if err := hr.host.ConnError(); err != nil {
		// The inventory, not the network: the host fails, it is not unreachable.
		hr.err = fmt.Errorf("%s: connect: %w", hr.host.Name, err)
		return
	}
	tr, err := s.runner.Dial(ctx, hr.host)
	if err != nil {
		if hr.err = cutShort(ctx, hr.host.Name); hr.err != nil {
			return
		}
		hr.unreachable = true
		hr.err = fmt.Errorf("%s: connect: %w", hr.host.Name, err)
		log.Debug("unreachable", "err", err)
		return
	}
	hr.tr = tr
	if err := s.gather(ctx, hr, true); err != nil {
		hr.err = err
		return
	}
	if skipWithoutCluster(hr) {
		log.Debug("skipped: no PostgreSQL cluster, and no play names the host")
		return
	}
	t := s.target(hr, nil)
	// What the gather ran ahead is for these checks alone: later reads
	// (apply, verify, cluster checks) ask the host.
	defer func() { hr.facts.Ran = nil }()
	for _, st := range hr.steps {
		name := st.module.Name()
		t.Module = name
		log.Debug("check", "module", name)
		p, err := st.module.Check(ctx, t, st.params)
		if err != nil {
			hr.err = fmt.Errorf("%s: %s: %w", hr.host.Name, name, err)
			log.Debug("check failed", "module", name, "err", err)
			return
		}
		markSensitive(p, hr.secrets)
		st.plan = p
		if err := s.bindOutputs(t, name, p); err != nil {
			hr.err = fmt.Errorf("%s: %s: %w", hr.host.Name, name, err)
			return
		}
	}
}

// gather (re)reads the host's facts: one round trip for the kernel side,
// every module's declared facts, the cluster and (run ahead in it, else
// one more) the running cluster's replication topology.
//
// dryRun asks for the play's modules' commands run ahead with the facts
// (facts.Set.PostmasterRuns): only a target without a journal takes
// them.
func (s *Session) gather(ctx context.Context, hr *hostRun, dryRun bool) error {
	c := hr.host.Conn
	opts := facts.Options{Become: c.Become, PGData: c.PGData, PGBin: c.PGBin, PGConfigFile: c.PGConfigFile,
		Sets: FactSets(s.runner.Modules)}
	if dryRun {
		opts.RunAhead = playModules(hr.steps)
	}
	f, err := facts.GatherHost(ctx, hr.tr, opts)
	if err != nil {
		if cut := cutShort(ctx, hr.host.Name); cut != nil {
			return cut
		}
		var exitErr *transport.ExitError
		if !errors.As(err, &exitErr) && !hostFault(err) && ctx.Err() == nil {
			hr.unreachable = true
		}
		return fmt.Errorf("%s: facts: %w", hr.host.Name, err)
	}
	// The topology query's answer may have come with the gather (run
	// ahead, facts/prerun.go).
	gatherTopology(ctx, f.Ran.Transport(hr.tr), c.Become, f)
	if cut := cutShort(ctx, hr.host.Name); cut != nil {
		return cut // parts the gather allows to fail (discovery, topology) may have been cut
	}
	if !dryRun {
		f.Ran = nil // what is left is for no one: only a dry run's checks take it
	}
	hr.facts = f
	return nil
}

// playModules names the modules the host's play runs: only their
// commands are run ahead with the facts (facts.Set.PostmasterRuns).
func playModules(steps []*step) []string {
	var names []string
	for _, st := range steps {
		names = append(names, st.module.Name())
	}
	return names
}

// target builds a module's view of the host with a fresh scope.
func (s *Session) target(hr *hostRun, j *Journal) *Target {
	file := ""
	if s.book != nil {
		file = s.book.File
	}
	scope := expr.NewScope(file)
	_ = scope.Set("host", map[string]any{"name": hr.host.Name})
	_ = scope.Set("vars", jsonish(hr.host.Vars))
	scope.Unusable("vars", hr.host.Unusable)
	_ = scope.Set("facts", jsonish(hr.facts))
	var cache *readCache
	if j == nil {
		cache = newReadCache(hr.facts) // prefetch.go
	}
	return &Target{
		host:      hr.host,
		Name:      hr.host.Name,
		Transport: hr.tr,
		Become:    hr.host.Conn.Become,
		Facts:     hr.facts,
		Vars:      hr.host.Vars,
		Scope:     scope,
		Log:       s.log(hr),
		Journal:   j,
		StateDir:  hr.stateDirPath(),
		modules:   s.runner.Modules,
		peers:     s.peersOf(hr), // peers.go
		cache:     cache,
		// The addresses the layout matched the host by, not asked of DNS
		// again (which may answer otherwise, or not at all).
		addrs:         hr.addrs,
		addrsResolved: hr.addrsResolved,
	}
}

// stateDir is where a host keeps its journals: pgtune_state_dir when the
// inventory sets it, else StateDir. A value that is not a clean absolute
// path is refused by checkStateDir before any use, never replaced.
func stateDir(h *inventory.Host) string {
	if d, ok := h.Vars[StateDirVar]; ok {
		return fmt.Sprint(d)
	}
	return StateDir
}

func (s *Session) bindOutputs(t *Target, module string, p *plan.ModulePlan) error {
	t.setOutputs(module, p.Outputs)
	if p.Outputs == nil {
		return nil
	}
	return t.Scope.Set(module, p.Outputs)
}

// jsonish turns a Go value into plain maps, slices, strings, numbers and
// bools through its JSON form, so expressions see facts by their JSON
// names (facts.mem_total).
func jsonish(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil
	}
	return out
}

// HasChanges reports whether any host has planned changes.
func (s *Session) HasChanges() bool {
	for _, hr := range s.hosts {
		for _, st := range hr.steps {
			if st.plan.HasChanges() {
				return true
			}
		}
	}
	return false
}
