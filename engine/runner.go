package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/report"
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
}

type hostRun struct {
	host        *inventory.Host
	tr          transport.Transport
	facts       *facts.Facts
	steps       []*step
	err         error
	unreachable bool
	// applied lists the changes made, per step, in apply.
	applied []plan.Change
	// secrets are the host's sensitive var values, masked in every output.
	secrets []string
}

type step struct {
	module Module
	params any
	plan   *plan.ModulePlan
}

// Targets resolves which hosts each play touches, narrowed by limit
// (empty: no narrowing). A host outside every play is not worked on.
func Targets(inv *inventory.Inventory, book *playbook.Playbook, limit string) ([]*inventory.Host, error) {
	var allowed map[string]bool
	if limit != "" {
		hs, err := inv.Match(limit)
		if err != nil {
			return nil, fmt.Errorf("--limit: %w", err)
		}
		allowed = map[string]bool{}
		for _, h := range hs {
			allowed[h.Name] = true
		}
	}
	seen := map[string]bool{}
	var out []*inventory.Host
	for _, p := range book.Plays {
		hs, err := inv.Match(p.Hosts)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: play %q: hosts: %w", book.File, p.Line, p.Name, err)
		}
		for _, h := range hs {
			if seen[h.Name] || (allowed != nil && !allowed[h.Name]) {
				continue
			}
			seen[h.Name] = true
			out = append(out, h)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) == 0 {
		return nil, errors.New("no hosts to work on: no play matches any host (check --limit and the plays' hosts)")
	}
	return out, nil
}

// steps lists the modules a host runs, in dependency order, across the
// plays that match it.
func (r *Runner) steps(book *playbook.Playbook, members []map[string]bool, h *inventory.Host) ([]*step, error) {
	params := map[string]any{}
	from := map[string]string{}
	for i, p := range book.Plays {
		if !members[i][h.Name] {
			continue
		}
		for _, name := range p.Sections {
			if prev, dup := from[name]; dup {
				return nil, fmt.Errorf("%s: module %s is set by two plays (%q and %q) for this host", book.File, name, prev, p.Name)
			}
			from[name] = p.Name
			params[name] = p.Policy[name]
		}
	}
	names := make([]string, 0, len(params))
	for n := range params {
		if _, ok := r.Modules[n]; !ok {
			return nil, fmt.Errorf("unknown module %q", n)
		}
		names = append(names, n)
	}
	order, err := Order(names, func(n string) []string { return r.Modules[n].Requires() })
	if err != nil {
		return nil, err
	}
	out := make([]*step, len(order))
	for i, n := range order {
		out[i] = &step{module: r.Modules[n], params: params[n]}
	}
	return out, nil
}

// playMembers resolves each play's hosts pattern once for the whole run:
// which hosts each play touches.
func playMembers(inv *inventory.Inventory, book *playbook.Playbook) ([]map[string]bool, error) {
	out := make([]map[string]bool, len(book.Plays))
	for i, p := range book.Plays {
		hs, err := inv.Match(p.Hosts)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: play %q: hosts: %w", book.File, p.Line, p.Name, err)
		}
		out[i] = make(map[string]bool, len(hs))
		for _, h := range hs {
			out[i][h.Name] = true
		}
	}
	return out, nil
}

// Plan connects to every host, gathers facts and runs every module's
// check. It changes nothing on any host. Errors stay per host.
func (r *Runner) Plan(ctx context.Context, inv *inventory.Inventory, book *playbook.Playbook, hosts []*inventory.Host) (*Session, error) {
	s := &Session{runner: r, book: book}
	members, err := playMembers(inv, book)
	if err != nil {
		return nil, err
	}
	for _, h := range hosts {
		steps, err := r.steps(book, members, h)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.Name, err)
		}
		s.hosts = append(s.hosts, &hostRun{host: h, steps: steps, secrets: secretsOf(h.Vars)})
	}
	s.each(ctx, s.planHost)
	return s, nil
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
			return nil
		})
	}
	_ = g.Wait()
}

func (s *Session) log(hr *hostRun) *slog.Logger {
	return redactLogger(s.runner.Log.With("host", hr.host.Name), hr.secrets)
}

func (s *Session) planHost(ctx context.Context, hr *hostRun) {
	defer s.releaseIfDone(hr)
	log := s.log(hr)
	log.Debug("connecting")
	tr, err := s.runner.Dial(ctx, hr.host)
	if err != nil {
		hr.unreachable = true
		hr.err = fmt.Errorf("%s: connect: %w", hr.host.Name, err)
		log.Error("unreachable", "err", err)
		return
	}
	hr.tr = tr
	if err := s.gather(ctx, hr); err != nil {
		hr.err = err
		return
	}
	t := s.target(hr, nil)
	for _, st := range hr.steps {
		name := st.module.Name()
		t.Module = name
		log.Debug("check", "module", name)
		p, err := st.module.Check(ctx, t, st.params)
		if err != nil {
			hr.err = fmt.Errorf("%s: %s: %w", hr.host.Name, name, err)
			log.Error("check failed", "module", name, "err", err)
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
// one for the cluster.
func (s *Session) gather(ctx context.Context, hr *hostRun) error {
	c := hr.host.Conn
	opts := facts.Options{Become: c.Become, PGData: c.PGData, PGBin: c.PGBin, PGConfigFile: c.PGConfigFile}
	f, err := facts.Gather(ctx, hr.tr, opts)
	if err != nil {
		var exitErr *transport.ExitError
		if !errors.As(err, &exitErr) && !hostFault(err) && ctx.Err() == nil {
			hr.unreachable = true
		}
		return fmt.Errorf("%s: facts: %w", hr.host.Name, err)
	}
	pg, ignored, err := facts.Discover(ctx, hr.tr, opts)
	if err != nil {
		f.PostgresError = err.Error()
	}
	f.Postgres, f.PostgresIgnored = pg, ignored
	hr.facts = f
	return nil
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
	_ = scope.Set("facts", jsonish(hr.facts))
	return &Target{
		Name:      hr.host.Name,
		Transport: hr.tr,
		Become:    hr.host.Conn.Become,
		Facts:     hr.facts,
		Vars:      hr.host.Vars,
		Scope:     scope,
		Log:       s.log(hr),
		Journal:   j,
		StateDir:  stateDir(hr.host),
		PGRestart: hr.host.Conn.PGRestart,
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

// Apply carries out the plan on every host that planned cleanly. For each
// module in order it re-checks the host, refuses if the result differs from
// the plan that was shown, applies, verifies, and re-reads the facts before
// the next module.
func (s *Session) Apply(ctx context.Context) {
	s.each(ctx, s.applyHost)
}

func (s *Session) applyHost(ctx context.Context, hr *hostRun) {
	if hr.err != nil || hr.tr == nil {
		// Failed, or nothing to change (its connection is already closed).
		return
	}
	if hr.err = refusal(hr); hr.err != nil {
		return
	}
	ctx, unlock, err := s.lockHost(ctx, hr)
	if err != nil {
		hr.err = err
		return
	}
	defer unlock()
	log := s.log(hr)
	j := NewJournal(s.runner.RunID, hr.host.Name, stateDir(hr.host), hr.tr, hr.host.Conn.Become)
	t := s.target(hr, j)
	for i, st := range hr.steps {
		name := st.module.Name()
		if i > 0 && hr.steps[i-1].plan.HasChanges() {
			// The previous module changed the host: plan from what it is now.
			if err := s.gather(ctx, hr); err != nil {
				hr.err = err
				return
			}
			outputs := t.outputs
			t = s.target(hr, j)
			for m, out := range outputs {
				t.setOutputs(m, out)
				_ = t.Scope.Set(m, out)
			}
		}
		t.Module = name
		p, err := st.module.Check(ctx, t, st.params)
		if err != nil {
			hr.err = fmt.Errorf("%s: %s: re-check: %w", hr.host.Name, name, err)
			return
		}
		markSensitive(p, hr.secrets)
		if !plan.SameChanges(p.Changes, st.plan.Changes) {
			hr.err = fmt.Errorf("%s: %s: the host changed since the plan was shown (%s); nothing more was applied, run again",
				hr.host.Name, name, describeMove(st.plan.Changes, p.Changes))
			return
		}
		if p.HasChanges() {
			log.Info("apply", "module", name, "changes", len(p.Changes))
			if err := st.module.Apply(ctx, t, p); err != nil {
				hr.err = fmt.Errorf("%s: %s: %w", hr.host.Name, name, err)
				log.Error("apply failed", "module", name, "err", err)
				return
			}
			hr.applied = append(hr.applied, p.Changes...)
		}
		if err := st.module.Verify(ctx, t, p); err != nil {
			hr.err = fmt.Errorf("%s: %s: verify: %w", hr.host.Name, name, err)
			log.Error("verify failed", "module", name, "err", err)
			return
		}
		st.plan = p
		if err := s.bindOutputs(t, name, p); err != nil {
			hr.err = fmt.Errorf("%s: %s: %w", hr.host.Name, name, err)
			return
		}
	}
}

func describeMove(planned, now []plan.Change) string {
	key := func(c plan.Change) string { return c.Target }
	was := map[string]plan.Change{}
	for _, c := range planned {
		was[key(c)] = c
	}
	var diffs []string
	for _, c := range now {
		p, ok := was[key(c)]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: new change %s → %s", c.Target, short(c.Before), short(c.After)))
		case p.Before != c.Before || p.After != c.After:
			diffs = append(diffs, fmt.Sprintf("%s: planned %s → %s, now %s → %s", c.Target, short(p.Before), short(p.After), short(c.Before), short(c.After)))
		}
		delete(was, key(c))
	}
	for t := range was {
		diffs = append(diffs, t+": no longer needed")
	}
	sort.Strings(diffs)
	if len(diffs) == 0 {
		return "changes reordered"
	}
	return strings.Join(diffs, "; ")
}

func short(s string) string {
	if s == "" {
		return "(unset)"
	}
	if i := strings.IndexByte(s, '\n'); i >= 0 || len(s) > 60 {
		return "(file content)"
	}
	return s
}

// releaseIfDone closes a host's connection once the run needs it no more:
// after its plan in a check, or when it failed or has nothing to apply, so
// a large run does not hold every host's sshd session until the end.
func (s *Session) releaseIfDone(hr *hostRun) {
	if hr.tr == nil {
		return
	}
	changes := false
	for _, st := range hr.steps {
		changes = changes || st.plan.HasChanges()
	}
	if s.runner.PlanOnly || hr.err != nil || !changes {
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

// Report renders the session's outcome. mode is "check" or "apply".
func (s *Session) Report(mode string) *report.Report {
	r := &report.Report{Mode: mode}
	if mode == "apply" {
		r.RunID = s.runner.RunID
	}
	for _, hr := range s.hosts {
		h := report.Host{Name: hr.host.Name, Changes: []report.Change{}}
		var planned []plan.Change
		for _, st := range hr.steps {
			if st.plan != nil {
				planned = append(planned, st.plan.Changes...)
				h.Notes = append(h.Notes, st.plan.Notes...)
			}
		}
		if hr.facts != nil && hr.facts.Postgres == nil {
			note := "no PostgreSQL cluster found"
			if hr.facts.PostgresError != "" {
				note += ": " + hr.facts.PostgresError
			}
			h.Notes = append([]string{note}, h.Notes...)
		}
		if hr.facts != nil {
			h.Notes = append(h.Notes, hr.facts.PostgresIgnored...)
		}
		switch mode {
		case "apply":
			h.Changes = report.FromPlan(hr.applied)
		default:
			h.Changes = report.FromPlan(planned)
		}
		switch {
		// A connection lost mid-run makes the host unreachable too: what
		// it did after that is unknown.
		case hr.unreachable || errors.Is(hr.err, transport.ErrConnectionLost):
			h.Status = report.Unreachable
		case hr.err != nil:
			h.Status = report.Failed
		case mode == "apply" && len(hr.applied) > 0:
			h.Status = report.Changed
		case mode == "apply":
			h.Status = report.OK
		case len(planned) > 0:
			h.Status = report.Drift
		default:
			h.Status = report.InPolicy
		}
		if hr.err != nil {
			msg := redact(hr.err.Error(), hr.secrets)
			h.Error = &msg
		}
		for i, n := range h.Notes {
			h.Notes[i] = redact(n, hr.secrets)
		}
		for i := range h.Changes {
			h.Changes[i].Target = redact(h.Changes[i].Target, hr.secrets)
		}
		r.Hosts = append(r.Hosts, h)
	}
	r.Summarize()
	return r
}

// Validate checks, without contacting any host, that each host's plays
// resolve to a runnable module order.
func (r *Runner) Validate(inv *inventory.Inventory, book *playbook.Playbook, hosts []*inventory.Host) error {
	members, err := playMembers(inv, book)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if _, err := r.steps(book, members, h); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
	return nil
}
