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
	// Address is the inventory's address of the host: a standby's
	// upstream may name the member so (ClusterLayout).
	Address string `json:"-"`
	// ReplicationHost is its ReplicationHostVar, with Address resolved
	// on the controller (ControllerAddrs) for the layout.
	ReplicationHost string `json:"-"`
	// Route is the name its connection dials (the ssh_config's HostName)
	// and Relayed says it is reached through a jump host or proxy command
	// (sourceOf).
	Route   string `json:"-"`
	Relayed bool   `json:"-"`
	// Local: the host is reached over the local connection (the
	// controller's own machine).
	Local bool `json:"-"`
}

// Facts gathers facts from every host, Forks at a time.
func (r *Runner) Facts(ctx context.Context, hosts []*inventory.Host) []HostFacts {
	return r.FactsEach(ctx, hosts, nil)
}

// FactsEach is Facts that also hands each host's facts to done (when not
// nil) as soon as that host is finished, from the host's goroutine.
func (r *Runner) FactsEach(ctx context.Context, hosts []*inventory.Host, done func(HostFacts)) []HostFacts {
	s := &Session{runner: r}
	for _, h := range hosts {
		s.hosts = append(s.hosts, &hostRun{host: h, secrets: hostSecrets(h)})
	}
	defer s.Close()
	s.eachFacts(ctx, func(ctx context.Context, hr *hostRun) {
		tr, err := r.Dial(ctx, hr.host)
		if err != nil {
			if hr.err = cutShort(ctx, hr.host.Name); hr.err != nil {
				return
			}
			hr.unreachable = true
			hr.err = err
			return
		}
		hr.tr = tr
		hr.err = s.gather(ctx, hr, false)
		// Done with this host: free its sshd session now, not at the end.
		_ = tr.Close()
		hr.tr = nil
	}, done)
	out := make([]HostFacts, len(s.hosts))
	for i, hr := range s.hosts {
		out[i] = hostFacts(hr)
	}
	return out
}

// eachFacts runs gather on every host and tells done each host's result
// once it is known, a dial failure included.
func (s *Session) eachFacts(ctx context.Context, gather func(context.Context, *hostRun), done func(HostFacts)) {
	s.each(ctx, func(ctx context.Context, hr *hostRun) {
		s.runHost(ctx, hr, gather) // a panic becomes the host's error before done sees it
		if done != nil {
			done(hostFacts(hr))
		}
	})
}

// hostFacts is a host's facts as shown: sensitive vars masked here as in
// every report.
func hostFacts(hr *hostRun) HostFacts {
	out := HostFacts{Name: hr.host.Name, Facts: redactFacts(hr.facts, hr.secrets), Unreachable: hr.unreachable, Address: hr.host.Conn.Address,
		ReplicationHost: replicationHost(hr.host.Vars), Local: hr.host.Conn.Connection == "local"}
	src := sourceOf(hr.host)
	out.Route, out.Relayed = src.route, src.relayed
	if hr.err != nil {
		msg := redact(hr.err.Error(), hr.secrets)
		out.Error = &msg
	}
	return out
}
