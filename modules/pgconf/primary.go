package pgconf

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/topology"
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

// switchover_timeout: its default and bounds. One bound serves each of
// the switchover's waits on the standby it promotes (catch up, replay the
// shutdown checkpoint, finish the promotion), so the old primary is down
// for at most about two of them before it is back or replaced.
const (
	defaultSwitchoverTimeout = "60s"
	minSwitchoverTimeout     = time.Second
	maxSwitchoverTimeout     = time.Hour
)

// evalSwitchoverTimeout reads switchover_timeout: a duration ("90s",
// "2m") or a number of seconds, whole seconds (pg_promote waits in
// seconds), from 1 s to 1 h.
func evalSwitchoverTimeout(sc *expr.Scope, v expr.Value) (int, error) {
	s, err := sc.String(v)
	if err != nil {
		return 0, fmt.Errorf("switchover_timeout: %w", err)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		n, nerr := strconv.ParseFloat(s, 64)
		if nerr != nil {
			return 0, sc.Errorf(v, "switchover_timeout: %q is not a duration (30s, 2m) or a number of seconds", s)
		}
		d = time.Duration(n * float64(time.Second))
	}
	switch {
	case d < minSwitchoverTimeout || d > maxSwitchoverTimeout:
		return 0, sc.Errorf(v, "switchover_timeout: %s is not between %s and %s", d, minSwitchoverTimeout, maxSwitchoverTimeout)
	case d%time.Second != 0:
		return 0, sc.Errorf(v, "switchover_timeout: %s is not a whole number of seconds", d)
	}
	return int(d / time.Second), nil
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
	defer walClientsNote(topo, s, p)
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

// walClientsNote names the WAL clients that are no standby streaming
// from a primary whose restart is planned (facts.Topology's Clients: WAL
// archivers, base backups, logical decoding clients). They are no
// members of its cluster: a restart goes ahead, cuts them off, and they
// reconnect. A plain switchover is refused while a logical decoding
// client streams (switchover.go: its slot does not follow the role), and
// goes ahead with the others, which must follow the new primary.
func walClientsNote(topo *facts.Topology, s *settings, p *plan.ModulePlan) {
	if !topo.IsPrimary() || !s.restart || (len(topo.Clients) == 0 && topo.MoreClients == 0) {
		return
	}
	list := strings.Join(topology.ClientList(topo), ", ")
	if !s.plainSwitchover {
		p.Note(fmt.Sprintf("WAL clients that are no standby stream from this primary: %s; they are no members of its cluster and hold no restart: the restart cuts them off and they reconnect", list))
		return
	}
	if lc := topo.LogicalClients(); len(lc) > 0 {
		p.Note(fmt.Sprintf("WAL clients that are no standby stream from this primary: %s; apply refuses the switchover while a logical decoding client streams (its slot stays on this server): %s", list, logicalAdvice))
		return
	}
	p.Note(fmt.Sprintf("WAL clients that are no standby stream from this primary: %s; they do not move with the switchover: each must follow the new primary, or keep streaming from this server once it is a standby", list))
}

// pendingReason says why a needed restart is left pending.
func (s settings) pendingReason() string {
	if s.skipPrimary {
		return "primary: skip"
	}
	return "restart: false"
}
