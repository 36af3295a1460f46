// Package plan holds the typed plan: what each module would change on each
// host. check renders it; apply re-derives it right before acting and refuses
// when reality has moved since it was shown.
package plan

import (
	"fmt"
	"strings"
)

// Kind says what a change touches.
type Kind string

const (
	KindSysctl  Kind = "sysctl"  // a live kernel value
	KindSysfs   Kind = "sysfs"   // a live kernel value under /sys/
	KindFile    Kind = "file"    // a file, rewritten whole
	KindRestart Kind = "restart" // a service restart
	KindAction  Kind = "action"  // anything else worth showing
)

// Action says what a change does to its target, for the symbols and
// counts of a plan: + create, ~ update, - delete, ↻ restart.
type Action string

const (
	Create  Action = "create"
	Update  Action = "update"
	Delete  Action = "delete"
	Restart Action = "restart"
)

// Change is one difference between what a host has and what policy wants.
type Change struct {
	Module string `json:"module"`
	Kind   Kind   `json:"-"`
	// Action is set by modules that know it; ActionOf derives it for the
	// others.
	Action Action `json:"-"`
	Target string `json:"target"`
	// Before and After are the observed and desired values; for files the
	// whole content ("" with Absent set when there is none).
	Before string `json:"before"`
	After  string `json:"after"`
	// Diff is the rendered unified diff for files.
	Diff string `json:"-"`
	// Sensitive hides Before, After and Diff in every rendering.
	Sensitive bool `json:"-"`
}

// ModulePlan is one module's view of one host.
type ModulePlan struct {
	Module  string
	Changes []Change
	// Outputs are values later modules (and expressions in the policy)
	// plan from, e.g. a pool's size. In check mode they are the planned
	// values, so a dry run predicts exactly what apply will do.
	Outputs map[string]any
	// Notes are things worth telling that are not changes (pending
	// restart, per-NUMA-node pages, warnings).
	Notes []string
	// State is module-private data Apply needs (content to write, ...).
	State any
	// Refuse, when set, is a finding the policy has not accepted: check
	// shows it among the changes, apply fails the host before its first
	// change.
	Refuse error
}

// HasChanges reports whether the module would change anything.
func (p *ModulePlan) HasChanges() bool { return p != nil && len(p.Changes) > 0 }

// Add appends a change stamped with the module's name.
func (p *ModulePlan) Add(c Change) {
	c.Module = p.Module
	p.Changes = append(p.Changes, c)
}

// Note appends a note.
func (p *ModulePlan) Note(s string) { p.Notes = append(p.Notes, s) }

// SameChanges reports whether a and b would make the same changes; apply
// uses it to refuse acting on a plan that reality has overtaken.
func SameChanges(a, b []Change) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Module != y.Module || x.Target != y.Target || x.Before != y.Before || x.After != y.After {
			return false
		}
	}
	return true
}

// ActionOf is what c does: its Action when set, else derived from its
// kind and values. A file with no content before is created, one with
// none after deleted (a unified diff from or to /dev/null says the same).
func ActionOf(c Change) Action {
	if c.Action != "" {
		return c.Action
	}
	switch c.Kind {
	case KindRestart:
		return Restart
	case KindFile:
		switch {
		case strings.HasPrefix(c.Diff, "--- /dev/null\n"), c.Before == "" && c.After != "" && c.Diff != "":
			return Create
		case strings.Contains(c.Diff, "\n+++ /dev/null\n"), c.After == "" && c.Before != "":
			return Delete
		}
	}
	return Update
}

// StateOf returns p's module-private state as a *T: nil when p carries
// none (nothing to do), an error when it holds something else (a plan
// made by another module or version).
func StateOf[T any](p *ModulePlan) (*T, error) {
	if p == nil || p.State == nil {
		return nil, nil
	}
	st, ok := p.State.(*T)
	if !ok {
		return nil, fmt.Errorf("%s: plan state: got %T", p.Module, p.State)
	}
	return st, nil
}
