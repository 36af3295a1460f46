package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/termsafe"
)

// RollbackHook is implemented by modules that must act after their files
// are put back (restart a service on its old settings and check it is
// up).
type RollbackHook interface {
	AfterRollback(ctx context.Context, t *Target) error
}

// RollbackModuleName names rollback's changes in plans and reports.
const RollbackModuleName = "rollback"

// rollbackParams says how far back to go: before the first run pgtune made
// on the host, or before run To.
type rollbackParams struct{ To string }

// rollback is the engine's own module: it reads the journals pgtune left on
// the host and plans putting every recorded file and kernel value back. It
// goes through the same check → confirm → apply → verify path as policy.
type rollback struct {
	hooks    map[string]RollbackHook
	managers map[string]TargetManager
	early    map[string]bool // modules undone first (UndoEarly)
	growers  map[string]CapacityGrower
}

// TargetManager is implemented by modules that change files or kernel
// values. Rollback acts on a journal entry only when the module that
// recorded it says it manages the entry's target on this host: journals
// are read from the host, and one naming /etc/passwd or
// kernel.core_pattern must not make rollback write them.
type TargetManager interface {
	// Manages reports whether the module changes target on t: a clean
	// absolute path (kinds "file" and "sysfs"), a kernel key such as
	// vm.swappiness (kind "sysctl"), a systemd unit or "daemon-reload"
	// (kind "service"). Facts are gathered; params are not known.
	Manages(t *Target, kind, target string) bool
}

// manages asks the module that recorded e whether it manages e's target.
func (m rollback) manages(t *Target) func(JournalEntry) error {
	return func(e JournalEntry) error {
		mgr, ok := m.managers[e.Module]
		if !ok {
			return fmt.Errorf("no module %s changes files or kernel values", printable(e.Module))
		}
		if !mgr.Manages(t, e.Kind, kindOf(e.Kind).target(e)) {
			return fmt.Errorf("module %s does not manage it on this host", e.Module)
		}
		return nil
	}
}

func (rollback) Name() string       { return RollbackModuleName }
func (rollback) Requires() []string { return nil }
func (rollback) NewParams() any     { return &rollbackParams{} }

// Validate has nothing to check: the run ID is checked against the
// host's journals.
func (rollback) Validate(any) error { return nil }

type rollbackState struct {
	to    string
	steps []undoStep // in the order to take them
}

// readJournals returns the journals on the host, oldest run first, each
// checked by validateJournal against what the modules manage. The state
// directory is checked first: journals in a directory others can write
// are not evidence of anything.
func readJournals(ctx context.Context, t *Target, manages func(JournalEntry) error) ([]JournalRecord, error) {
	dir, err := checkStateDir(ctx, t.Transport, t.StateDir, t.Become, false)
	switch {
	case errors.Is(err, errStateDirAbsent):
		return nil, nil
	case err != nil:
		return nil, err
	}
	const script = `for f in "$1"/*/journal.json; do [ -e "$f" ] || continue; printf '\n### %s\n' "$f"; cat -- "$f"; done`
	res, err := t.Transport.Run(ctx, transport.Command{Op: OpReadJournals, Args: []string{"sh", "-c", script, "sh", dir}, Become: t.Become})
	if err != nil {
		return nil, fmt.Errorf("read journals: %w", err)
	}
	var out []JournalRecord
	for _, part := range strings.Split(string(res.Stdout), "\n### ")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		var j JournalRecord
		if err := json.Unmarshal([]byte(body), &j); err != nil {
			return nil, fmt.Errorf("journal %s: not a pgtune journal (%v): refusing to roll back from it", printable(name), err)
		}
		check := manages
		if j.Kept != "" {
			// Never acted on (Check leaves kept runs alone): only its
			// shape is checked.
			check = func(JournalEntry) error { return nil }
		}
		if err := validateJournal(j, path.Base(path.Dir(name)), dir, check); err != nil {
			return nil, fmt.Errorf("journal %s: %w: refusing to roll back; nothing was changed", printable(name), err)
		}
		out = append(out, j)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].RunID < out[b].RunID })
	return out, nil
}

// restorePoint picks, for every file and key, the first record at or after
// run `to` (every run when empty): the state just before pgtune touched it.
// Kept runs (JournalRecord.Kept) are never undone: naming one is an
// error, and their changes are not picked.
func restorePoint(journals []JournalRecord, to string) ([]JournalEntry, error) {
	for _, j := range journals {
		if j.Kept != "" && j.RunID == to {
			return nil, fmt.Errorf("run %s is kept: %s; pgtune rollback never undoes it (rolling back the run it was made beside undoes that run's own changes only)", to, termsafe.Line(j.Kept))
		}
	}
	if to != "" {
		found := false
		for _, j := range journals {
			found = found || j.RunID == to
		}
		if !found {
			var ids []string
			for _, j := range journals {
				if j.Kept == "" {
					ids = append(ids, j.RunID)
				}
			}
			return nil, fmt.Errorf("no run %q on this host (runs: %s)", to, strings.Join(ids, ", "))
		}
	}
	// A file any run marked sensitive stays hidden, even when the entry
	// undone is an older run's that has no mark.
	secret := map[string]bool{}
	for _, j := range journals {
		for _, e := range j.Entries {
			if e.Sensitive {
				secret[e.identity()] = true
			}
		}
	}
	seen := map[string]bool{}
	var entries []JournalEntry
	for _, j := range journals {
		if j.RunID < to || j.Kept != "" {
			continue
		}
		for _, e := range j.Entries {
			if e.Kind == "created" && e.Settled != "" {
				// Finished with by the run that made it: not a change
				// to undo, and an entry of a later run that was not
				// finished with must not be hidden behind it.
				continue
			}
			id := e.identity()
			if seen[id] {
				continue
			}
			seen[id] = true
			e.Sensitive = e.Sensitive || secret[id]
			entries = append(entries, e)
		}
	}
	// Undo modules in the reverse of the order they ran; within a module,
	// undo the last change first.
	rank := map[string]int{}
	for i, e := range entries {
		if _, ok := rank[e.Module]; !ok {
			rank[e.Module] = i
		}
	}
	sort.SliceStable(entries, func(a, b int) bool {
		ra, rb := rank[entries[a].Module], rank[entries[b].Module]
		if ra != rb {
			return ra > rb
		}
		return a > b
	})
	return entries, nil
}

func (m rollback) Check(ctx context.Context, t *Target, params any) (*plan.ModulePlan, error) {
	to := params.(*rollbackParams).To
	p := &plan.ModulePlan{Module: RollbackModuleName}
	journals, err := readJournals(ctx, t, m.manages(t))
	if err != nil {
		return nil, err
	}
	if len(journals) == 0 {
		if to != "" {
			return nil, fmt.Errorf("no run %q on this host: pgtune has never changed it", to)
		}
		p.Note("pgtune has never changed this host: nothing to roll back")
		return p, nil
	}
	undoable := 0
	for _, j := range journals {
		if j.Kept != "" {
			p.Note(fmt.Sprintf("run %s is kept, not undone: %s", j.RunID, termsafe.Line(j.Kept)))
		} else {
			undoable++
		}
	}
	if undoable == 0 && to == "" {
		p.Note("every run pgtune made here is kept: nothing to roll back")
		return p, nil
	}
	entries, err := restorePoint(journals, to)
	if err != nil {
		return nil, err
	}
	entries = undoEarlyFirst(entries, m.early)
	u := &undoSet{entries: entries, links: t.linkedSysctls, kept: keptEdits(journals, to)}
	steps, err := u.plan(ctx, t)
	if err != nil {
		return nil, err
	}
	steps = growFirst(steps, m.growers) // capacity.go
	for _, s := range steps {
		if s.change != nil {
			p.Add(*s.change)
		}
		if s.note != "" {
			p.Note(s.note)
		}
	}
	st := &rollbackState{to: to, steps: steps}
	p.State = st
	ids := make([]string, 0, len(journals))
	for _, j := range journals {
		if j.RunID >= to && j.Kept == "" {
			ids = append(ids, j.RunID)
		}
	}
	p.Note("undoing run(s) " + strings.Join(ids, ", "))
	return p, nil
}

// Apply undoes the planned steps and, once the last step of a module
// that changed something is done, lets the module act (a module restarts
// the service it configures before what it sits on is taken away).
func (m rollback) Apply(ctx context.Context, t *Target, p *plan.ModulePlan) error {
	st, _ := p.State.(*rollbackState)
	if st == nil {
		return nil
	}
	after := func(ctx context.Context, module string) error {
		hook, ok := m.hooks[module]
		if !ok {
			return nil
		}
		t.Module = module
		if err := hook.AfterRollback(ctx, t); err != nil {
			return fmt.Errorf("%s: %w", module, err)
		}
		return nil
	}
	// Not stopped part way by a Ctrl-C (ApplyHooks.Stop): steps are
	// ordered across modules on purpose (growFirst, UndoEarly), so a
	// host's rollback is one unit, as a module is in apply.
	return runUndo(ctx, t, st.steps, undoOptions{after: after})
}

func (m rollback) Verify(ctx context.Context, t *Target, p *plan.ModulePlan) error {
	st, _ := p.State.(*rollbackState)
	if st == nil {
		return nil
	}
	again, err := m.Check(ctx, t, &rollbackParams{To: st.to})
	if err != nil {
		return err
	}
	if again.HasChanges() {
		var left []string
		for _, c := range again.Changes {
			left = append(left, c.Target)
		}
		return fmt.Errorf("still not as before: %s", strings.Join(left, ", "))
	}
	return nil
}

// PlanRollback plans putting every host back as it was before pgtune
// first changed it, or before run `to` when that is set.
func (r *Runner) PlanRollback(ctx context.Context, hosts []*inventory.Host, to string) *Session {
	m := rollback{hooks: map[string]RollbackHook{}, managers: map[string]TargetManager{}, early: map[string]bool{},
		growers: map[string]CapacityGrower{}}
	for name, mod := range r.Modules {
		if h, ok := mod.(RollbackHook); ok {
			m.hooks[name] = h
		}
		if tm, ok := mod.(TargetManager); ok {
			m.managers[name] = tm
		}
		if e, ok := mod.(UndoEarly); ok && e.UndoEarly() {
			m.early[name] = true
		}
		if g, ok := mod.(CapacityGrower); ok {
			m.growers[name] = g
		}
	}
	s := &Session{runner: r, book: nil}
	for _, h := range hosts {
		s.hosts = append(s.hosts, &hostRun{host: h, steps: []*step{{module: m, params: &rollbackParams{To: to}}},
			secrets: hostSecrets(h)})
	}
	s.each(ctx, s.planHost)
	return s
}
