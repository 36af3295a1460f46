package engine

import (
	"errors"
	"strings"

	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/transport"
)

// Report renders the session's outcome. mode is "check" or "apply".
func (s *Session) Report(mode string) *report.Report {
	r := &report.Report{Mode: report.Mode(mode)}
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
			if note := postgresNote(hr.facts.PostgresError, hr.err); note != "" {
				h.Notes = append([]string{note}, h.Notes...)
			}
		}
		if hr.facts != nil {
			h.Notes = append(h.Notes, hr.facts.PostgresIgnored...)
		}
		h.Notes = append(h.Notes, hr.notes...)
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
		case hr.skipped:
			h.Status = report.Skipped
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
		annotate(&h, hr)
		r.Hosts = append(r.Hosts, h)
	}
	r.Summarize()
	return r
}

// postgresNote says why a host has no cluster to manage. Discovery that
// failed (several postmasters and no pg_data, a pg_data that is not there)
// is not "no cluster found": several may run. When the host's error
// already quotes it (a module that needs the cluster failed on it), the
// note would only repeat it.
func postgresNote(discoveryErr string, hostErr error) string {
	switch {
	case discoveryErr == "":
		return NoClusterNote
	case hostErr != nil && strings.Contains(hostErr.Error(), discoveryErr):
		return ""
	}
	return ClusterUnknownNote + ": " + discoveryErr
}

// NoClusterNote and ClusterUnknownNote head what the report and the
// facts say about a host's PostgreSQL when no cluster is managed.
const (
	NoClusterNote      = "no PostgreSQL cluster found"
	ClusterUnknownNote = "PostgreSQL cluster not identified"
)
