package pgconf

import (
	"context"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine/facts"
)

// Replication slots in a switchover. Physical slots are not replicated: a
// standby that streams through a slot (primary_slot_name) finds none on
// the standby promoted, and the old primary keeps the slots it had, whose
// restart_lsn never moves again. So:
//
//   - before the promotion, while the standby to promote is still a
//     standby (physical slots can be made on one), a slot reserving WAL
//     is made on it for every member that will stream through a slot from
//     it: each direct standby repointed to it keeps its primary_slot_name,
//     and the old primary, when the promoted standby streamed through a
//     slot, streams through one of that name (its primary_slot_name);
//   - a switchover abandoned before the promotion reads the standby's
//     slots again and drops every one of those it was to make (the plan
//     proved none existed; a creation cut short may have made its slot
//     anyway): the standby is left as it was;
//   - each slot is journaled on the standby before it is made, and the
//     entry settled once the switchover is done with it (dropped again,
//     or kept by the promotion): a controller killed in between leaves
//     the slot to the next pgtune rollback (slot_journal.go);
//   - once every member streams from the new primary, the old primary's
//     slots the members used are dropped on it (it retains no WAL for
//     them any more); its other slots (a backup tool's, a logical slot)
//     have a consumer pgtune does not know: they are left alone, and named;
//   - when a member does not stream from the new primary after the
//     promotion, its slot there (made before the promotion) retains WAL
//     on the writable primary: the error names each such slot, and says
//     when max_slot_wal_keep_size is -1 there (nothing bounds it).
//
// Refused before the primary is stopped: two members naming one slot; a
// repointed standby not streaming through its slot on the old primary
// (the WAL it needs next may be kept only by that slot, and the slot
// made for it on the new primary begins later: after the promotion it
// would find its WAL removed); on the standby to promote, a slot of that
// name that is logical, in use, reserving no WAL (restart_lsn NULL,
// wal_status lost), or named by a standby cascading from it.
//
// Slot names come from the hosts: each is checked against what PostgreSQL
// allows (facts.ValidSlotName) and reaches SQL hex-encoded (slotLiteral),
// never pasted.

// maxSlots bounds the slots read from one server.
const maxSlots = 256

// slotInfo is one replication slot of a server (temporary slots are not
// read: they go with their session).
type slotInfo struct {
	name     string
	physical bool
	active   bool
	// noWAL: the slot reserves no WAL (restart_lsn NULL, or wal_status
	// 'lost': the WAL it was to keep is gone); a standby streaming
	// through it would not find what it needs.
	noWAL bool
}

// slotsSQL lists a server's slots, names hex-encoded: name, type, active,
// whether it has a restart_lsn, and its wal_status ('-' before
// PostgreSQL 13, which has none: read through to_jsonb, so the query
// runs on any version).
var slotsSQL = `SELECT 'slot=' || encode(convert_to(slot_name::text, 'UTF8'), 'hex') || ' ' || slot_type || ' ' || active
 || ' ' || (restart_lsn IS NOT NULL) || ' ' || coalesce(to_jsonb(s) ->> 'wal_status', '-')
FROM pg_replication_slots s WHERE NOT temporary ORDER BY slot_name LIMIT ` + strconv.Itoa(maxSlots+1)

// parseSlots reads slotsSQL's lines; names PostgreSQL would not allow, or
// too many slots, are refused (they did not come from
// pg_replication_slots).
func parseSlots(lines []string) ([]slotInfo, error) {
	var out []slotInfo
	for _, l := range lines {
		v, ok := strings.CutPrefix(strings.TrimSpace(l), "slot=")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 5 {
			return nil, fmt.Errorf("a replication slot line %s is not name, type, active, restart_lsn and wal_status", strconv.Quote(clipText(v)))
		}
		name := unhex(f[0])
		if !facts.ValidSlotName(name) {
			return nil, fmt.Errorf("a replication slot is named %s: not a slot name PostgreSQL allows", strconv.Quote(clipText(name)))
		}
		if f[1] != "physical" && f[1] != "logical" {
			return nil, fmt.Errorf("replication slot %q has type %s", name, strconv.Quote(clipText(f[1])))
		}
		active, ok1 := sqlBool(f[2])
		hasLSN, ok2 := sqlBool(f[3])
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("replication slot %q: active, restart_lsn are %s, %s", name, strconv.Quote(clipText(f[2])), strconv.Quote(clipText(f[3])))
		}
		switch f[4] {
		case "-", "reserved", "extended", "unreserved", "lost":
		default:
			return nil, fmt.Errorf("replication slot %q: wal_status is %s", name, strconv.Quote(clipText(f[4])))
		}
		out = append(out, slotInfo{name: name, physical: f[1] == "physical", active: active, noWAL: !hasLSN || f[4] == "lost"})
		if len(out) > maxSlots {
			return nil, fmt.Errorf("more than %d replication slots", maxSlots)
		}
	}
	return out, nil
}

// sqlBool reads a boolean as psql prints it.
func sqlBool(s string) (v, ok bool) {
	switch s {
	case "t", "true":
		return true, true
	case "f", "false":
		return false, true
	}
	return false, false
}

// clipText cuts host text for a message.
func clipText(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// readSlots reads a member's replication slots.
func readSlots(ctx context.Context, m *swMember) ([]slotInfo, error) {
	res, err := m.t.Run(ctx, "sh", "-c", psqlScript, "sh", m.pg.Owner, path.Join(m.pg.BinDir, "psql"),
		m.pg.SocketDir, strconv.Itoa(m.pg.Port), slotsSQL)
	if err != nil {
		return nil, fmt.Errorf("%s: read its replication slots: %w", m.name(), err)
	}
	s, err := parseSlots(strings.Split(string(res.Stdout), "\n"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", m.name(), err)
	}
	return s, nil
}

// slotLiteral is a slot name as an SQL expression: checked, then
// hex-encoded, so nothing of it is ever SQL text.
func slotLiteral(name string) (string, error) {
	if !facts.ValidSlotName(name) {
		return "", fmt.Errorf("%s is not a replication slot name PostgreSQL allows (a-z, 0-9, _; at most 63 bytes)", strconv.Quote(clipText(name)))
	}
	return "convert_from(decode('" + hex.EncodeToString([]byte(name)) + "', 'hex'), 'UTF8')", nil
}

// slotUser is a member and the slot it streams through ("" for none).
type slotUser struct {
	member, slot string
}

// slotPlan is what a switchover does with replication slots.
type slotPlan struct {
	// create: slots to make on the standby to promote, before the
	// promotion; reuse: slots it has already (physical, not in use).
	create, reuse []string
	// oldSlot is the old primary's primary_slot_name as a standby: the
	// slot the promoted standby streamed through ("" when it used none).
	oldSlot string
	// drop: the old primary's slots the members streamed through, dropped
	// on it once every member streams from the new primary.
	drop []string
	// left: the old primary's slots of no member (their consumer is
	// unknown to pgtune): left alone.
	left []string
}

// planSlots plans the slots of a switchover to cand (cand.slot: the slot
// it streams through now) from the old primary, where repointed are the
// other direct standbys, cascading the standbys streaming from cand,
// oldSlots the old primary's slots and candSlots the candidate's.
//
// A repointed standby whose slot on the old primary is not in use is
// refused: it is not streaming, and the WAL it needs next may be kept
// only by that slot; the slot made for it on cand reserves WAL from now
// on, so once cand is promoted it would ask for WAL cand no longer has
// (requested WAL segment has already been removed), past the point of
// no return.
func planSlots(old string, cand slotUser, repointed, cascading []slotUser, oldSlots, candSlots []slotInfo) (slotPlan, error) {
	var p slotPlan
	// Who will stream through which slot of the new primary.
	users := map[string]string{}
	var names []string
	need := func(slot, member string) error {
		if _, err := slotLiteral(slot); err != nil {
			return fmt.Errorf("%s: primary_slot_name %w", member, err)
		}
		if other, ok := users[slot]; ok {
			return fmt.Errorf("%s and %s would both stream through replication slot %q", other, member, slot)
		}
		users[slot] = member
		names = append(names, slot)
		return nil
	}
	if cand.slot != "" {
		if err := need(cand.slot, old); err != nil {
			return slotPlan{}, err
		}
		p.oldSlot = cand.slot
	}
	onOld := map[string]slotInfo{}
	for _, s := range oldSlots {
		onOld[s.name] = s
	}
	for _, u := range repointed {
		if u.slot == "" {
			continue
		}
		if err := need(u.slot, u.member); err != nil {
			return slotPlan{}, err
		}
	}
	for _, u := range repointed {
		if u.slot == "" {
			continue
		}
		const what = "the slot made for it on %s would reserve WAL only from now on, and after the promotion %s would ask for WAL %s no longer has (requested WAL segment has already been removed); bring %s back streaming, or choose primary: restart"
		switch s, ok := onOld[u.slot]; {
		case !ok:
			return slotPlan{}, fmt.Errorf("%s streams through replication slot %q, which %s does not have: it is not streaming; "+what,
				u.member, u.slot, old, cand.member, u.member, cand.member, u.member)
		case !s.active:
			return slotPlan{}, fmt.Errorf("%s is not streaming through its replication slot %q on %s (not in use): the WAL it needs next may be kept only by that slot; "+what,
				u.member, u.slot, old, cand.member, u.member, cand.member, u.member)
		}
	}
	// A standby streaming from cand names its slots there already.
	fromCand := map[string]string{}
	for _, u := range cascading {
		if u.slot != "" {
			fromCand[u.slot] = u.member
		}
	}
	have := map[string]slotInfo{}
	for _, s := range candSlots {
		have[s.name] = s
	}
	for _, n := range names {
		if c, ok := fromCand[n]; ok {
			return slotPlan{}, fmt.Errorf("%s streams from %s through its replication slot %q, which %s would stream through too", c, cand.member, n, users[n])
		}
		s, ok := have[n]
		switch {
		case !ok:
			p.create = append(p.create, n)
		case !s.physical:
			return slotPlan{}, fmt.Errorf("%s has a logical replication slot %q, which %s would stream through", cand.member, n, users[n])
		case s.active:
			return slotPlan{}, fmt.Errorf("%s's replication slot %q, which %s would stream through, is in use already", cand.member, n, users[n])
		case s.noWAL:
			return slotPlan{}, fmt.Errorf("%s's replication slot %q, which %s would stream through, reserves no WAL (restart_lsn NULL, or wal_status lost): drop it on %s and run again (pgtune then makes it anew)", cand.member, n, users[n], cand.member)
		default:
			p.reuse = append(p.reuse, n)
		}
	}
	// The old primary's slots: the members' go once they stream from the
	// new primary; any other is someone else's.
	for _, s := range oldSlots {
		if _, ok := users[s.name]; ok && s.physical {
			p.drop = append(p.drop, s.name)
		} else {
			p.left = append(p.left, s.name)
		}
	}
	sort.Strings(p.create)
	sort.Strings(p.reuse)
	sort.Strings(p.drop)
	sort.Strings(p.left)
	return p, nil
}

// createSlots makes the planned slots on the standby to promote, each
// reserving WAL from now on, and returns those it made (all, or those
// made before the error). Each is journaled first (j, slot_journal.go):
// a controller killed before the switchover is done with them leaves
// them to rollback, not to no one.
func createSlots(ctx context.Context, m *swMember, names []string, j *slotJournal) ([]string, error) {
	var made []string
	for _, n := range names {
		lit, err := slotLiteral(n)
		if err != nil {
			return made, err
		}
		if err := j.record(ctx, n); err != nil {
			return made, fmt.Errorf("%s: replication slot %q not created: journal it: %w", m.name(), n, err)
		}
		kv, err := ownerQuery(ctx, m.t, m.pg, "SELECT 'made=' || slot_name FROM pg_create_physical_replication_slot("+lit+", true)")
		if err != nil {
			return made, fmt.Errorf("%s: create replication slot %q: %w", m.name(), n, err)
		}
		if kv["made"] != n {
			return made, fmt.Errorf("%s: create replication slot %q: the server did not say it made it", m.name(), n)
		}
		made = append(made, n)
	}
	return made, nil
}

// dropSlots drops the named physical slots on a member (each must not be
// in use: pg_drop_replication_slot refuses an active one) and returns
// those dropped.
func dropSlots(ctx context.Context, m *swMember, names []string) ([]string, error) {
	var dropped []string
	for _, n := range names {
		lit, err := slotLiteral(n)
		if err != nil {
			return dropped, err
		}
		kv, err := ownerQuery(ctx, m.t, m.pg, "SELECT 'dropped=1' FROM pg_drop_replication_slot("+lit+")")
		if err != nil {
			return dropped, fmt.Errorf("%s: drop replication slot %q: %w", m.name(), n, err)
		}
		if kv["dropped"] != "1" {
			return dropped, fmt.Errorf("%s: drop replication slot %q: the server did not say it dropped it", m.name(), n)
		}
		dropped = append(dropped, n)
	}
	return dropped, nil
}

// slotsBack adds to the error of a switchover abandoned before the
// promotion what became of the slots it was to make on the standby that
// stays a standby, once they are dropped again. planned is the plan's
// create list, not only the slots psql confirmed: a query cut short (a
// second Ctrl-C, a dropped ssh connection, garbled output) may have made
// its slot anyway. The plan proved none of them existed, so every one of
// them the standby has now was made by the switchover: the standby's
// slots are read again and those are dropped. Those dropped, and those
// never made, are settled in the journal (j); one whose drop failed is
// left to rollback.
func slotsBack(ctx context.Context, err error, m *swMember, planned []string, j *slotJournal) error {
	if len(planned) == 0 {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	now, rerr := readSlots(ctx, m)
	if rerr != nil {
		return fmt.Errorf("%w; reading the replication slots of %s again FAILED (%v): drop any of %s it has on it by hand (pgtune made them; they retain WAL)",
			err, m.name(), rerr, quoteList(planned))
	}
	has := map[string]bool{}
	for _, s := range now {
		has[s.name] = true
	}
	var there []string
	for _, n := range planned {
		if has[n] {
			there = append(there, n)
		}
	}
	j.settle(ctx, without(planned, there), "never made: the switchover was abandoned before")
	if len(there) == 0 {
		return fmt.Errorf("%w; %s has none of the replication slots the switchover was to make on it (%s)", err, m.name(), quoteList(planned))
	}
	var dropped, failed []string
	for _, n := range there {
		d, derr := dropSlots(ctx, m, []string{n})
		if derr != nil || len(d) != 1 {
			failed = append(failed, fmt.Sprintf("%q (%v)", n, derr))
			continue
		}
		dropped = append(dropped, n)
	}
	j.settle(ctx, dropped, "dropped again: the switchover was abandoned before the promotion")
	msg := ""
	if len(dropped) > 0 {
		msg = fmt.Sprintf("; the replication slots made on %s are dropped again (%s)", m.name(), quoteList(dropped))
	}
	if len(failed) > 0 {
		msg += fmt.Sprintf("; dropping replication slots made on %s FAILED: %s: drop them on it by hand (they retain WAL)", m.name(), strings.Join(failed, ", "))
	}
	return fmt.Errorf("%w%s", err, msg)
}

func without(all, some []string) []string {
	var out []string
	for _, s := range all {
		if !slices.Contains(some, s) {
			out = append(out, s)
		}
	}
	return out
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// slotNameLine is the primary_slot_name setting for a configuration file
// (name checked: only a-z, 0-9 and _, or empty for none).
func slotNameLine(name string) (string, error) {
	if name != "" {
		if _, err := slotLiteral(name); err != nil {
			return "", err
		}
	}
	return "primary_slot_name = '" + name + "'", nil
}
