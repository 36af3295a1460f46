package pgconf

import (
	"fmt"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
)

// The play's choice for the primary of a replicated cluster. The engine
// restarts a cluster's standbys first, one at a time, and its primary
// last (engine/topology); this says what "last" does.
const (
	// primaryRestart restarts the primary in place: the outage is the
	// restart.
	primaryRestart = "restart"
	// primarySwitchover switches over to a standby already on the new
	// values and restarts the old primary as its standby: through Patroni
	// when Patroni manages the cluster (patroni_apply.go), else by pgtune
	// itself (switchover.go).
	primarySwitchover = "switchover"
	// primarySkip writes the new values but leaves the restart pending,
	// and says so.
	primarySkip = "skip"
)

func evalPrimary(sc *expr.Scope, v expr.Value) (string, error) {
	s, err := sc.String(v)
	if err != nil {
		return "", fmt.Errorf("primary: %w", err)
	}
	switch s {
	case primaryRestart, primarySwitchover, primarySkip:
		return s, nil
	}
	return "", sc.Errorf(v, "primary: %q is not restart, switchover or skip", s)
}

// replicatedPrimary reports whether the server is a primary with standbys
// streaming from it: the one whose restart the whole cluster feels.
func replicatedPrimary(topo *facts.Topology) bool {
	return topo.IsPrimary() && len(topo.Standbys) > 0
}

// primaryPolicy applies the play's primary choice to a replicated
// primary: skip turns the restart into a pending one, switchover without
// Patroni is pgtune's own (switchover.go). Lone servers and standbys
// restart as planned.
func primaryPolicy(topo *facts.Topology, s *settings, p *plan.ModulePlan) error {
	if !replicatedPrimary(topo) || !s.restart {
		return nil
	}
	switch s.primary {
	case primarySkip:
		s.restart, s.skipPrimary = false, true
		p.Note(fmt.Sprintf("primary of a replicated cluster (%d standby(s)): primary: skip leaves its restart pending; restart it (or switch over) yourself once its standbys are on the new values", len(topo.Standbys)))
	case primarySwitchover:
		if topo.Patroni != nil {
			return nil // Patroni moves the role (patroni_apply.go)
		}
		s.plainSwitchover = true
		p.Note(fmt.Sprintf("primary of a replicated cluster (%d standby(s)): primary: switchover: apply switches over to a standby already restarted on the new values and caught up (stops this primary with a fast shutdown, waits until that standby replayed its shutdown checkpoint, promotes it), repoints the other standbys and restarts this server as its standby; pgtune does not move clients: they must follow the new primary (e.g. target_session_attrs=read-write)", len(topo.Standbys)))
	}
	return nil
}

// pendingReason says why a needed restart is left pending.
func (s settings) pendingReason() string {
	if s.skipPrimary {
		return "primary: skip"
	}
	return "restart: false"
}
