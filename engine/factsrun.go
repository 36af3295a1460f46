package engine

import (
	"context"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/inventory"
)

// HostFacts is one host's facts, or why there are none.
type HostFacts struct {
	Name        string       `json:"name"`
	Facts       *facts.Facts `json:"facts"`
	Error       *string      `json:"error"`
	Unreachable bool         `json:"unreachable,omitempty"`
}

// Facts gathers facts from every host, Forks at a time.
func (r *Runner) Facts(ctx context.Context, hosts []*inventory.Host) []HostFacts {
	s := &Session{runner: r}
	for _, h := range hosts {
		s.hosts = append(s.hosts, &hostRun{host: h, secrets: hostSecrets(h)})
	}
	defer s.Close()
	s.each(ctx, func(ctx context.Context, hr *hostRun) {
		tr, err := r.Dial(ctx, hr.host)
		if err != nil {
			hr.unreachable = true
			hr.err = err
			return
		}
		hr.tr = tr
		hr.err = s.gather(ctx, hr)
		// Done with this host: free its sshd session now, not at the end.
		_ = tr.Close()
		hr.tr = nil
	})
	out := make([]HostFacts, len(s.hosts))
	for i, hr := range s.hosts {
		// Sensitive vars are masked here as in every report.
		out[i] = HostFacts{Name: hr.host.Name, Facts: redactFacts(hr.facts, hr.secrets), Unreachable: hr.unreachable}
		if hr.err != nil {
			msg := redact(hr.err.Error(), hr.secrets)
			out[i].Error = &msg
		}
	}
	return out
}
