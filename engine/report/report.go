// Package report is the outcome of a run as users and other tools see it:
// the JSON document of DESIGN.md and the text a person reads.
package report

import (
	"strings"

	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/internal/mask"
)

// Status is a host's outcome.
type Status string

const (
	InPolicy    Status = "in_policy"   // check: nothing to change
	Drift       Status = "drift"       // check: changes needed
	Changed     Status = "changed"     // apply: changes made and verified
	OK          Status = "ok"          // apply: nothing needed changing, verified
	Failed      Status = "failed"      // any error on a reachable host
	Unreachable Status = "unreachable" // could not connect
	// Skipped: matched only through "all" and no PostgreSQL cluster
	// found; nothing was checked or changed (see engine.Targets).
	Skipped Status = "skipped"
)

// Report is one run over a set of hosts.
type Report struct {
	Mode  Mode   `json:"-"`
	RunID string `json:"run_id,omitempty"`
	// RunIDs are the runs of a merged report of apply shards, each job
	// its own run (report merge); RunID is empty then.
	RunIDs  []string `json:"run_ids,omitempty"`
	Hosts   []Host   `json:"hosts"`
	Summary Summary  `json:"summary"`
}

// Host is one host's outcome.
type Host struct {
	Name    string   `json:"name"`
	Status  Status   `json:"status"`
	Changes []Change `json:"changes"`
	Error   *string  `json:"error"`
	// Notes are things worth knowing that are not changes.
	Notes []string `json:"notes,omitempty"`
	// NotReached: a rollout stopped (Ctrl-C, its failure budget, a batch
	// not confirmed) before it tried this host; nothing was done to it.
	// JSON has no status for it (DESIGN.md fixes the vocabulary): there it
	// is failed, its error saying "not reached: …"; the text says so.
	// Not part of the JSON contract.
	NotReached bool `json:"-"`
	// HugePageSize (bytes; 0 unknown) lets the text show a page count as
	// memory. Not part of the JSON contract.
	HugePageSize int64 `json:"-"`
}

// Change is plan.Change as rendered for people and tools: secrets are
// masked here, once, for every output format (see FromPlan).
type Change struct {
	Module string `json:"module"`
	Target string `json:"target"`
	Before string `json:"before"`
	After  string `json:"after"`
	Kind   string `json:"kind"`
	// Action is create, update, delete or restart (plan.ActionOf).
	Action string `json:"action"`
	Diff   string `json:"diff,omitempty"`
}

// Masked is what a sensitive value is shown as.
const Masked = mask.Masked

// FromPlan converts planned changes for the report. A change flagged
// Sensitive (it holds an inventory secret) is masked whole; every other
// change has the secrets inside its values masked by their structure
// (mask.Config: primary_conninfo's password, *password* settings,
// credentials in archive_command, ...), its diff line by line, so a
// report keeps showing what changes in a file without what it holds.
// The plan itself keeps the real values: apply compares and writes them.
func FromPlan(cs []plan.Change) []Change {
	out := make([]Change, 0, len(cs))
	for _, c := range cs {
		out = append(out, fromPlan(c))
	}
	return out
}

func fromPlan(c plan.Change) Change {
	rc := Change{Module: c.Module, Target: mask.Text(c.Target), Before: mask.Config(c.Before), After: mask.Config(c.After),
		Kind: string(c.Kind), Action: string(plan.ActionOf(c)), Diff: mask.Diff(c.Diff)}
	if c.Sensitive {
		rc.Before, rc.After = Masked, Masked
		if rc.Diff != "" {
			rc.Diff = Masked
		}
	}
	return rc
}

// MaskPlan masks planned changes in place, as FromPlan shows them, for a
// plan that nothing will act on (a check): FromPlan then gives the same
// changes and shares their strings instead of holding a masked copy of
// every file beside the plan's own. Never for a plan Apply follows: apply
// compares and writes the real values.
//
// A file the plan extends (a line appended) has its before held as the
// start of its after, not as a copy of its own.
func MaskPlan(cs []plan.Change) {
	for i, c := range cs {
		rc := fromPlan(c)
		if len(rc.Before) > 0 && strings.HasPrefix(rc.After, rc.Before) {
			rc.Before = rc.After[:len(rc.Before)]
		}
		cs[i].Target, cs[i].Before, cs[i].After, cs[i].Diff = rc.Target, rc.Before, rc.After, rc.Diff
	}
}

// Summary counts hosts by status.
type Summary struct {
	Hosts       int `json:"hosts"`
	InPolicy    int `json:"in_policy"`
	Drift       int `json:"drift"`
	Changed     int `json:"changed"`
	OK          int `json:"ok"`
	Failed      int `json:"failed"`
	Unreachable int `json:"unreachable"`
	Skipped     int `json:"skipped,omitempty"` // absent when 0: documents without skipped hosts are unchanged
}

// Summarize recomputes the summary from the hosts.
func (r *Report) Summarize() {
	s := Summary{Hosts: len(r.Hosts)}
	for _, h := range r.Hosts {
		switch h.Status {
		case InPolicy:
			s.InPolicy++
		case Drift:
			s.Drift++
		case Changed:
			s.Changed++
		case OK:
			s.OK++
		case Failed:
			s.Failed++
		case Unreachable:
			s.Unreachable++
		case Skipped:
			s.Skipped++
		}
	}
	r.Summary = s
}

// ExitCode is the process exit code DESIGN.md fixes: 1 for any failed or
// unreachable host; for check, 2 when some host drifts; else 0.
func (r *Report) ExitCode() int {
	if r.Summary.Failed > 0 || r.Summary.Unreachable > 0 {
		return 1
	}
	if r.Summary.Drift > 0 {
		return 2
	}
	return 0
}
