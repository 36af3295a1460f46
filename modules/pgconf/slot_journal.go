package pgconf

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
)

// The slots a switchover makes on the standby to promote are journaled
// there before each is made (engine kind "created", key slotKey), in a
// run of their own beside the switchover's (slotsRunSuffix), and settled
// once the switchover is done with them: dropped again when it is
// abandoned, kept once the standby is promoted. A controller killed in
// between leaves them unsettled, and the next pgtune rollback of the host
// drops each one still there, unused, on a server still a standby
// (Removable): otherwise nothing would, and the slot would retain WAL
// there for ever. The run is not kept (engine.KeptRoleChanges): rollback
// reads it; settled entries it leaves alone.

// slotsRunSuffix, with the port of the server, names the run whose
// journal holds the slots made on it (one switchover per server and run).
const slotsRunSuffix = "-slots-"

// slotKeyPrefix begins a slot's key: replication_slot:PORT:NAME.
const slotKeyPrefix = "replication_slot"

func slotKey(port int, name string) string {
	return slotKeyPrefix + ":" + strconv.Itoa(port) + ":" + name
}

// parseSlotKey reads a slot's key back from a journal (host input): the
// name must be one PostgreSQL allows, as every slot name pgtune reads.
func parseSlotKey(key string) (port int, name string, ok bool) {
	f := strings.Split(key, ":")
	if len(f) != 3 || f[0] != slotKeyPrefix || !facts.ValidSlotName(f[2]) {
		return 0, "", false
	}
	port, err := strconv.Atoi(f[1])
	if err != nil || port < 1 || port > 65535 || strconv.Itoa(port) != f[1] {
		return 0, "", false
	}
	return port, f[2], true
}

// slotJournal journals the slots made on one member; nil journals
// nothing (check mode, tests).
type slotJournal struct {
	t    *engine.Target
	port int
}

// newSlotJournal starts the journal of the slots a switchover makes on
// m, beside m's switchover run.
func newSlotJournal(m *swMember) *slotJournal {
	if m.t.Journal == nil {
		return nil
	}
	st := *m.t
	run := strings.TrimSuffix(m.t.RunID(), switchoverSuffix) + slotsRunSuffix + strconv.Itoa(m.pg.Port)
	st.Journal = engine.NewJournal(run, m.t.Name, m.t.StateDir, m.t.Transport, m.t.Become)
	st.Module = Name
	return &slotJournal{t: &st, port: m.pg.Port}
}

// record journals slot name before it is made.
func (j *slotJournal) record(ctx context.Context, name string) error {
	if j == nil {
		return nil
	}
	return j.t.RecordCreated(ctx, slotKey(j.port, name))
}

// settle records what became of slots; a failure only leaves them to
// rollback (which leaves a slot in use, or on a primary, alone), so it
// is logged, not returned.
func (j *slotJournal) settle(ctx context.Context, names []string, how string) {
	if j == nil {
		return
	}
	for _, n := range names {
		if err := j.t.SettleCreated(context.WithoutCancel(ctx), slotKey(j.port, n), how); err != nil && j.t.Log != nil {
			j.t.Log.Warn("switchover: could not record what became of a replication slot in the journal; pgtune rollback checks it again",
				"host", j.t.Name, "slot", n, "err", err)
		}
	}
}

var _ engine.Remover = (*Module)(nil)

// Removable says whether a slot a switchover made and never settled may
// be dropped: it is there, physical, not in use, on a server that is
// still a standby (a promoted one's members stream, or will stream,
// through it).
func (*Module) Removable(ctx context.Context, t *engine.Target, key string) (present bool, keep string, err error) {
	m, name, err := slotMember(t, key)
	if err != nil {
		return false, "", err
	}
	if !m.pg.Running {
		return true, fmt.Sprintf("PostgreSQL is not running on port %d, so the slot could not be read: run rollback again once it runs, or drop the slot by hand if nothing streams through it", m.pg.Port), nil
	}
	slots, err := readSlots(ctx, m)
	if err != nil {
		return false, "", err
	}
	var s *slotInfo
	for i := range slots {
		if slots[i].name == name {
			s = &slots[i]
		}
	}
	if s == nil {
		return false, "", nil
	}
	kv, err := ownerQuery(ctx, m.t, m.pg, "SELECT 'recovery=' || pg_is_in_recovery()")
	if err != nil {
		return false, "", fmt.Errorf("%s: %w", m.name(), err)
	}
	switch {
	case !s.physical:
		return true, "it is a logical slot now, not the one pgtune made", nil
	case s.active:
		return true, "in use (a standby streams through it)", nil
	case kv["recovery"] != "true":
		return true, "the server is a primary now (promoted): the members of its cluster stream, or will stream, through it", nil
	}
	return true, "", nil
}

// Remove drops the slot key names, once Removable says it may.
func (mod *Module) Remove(ctx context.Context, t *engine.Target, key string) error {
	present, keep, err := mod.Removable(ctx, t, key)
	switch {
	case err != nil:
		return err
	case !present:
		return nil
	case keep != "":
		return fmt.Errorf("not dropped: %s", keep)
	}
	m, name, err := slotMember(t, key)
	if err != nil {
		return err
	}
	_, err = dropSlots(ctx, m, []string{name})
	return err
}

// slotMember is the host's server a slot key names, and the slot's name.
func slotMember(t *engine.Target, key string) (*swMember, string, error) {
	port, name, ok := parseSlotKey(key)
	if !ok {
		return nil, "", fmt.Errorf("%s: not a replication slot pgtune makes", strconv.Quote(clipText(key)))
	}
	if t.Facts == nil || t.Facts.Postgres == nil || t.Facts.Postgres.Port != port {
		return nil, "", fmt.Errorf("%s: no PostgreSQL server of this host's inventory entry listens on port %d", t.Name, port)
	}
	return &swMember{t: t, pg: t.Facts.Postgres}, name, nil
}

// noteLeftSlots notes, on a running standby, each slot a switchover made
// on it and never settled (its controller was killed) that is still there
// and unused: it retains WAL there until a rollback drops it, and check
// says so meanwhile, as it says a restart left unfinished. Only standbys
// are read (slots are made on one; once promoted they are the members'),
// so other hosts pay no extra round trip. A failure to read only notes.
func (m *Module) noteLeftSlots(ctx context.Context, t *engine.Target, p *plan.ModulePlan) {
	pg, topo := t.Facts.Postgres, t.Facts.Topology
	if pg == nil || !pg.Running || topo == nil || topo.Role != "standby" {
		return
	}
	left, err := t.UnsettledCreated(ctx, Name)
	if err != nil {
		p.Note(fmt.Sprintf("the journals of this host could not be read for replication slots an interrupted switchover left: %v", err))
		return
	}
	for _, l := range left {
		port, name, ok := parseSlotKey(l.Key)
		if !ok || port != pg.Port {
			continue
		}
		present, keep, err := m.Removable(ctx, t, l.Key)
		switch {
		case err != nil:
			p.Note(fmt.Sprintf("replication slot %q, made here by switchover run %s that was interrupted, could not be read: %v", name, l.Run, err))
		case present && keep == "":
			p.Note(fmt.Sprintf("replication slot %q was made on this standby by switchover run %s, which was interrupted before it was done with it: it is unused and retains WAL here; pgtune rollback drops it (or drop it by hand: pg_drop_replication_slot)", name, l.Run))
		}
	}
}
