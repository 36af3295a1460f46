package pgconf

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/topology"
	"github.com/pgtune/pgtune/engine/transport"
)

// primary: switchover for plain streaming replication (no cluster
// manager). After the standbys are restarted on the new values (the
// engine's cluster order), the primary's restart becomes:
//
//  1. read every member and refuse, with the reason and nothing touched,
//     what cannot be done safely;
//  2. pick a standby streaming from the primary, caught up, already on
//     the new values (no pending restart, huge pages on), not delayed;
//     wait, the primary still serving, until it has replayed what the
//     primary had written (switchover_timeout), else refuse;
//  3. stop the primary with a fast shutdown: its shutdown checkpoint is
//     streamed to the standbys before the WAL senders exit;
//  4. wait until the chosen standby has replayed that checkpoint (the old
//     primary's pg_controldata names it): no acknowledged commit is lost;
//  5. promote it (pg_promote, waiting up to switchover_timeout);
//  6. make the old primary its standby (standby.signal, primary_conninfo
//     written where the cluster keeps it) and start it on the new values;
//  7. repoint the other standbys that streamed from the old primary
//     (primary_conninfo is reloadable; recovery_target_timeline = latest
//     makes them follow the new timeline), and confirm every standby
//     streams on the new timeline.
//
// Replication slots (slots.go): before step 3, the standby to promote
// gets a physical slot for every member that will stream through one from
// it (the other standbys' primary_slot_name; for the old primary, the slot
// the standby itself streamed through, which becomes the old primary's
// primary_slot_name in step 6). After step 7, the old primary's slots the
// members streamed through are dropped on it; its other slots (a backup
// tool's) are left alone and named. A repointed standby not streaming
// through its slot on the old primary is refused before step 3 (its slot
// on the new primary would begin too late for it); after step 5, the
// slots on the new primary of members that do not stream from it are
// named in the error (they retain WAL there).
//
// Until step 5 every failure puts the old primary back (started as the
// primary again) and drops the slots made on the standby to promote (those
// of the plan it has then: a creation cut short may have made its slot).
// A promotion that fails or does not finish in time is
// withdrawn first (abandonPromotion): the standby is made sure to stay a
// standby before the old primary starts, so there are never two
// primaries. From step 5 on, the new primary is writable and is never
// undone; a failure names the host and step and the state left. pgtune
// does not move clients: they must follow the new primary (a multi-host
// connection string with target_session_attrs=read-write, a proxy).
//
// The role changes are journaled on each member as run RunID-switchover,
// apart from the settings of the run itself: rolling the settings back
// does not move the primary role back.

// switchoverSuffix names the run whose journal holds the role changes.
const switchoverSuffix = "-switchover"

// replicationHostVar, set on a host, is the address the other members
// reach its server at for replication, when it is not the inventory's
// address (ssh_host) and not a unix socket on the same machine.
const replicationHostVar = engine.ReplicationHostVar

// Bounds of the switchover's waits. The waits on the standby being
// promoted (catch up, replay the shutdown checkpoint, promote) take the
// play's switchover_timeout.
var (
	switchoverStreamTimeout = 90 * time.Second
	switchoverPoll          = 200 * time.Millisecond
	switchoverMaxLag        = int64(engine.DefaultMaxLagBytes)
)

// swMember is one member as the switchover reads it.
type swMember struct {
	t  *engine.Target
	pg *facts.Postgres
	// conninfo is its primary_conninfo (a secret: never shown), and
	// file and line where it is set ("" when nowhere).
	conninfo []conninfoPair
	file     string
	line     int
	// settings read from the server.
	pending   int
	hugePages string
	// delayed: recovery_min_apply_delay is set (a delayed standby is
	// never promoted: its delay is what it is for).
	delayed bool
	// slot is its primary_slot_name (checked: a name PostgreSQL allows,
	// or "" for none), and slotFile and slotLine where it is set.
	slot     string
	slotFile string
	slotLine int
}

func (m *swMember) name() string { return m.t.Name }

// switchover is the cluster as the switchover found it.
type switchover struct {
	old *swMember
	// direct stream from the old primary; cascaded from another standby
	// (they follow the new timeline through their upstream).
	direct, cascaded []*swMember
	// timeout bounds each wait on the standby being promoted.
	timeout time.Duration
	// clients describes the old primary's WAL clients that are no
	// standby (WAL archivers, base backups: a logical decoding client
	// refuses the switchover), for the warning once the role moved.
	clients []string
	// senders is the old primary's topology as read with the
	// switchover: its WAL senders decide which standbys are its own
	// (senders.go).
	senders *facts.Topology
}

// logicalAdvice is what to do about a logical decoding client that holds
// a plain switchover.
const logicalAdvice = "use primary: restart (the client reconnects to this server), or move the client (and its slot) or stop it first and switch over then"

// clientNames describes WAL clients for a message, names clipped.
func clientNames(cs []facts.WALClient) []string {
	return topology.ClientList(&facts.Topology{Clients: cs})
}

// switchoverSQL reads what the switchover needs from a member.
const switchoverSQL = `SELECT 'tl=' || current_setting('recovery_target_timeline')
UNION ALL SELECT 'file=' || encode(convert_to(coalesce(sourcefile, ''), 'UTF8'), 'hex') FROM pg_settings WHERE name = 'primary_conninfo'
UNION ALL SELECT 'line=' || coalesce(sourceline, 0) FROM pg_settings WHERE name = 'primary_conninfo'
UNION ALL SELECT 'conninfo=' || encode(convert_to(current_setting('primary_conninfo'), 'UTF8'), 'hex')
UNION ALL SELECT 'sync=' || encode(convert_to(current_setting('synchronous_standby_names'), 'UTF8'), 'hex')
UNION ALL SELECT 'pending=' || count(*) FROM pg_settings WHERE pending_restart
UNION ALL SELECT 'huge_pages=' || current_setting('huge_pages')
UNION ALL SELECT 'recovery=' || pg_is_in_recovery()
UNION ALL SELECT 'delay=' || setting FROM pg_settings WHERE name = 'recovery_min_apply_delay'
UNION ALL SELECT 'slot=' || encode(convert_to(current_setting('primary_slot_name'), 'UTF8'), 'hex')
UNION ALL SELECT 'slotfile=' || encode(convert_to(coalesce(sourcefile, ''), 'UTF8'), 'hex') FROM pg_settings WHERE name = 'primary_slot_name'
UNION ALL SELECT 'slotline=' || coalesce(sourceline, 0) FROM pg_settings WHERE name = 'primary_slot_name'`

// ownerQuery runs sql on the member's server as its owner and reads
// key=value lines.
func ownerQuery(ctx context.Context, t *engine.Target, pg *facts.Postgres, sql string) (map[string]string, error) {
	res, err := t.Run(ctx, "sh", "-c", psqlScript, "sh", pg.Owner, path.Join(pg.BinDir, "psql"),
		pg.SocketDir, strconv.Itoa(pg.Port), sql)
	if err != nil {
		return nil, fmt.Errorf("query the server (port %d): %w", pg.Port, err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(res.Stdout), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
			out[k] = v
		}
	}
	return out, nil
}

func unhex(s string) string {
	b, err := hex.DecodeString(s)
	if err != nil {
		return ""
	}
	return string(b)
}

// readMember reads a member's replication settings.
func readMember(ctx context.Context, t *engine.Target) (*swMember, map[string]string, error) {
	if t.Facts == nil || t.Facts.Postgres == nil || !t.Facts.Postgres.Running {
		return nil, nil, errors.New("PostgreSQL is not running")
	}
	m := &swMember{t: t, pg: t.Facts.Postgres}
	kv, err := ownerQuery(ctx, t, m.pg, switchoverSQL)
	if err != nil {
		return nil, nil, err
	}
	if kv["recovery"] != "true" && kv["recovery"] != "false" {
		return nil, nil, errors.New("the server did not say whether it is in recovery")
	}
	m.file = unhex(kv["file"])
	if n, err := facts.ParseInt("primary_conninfo line", kv["line"], 0, 1<<30); err == nil {
		m.line = int(n)
	}
	if m.file != "" && (!path.IsAbs(m.file) || path.Clean(m.file) != m.file || m.line < 1) {
		return nil, nil, fmt.Errorf("primary_conninfo is set at %s line %d: not a file pgtune can edit", strconv.Quote(m.file), m.line)
	}
	if ci := unhex(kv["conninfo"]); ci != "" {
		if m.conninfo, err = parseConninfo(ci); err != nil {
			return nil, nil, err
		}
	}
	if n, err := facts.ParseInt("settings pending restart", kv["pending"], 0, 1<<20); err == nil {
		m.pending = int(n)
	}
	m.hugePages = kv["huge_pages"]
	m.delayed = kv["delay"] != "" && kv["delay"] != "0"
	if m.slot = unhex(kv["slot"]); m.slot != "" && !facts.ValidSlotName(m.slot) {
		return nil, nil, fmt.Errorf("its primary_slot_name %s is not a replication slot name PostgreSQL allows", strconv.Quote(clipText(m.slot)))
	}
	m.slotFile = unhex(kv["slotfile"])
	if n, err := facts.ParseInt("primary_slot_name line", kv["slotline"], 0, 1<<30); err == nil {
		m.slotLine = int(n)
	}
	if m.slotFile != "" && (!path.IsAbs(m.slotFile) || path.Clean(m.slotFile) != m.slotFile || m.slotLine < 1) {
		return nil, nil, fmt.Errorf("primary_slot_name is set at %s line %d: not a file pgtune can edit", strconv.Quote(clipText(m.slotFile)), m.slotLine)
	}
	return m, kv, nil
}

// readSwitchover reads every member and refuses what a switchover
// cannot do safely, naming the member and the reason.
func readSwitchover(ctx context.Context, t *engine.Target, peers []*engine.Target) (*switchover, error) {
	pg := t.Facts.Postgres
	if restartCommand(t) != "" {
		return nil, fmt.Errorf("%s: %s is set: a switchover stops the primary and starts it as a standby with pg_ctl, which a custom restart command may not expect", t.Name, restartVar)
	}
	if pg.Cluster != "" {
		return nil, fmt.Errorf("%s: a Debian cluster (%s) is started by pg_ctlcluster or systemd: a switchover stops and starts the primary with pg_ctl only", t.Name, pg.Cluster)
	}
	old, kv, err := readMember(ctx, t)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.Name, err)
	}
	if kv["recovery"] != "false" {
		return nil, fmt.Errorf("%s: the server is not the primary any more", t.Name)
	}
	if unhex(kv["sync"]) != "" {
		return nil, fmt.Errorf("%s: synchronous_standby_names is set: with synchronous replication the standby names would have to move with the primary role; use primary: restart", t.Name)
	}
	// WAL clients that are no standby, asked now (a client may have come
	// since the facts): a logical decoding client's slot would stay on
	// this server, the others are warned of once the role moved.
	topo, err := facts.GatherTopology(ctx, t.Transport, t.Become, pg)
	if err != nil {
		return nil, fmt.Errorf("%s: read its WAL clients: %w", t.Name, err)
	}
	if topo == nil || !topo.IsPrimary() {
		return nil, fmt.Errorf("%s: the server is not the primary any more", t.Name)
	}
	if lc := topo.LogicalClients(); len(lc) > 0 {
		return nil, fmt.Errorf("%s: %s streams from this primary through its logical replication slot, which stays on this server (PostgreSQL 15 does not move a logical slot with the primary role): after a switchover it would find no slot on the new primary; %s",
			t.Name, strings.Join(clientNames(lc), ", "), logicalAdvice)
	}
	sw := &switchover{old: old, clients: topology.ClientList(topo), senders: topo}
	oldReach := map[string]bool{}
	for _, r := range topology.Addresses(t.Facts.Hostname, pg.SocketDir, pg.Port, t.Facts.Hostname, inventoryAddress(t)) {
		oldReach[r] = true
	}
	for _, p := range peers {
		m, kv, err := readMember(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Name, err)
		}
		topo := p.Facts.Topology
		if topo == nil || kv["recovery"] != "true" {
			return nil, fmt.Errorf("%s: not a standby (it says it is a primary too)", p.Name)
		}
		if tl := kv["tl"]; tl != "latest" {
			return nil, fmt.Errorf("%s: recovery_target_timeline is %s, not latest: it would not follow the new primary's timeline", p.Name, strconv.Quote(tl))
		}
		if !oldReach[topology.UpstreamReach(p.Facts.Hostname, topo.Upstream)] {
			sw.cascaded = append(sw.cascaded, m)
			continue
		}
		switch host := conninfoGet(m.conninfo, "host"); {
		case m.file == "":
			return nil, fmt.Errorf("%s: its primary_conninfo is not set in a configuration file pgtune can edit", p.Name)
		case strings.Contains(host, ","), strings.Contains(conninfoGet(m.conninfo, "hostaddr"), ","):
			return nil, fmt.Errorf("%s: its primary_conninfo names several hosts: pgtune repoints a single one", p.Name)
		}
		sw.direct = append(sw.direct, m)
	}
	if len(sw.direct) == 0 {
		return nil, fmt.Errorf("%s: no standby streams from this primary", t.Name)
	}
	// Each standby saying it streams from this primary must have a WAL
	// sender of its own here: one that does not may be any host.
	if _, _, why := sw.matchSenders(sw.oldSenders()); len(why) > 0 {
		return nil, fmt.Errorf("%s: not every standby is one this primary streams to: %s; if a standby replicates over another network than the one it is reached at, set %s on it to that address",
			t.Name, strings.Join(why, "; "), replicationHostVar)
	}
	return sw, nil
}

// inventoryAddress is the address the inventory reaches a host at.
func inventoryAddress(t *engine.Target) string {
	for _, k := range []string{"ssh_host", "ansible_host"} {
		if v, ok := t.Vars[k].(string); ok && v != "" {
			return v
		}
	}
	return t.Name
}

// upstreamHost is the host a member's primary_conninfo must name to reach
// the new primary, given the host it names now (a socket directory or
// empty: a unix socket, which only works on the same machine).
func upstreamHost(newPrimary, member *swMember, current string) (string, error) {
	if v, ok := newPrimary.t.Vars[replicationHostVar].(string); ok && v != "" {
		return v, nil
	}
	if current == "" || strings.HasPrefix(current, "/") || strings.HasPrefix(current, "@") {
		if newPrimary.t.Facts.Hostname != member.t.Facts.Hostname {
			return "", fmt.Errorf("%s reaches its primary through a unix socket, and %s runs on another machine; set %s on %s", member.name(), newPrimary.name(), replicationHostVar, newPrimary.name())
		}
		return newPrimary.pg.SocketDir, nil
	}
	return inventoryAddress(newPrimary.t), nil
}

// candidate picks the standby to promote: streaming from the old primary
// (one of its WAL senders is the standby's: senders.go), caught up within
// the lag bound as the old primary shows it, already restarted on the new
// values; the least lagged, then by name.
func (sw *switchover) candidate() (*swMember, error) {
	var ok []*swMember
	var why []string
	lags := map[*swMember]int64{}
	for _, m := range sw.direct {
		topo := m.t.Facts.Topology
		lag, shown := sw.primaryLag(sw.oldSenders(), m)
		lags[m] = lag
		switch {
		case topo.Receiver != "streaming":
			why = append(why, fmt.Sprintf("%s: WAL receiver %q", m.name(), topo.Receiver))
		case !shown:
			why = append(why, fmt.Sprintf("%s: %s shows no WAL sender of its own to it", m.name(), sw.old.name()))
		case lag > switchoverMaxLag:
			why = append(why, fmt.Sprintf("%s: replay lags %d bytes", m.name(), lag))
		case m.delayed:
			why = append(why, fmt.Sprintf("%s: a delayed standby (recovery_min_apply_delay)", m.name()))
		case m.pending > 0 || m.hugePages != "on":
			why = append(why, fmt.Sprintf("%s: not restarted on the new values yet", m.name()))
		default:
			ok = append(ok, m)
		}
	}
	if len(ok) == 0 {
		return nil, fmt.Errorf("no standby to switch over to (%s)", strings.Join(why, "; "))
	}
	sort.SliceStable(ok, func(i, j int) bool {
		a, b := lags[ok[i]], lags[ok[j]]
		if a != b {
			return a < b
		}
		return ok[i].name() < ok[j].name()
	})
	return ok[0], nil
}

// repointing is one member to point at the new primary: its new
// primary_conninfo line and the file it goes into.
type repointing struct {
	m        *swMember
	file     string
	content  []byte
	upstream string // host:port, for messages
}

// planRepoint prepares each member's new primary_conninfo: the old
// primary takes the new primary's own (application_name dropped), every
// other direct standby keeps its own with host and port replaced. The old
// primary's primary_slot_name becomes oldSlot (slots.go), in the file
// its primary_conninfo goes to.
func (sw *switchover) planRepoint(ctx context.Context, cand *swMember, oldSlot string) ([]repointing, error) {
	var out []repointing
	members := []*swMember{sw.old}
	for _, m := range sw.direct {
		if m != cand {
			members = append(members, m)
		}
	}
	for _, m := range members {
		base, drop := m.conninfo, []string(nil)
		if m == sw.old {
			base, drop = cand.conninfo, []string{"application_name"}
		}
		host, err := upstreamHost(cand, m, conninfoGet(base, "host"))
		if err != nil {
			return nil, err
		}
		line, err := repointLine(base, host, cand.pg.Port, drop...)
		if err != nil {
			return nil, fmt.Errorf("%s: pointing it at %s: %w", m.name(), cand.name(), err)
		}
		file := m.file
		if file == "" {
			file = path.Join(m.pg.DataDir, autoConfName) // where pg_basebackup -R writes it
		}
		b, _, err := m.t.ReadFile(ctx, file)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.name(), err) // "read FILE: …" already
		}
		var content []byte
		if m.file == "" {
			content = appendConfLine(b, line)
		} else if content, err = replaceConfLine(b, m.line, "primary_conninfo", line); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", m.name(), file, err)
		}
		if m == sw.old && m.slot != oldSlot {
			sl, err := slotNameLine(oldSlot)
			if err != nil {
				return nil, err
			}
			switch {
			case m.slotFile == file:
				if content, err = replaceConfLine(content, m.slotLine, "primary_slot_name", sl); err != nil {
					return nil, fmt.Errorf("%s: %s: %w", m.name(), file, err)
				}
			case m.slotFile == "" && m.slot != "":
				// Set on the command line (postgres -c), not in a file:
				// a line in any file loses to it.
				return nil, fmt.Errorf("%s: primary_slot_name %q is not set in a configuration file (the command line?): the line pgtune would write to %s loses to it; set it in that file instead, or choose primary: restart",
					m.name(), m.slot, strconv.Quote(clipText(file)))
			case m.slotFile == "", file == path.Join(m.pg.DataDir, autoConfName): // set nowhere, or file is read last
				content = appendConfLine(content, sl)
			default:
				return nil, fmt.Errorf("%s: primary_slot_name is set in %s and primary_conninfo goes to %s: pgtune edits them in one file",
					m.name(), strconv.Quote(clipText(m.slotFile)), strconv.Quote(clipText(file)))
			}
		}
		out = append(out, repointing{m: m, file: file, content: content, upstream: fmt.Sprintf("%s:%d", host, cand.pg.Port)})
	}
	return out, nil
}

// reachableScript asks, from a member's host, whether the new primary's
// server answers at the address its primary_conninfo will name.
const reachableScript = `"$1/pg_isready" -q -d postgres -h "$2" -p "$3"`

func checkReachable(ctx context.Context, r repointing, port int) error {
	host := r.upstream[:strings.LastIndexByte(r.upstream, ':')]
	_, err := r.m.t.Run(ctx, "sh", "-c", ownerScript, "sh", r.m.pg.Owner, reachableScript, r.m.pg.BinDir, host, strconv.Itoa(port))
	if err != nil {
		return fmt.Errorf("%s cannot reach the new primary at %s: %w", r.m.name(), r.upstream, err)
	}
	return nil
}

// sideTarget is t journaling into the switchover's run.
func sideTarget(t *engine.Target) *engine.Target {
	st := *t
	if t.Journal != nil && !strings.HasSuffix(t.RunID(), switchoverSuffix) {
		st.Journal = engine.NewKeptJournal(t.RunID()+switchoverSuffix, t.Name, t.StateDir, t.Transport, t.Become, engine.KeptRoleChanges)
	}
	return &st
}

// stopScript stops the server with a fast shutdown, as its owner.
const stopScript = `"$1/pg_ctl" -D "$2" -m fast -w -t "$3" stop`

// controldataScript prints pg_control, as the owner.
const controldataScript = `LC_ALL=C "$1/pg_controldata" -D "$2"`

var lsnRE = regexp.MustCompile(`^[0-9A-F]{1,8}/[0-9A-F]{1,8}$`)

// controldata reads a stopped server's pg_control as pg_controldata
// prints it: "Database cluster state", "Latest checkpoint location", ...
func controldata(ctx context.Context, t *engine.Target, pg *facts.Postgres) (map[string]string, error) {
	res, err := t.Run(ctx, "sh", "-c", ownerScript, "sh", pg.Owner, controldataScript, pg.BinDir, pg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("pg_controldata: %w", err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(res.Stdout), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out, nil
}

// shutdownCheckpoint reads a stopped server's pg_control: it must say
// "shut down" (a clean stop), and names the shutdown checkpoint.
func shutdownCheckpoint(ctx context.Context, t *engine.Target, pg *facts.Postgres) (string, error) {
	cd, err := controldata(ctx, t, pg)
	if err != nil {
		return "", err
	}
	state, lsn := cd["Database cluster state"], cd["Latest checkpoint location"]
	if state != "shut down" {
		return "", fmt.Errorf("pg_controldata says %q, not a clean shut down", state)
	}
	if !lsnRE.MatchString(lsn) {
		return "", fmt.Errorf("pg_controldata names no checkpoint location (%q)", lsn)
	}
	return lsn, nil
}

// poll runs cond until it says done or the timeout passes; its last
// reason makes the error.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		done, why := cond()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %v: %s", timeout, why)
		case <-time.After(switchoverPoll):
		}
	}
}

// awaitReplayed waits until m has replayed past lsn (the old primary's
// shutdown checkpoint record).
func awaitReplayed(ctx context.Context, m *swMember, lsn string, timeout time.Duration) error {
	sql := "SELECT 'past=' || (pg_wal_lsn_diff(pg_last_wal_replay_lsn(), '" + lsn + "') > 0)"
	return poll(ctx, timeout, func() (bool, string) {
		kv, err := ownerQuery(ctx, m.t, m.pg, sql)
		if err != nil {
			return false, err.Error()
		}
		return kv["past"] == "true", "its replay has not passed " + lsn
	})
}

// promote promotes m, waiting at most timeout, and returns its new
// timeline.
func promote(ctx context.Context, m *swMember, timeout time.Duration) (int64, error) {
	secs := int(timeout / time.Second)
	kv, err := ownerQuery(ctx, m.t, m.pg, fmt.Sprintf("SELECT 'promoted=' || pg_promote(true, %d)", secs))
	if err != nil || kv["promoted"] != "true" {
		// pg_promote can fail after the promotion began: ask.
		if now, qerr := ownerQuery(ctx, m.t, m.pg, "SELECT 'recovery=' || pg_is_in_recovery()"); qerr != nil || now["recovery"] != "false" {
			if err == nil {
				err = fmt.Errorf("pg_promote did not finish within %d s (switchover_timeout)", secs)
			}
			return 0, err
		}
	}
	kv, err = ownerQuery(ctx, m.t, m.pg, "SELECT 'wal=' || pg_walfile_name(pg_current_wal_lsn())")
	if err != nil {
		return 0, fmt.Errorf("promoted, but its timeline: %w", err)
	}
	w := kv["wal"]
	if len(w) != 24 {
		return 0, fmt.Errorf("promoted, but its WAL file name %q names no timeline", w)
	}
	tl, err := strconv.ParseInt(w[:8], 16, 64)
	if err != nil || tl < 2 {
		return 0, fmt.Errorf("promoted, but its WAL file name %q names no new timeline", w)
	}
	return tl, nil
}

// withdrawal is what became of a promotion pgtune withdrew.
type withdrawal struct {
	// promoted: the standby finished its promotion after all (it is a
	// primary, started again); the old primary must stay stopped.
	promoted bool
	// restart: the standby is stopped and never took the request; it
	// starts again as a standby of the old primary.
	restart bool
	// why says the state the standby is left in, for the error.
	why string
}

// withdrawPromotionScript removes the promotion request (the "promote"
// file pg_promote writes; the startup process takes a request only while
// that file is there), as the owner.
const withdrawPromotionScript = `rm -f -- "$1/promote"`

// standbySignalScript creates standby.signal if it is missing, as the
// owner, and says whether it did.
const standbySignalScript = `if [ -e "$1/standby.signal" ]; then echo had; else : > "$1/standby.signal" && chmod 600 "$1/standby.signal" && echo made; fi`

// withdrawPromotion makes sure a standby whose promotion failed or did not
// finish within switchover_timeout stays a standby, before the old
// primary is started again (never two primaries): the request is
// removed, the standby stopped (a promotion under way cannot be stopped
// otherwise) and its pg_control read. Stopped in recovery, it is not a
// primary; standby.signal is made sure of (a promotion that began removed
// it), so it can only ever start as a standby. If it took the request it
// has left the old timeline (pg_control's minimum recovery timeline is
// past its checkpoint's) and cannot follow the old primary again: it is
// left stopped. Otherwise it starts again as a standby once the old
// primary is back. A server that stopped as a primary finished its
// promotion: it is started again, and stays the primary.
func withdrawPromotion(ctx context.Context, m *swMember) (withdrawal, error) {
	t, pg := m.t, m.pg
	if _, err := t.Run(ctx, "sh", "-c", ownerScript, "sh", pg.Owner, withdrawPromotionScript, pg.DataDir); err != nil {
		return withdrawal{}, fmt.Errorf("remove its promote file: %w", err)
	}
	res, stopErr := t.Run(ctx, "sh", "-c", ownerScript, "sh", pg.Owner, stopScript, pg.BinDir, pg.DataDir, strconv.Itoa(restartTimeout))
	cd, err := controldata(ctx, t, pg)
	if stopErr != nil {
		// A server that was down already (it failed) says in pg_control
		// how it stopped; a server still running must not be guessed at.
		if now, serr := postgresStatus(ctx, t, pg); serr != nil || now.Ready || err != nil || !strings.HasPrefix(cd["Database cluster state"], "shut down") {
			return withdrawal{}, fmt.Errorf("stop it: %v %s", stopErr, lastLines(string(res.Stdout), 3))
		}
	}
	if err != nil {
		return withdrawal{}, err
	}
	switch state := cd["Database cluster state"]; state {
	case "shut down in recovery":
	case "shut down":
		res, err := startAgain(ctx, t, pg)
		if why := restartFailure(res, err); why != "" {
			return withdrawal{promoted: true, why: fmt.Sprintf("%s finished its promotion after all and stopped as a primary; starting it again FAILED: %s", m.name(), why)}, nil
		}
		return withdrawal{promoted: true, why: fmt.Sprintf("%s finished its promotion after all: it is the primary (started again, pid %d)", m.name(), res.NewPID)}, nil
	default:
		return withdrawal{}, fmt.Errorf("it stopped in state %q", state)
	}
	if _, err := t.Run(ctx, "sh", "-c", ownerScript, "sh", pg.Owner, standbySignalScript, pg.DataDir); err != nil {
		return withdrawal{}, fmt.Errorf("make sure of its standby.signal: %w", err)
	}
	ckptTL, _ := strconv.ParseInt(cd["Latest checkpoint's TimeLineID"], 10, 64)
	minTL, _ := strconv.ParseInt(cd["Min recovery ending loc's timeline"], 10, 64)
	if minTL > ckptTL && ckptTL > 0 {
		return withdrawal{why: fmt.Sprintf("%s had begun its promotion (it left for timeline %d) and is stopped with standby.signal: it cannot follow the old timeline again; rebuild it as a standby (pg_basebackup)", m.name(), minTL)}, nil
	}
	return withdrawal{restart: true}, nil
}

// awaitStreamingOn waits until m streams on timeline tl.
func awaitStreamingOn(ctx context.Context, m *swMember, tl int64) error {
	const sql = "SELECT 'recv=' || coalesce((SELECT status || ' ' || received_tli FROM pg_stat_wal_receiver), 'none')"
	want := fmt.Sprintf("streaming %d", tl)
	return poll(ctx, switchoverStreamTimeout, func() (bool, string) {
		kv, err := ownerQuery(ctx, m.t, m.pg, sql)
		if err != nil {
			return false, err.Error()
		}
		return kv["recv"] == want, fmt.Sprintf("its WAL receiver is %q, not %q", kv["recv"], want)
	})
}

var _ engine.ClusterChecker = (*Module)(nil)

// WantsClusterCheck: only a plain streaming switchover reads the cluster.
func (m *Module) WantsClusterCheck(p *plan.ModulePlan) bool {
	st, err := plan.StateOf[State](p)
	return err == nil && st != nil && st.Switchover
}

// CheckCluster is check's part of a switchover: every refusal that does
// not depend on the standbys' restarts is told once the cluster is
// planned, before anything is touched.
func (m *Module) CheckCluster(ctx context.Context, t *engine.Target, p *plan.ModulePlan) error {
	st, err := plan.StateOf[State](p)
	if err != nil || st == nil || !st.Switchover {
		return err
	}
	peers, closePeers, err := t.ClusterPeers(ctx, "")
	if err != nil {
		return fmt.Errorf("primary: switchover refused: %w", err)
	}
	defer closePeers()
	if _, err := readSwitchover(ctx, t, peers); err != nil {
		return fmt.Errorf("primary: switchover refused: %w", err)
	}
	return nil
}

// applySwitchover moves the primary role to a standby and restarts this
// server as its standby on the new values. mark is where this apply's
// files begin: a refusal puts them back (the server never took them).
func applySwitchover(ctx context.Context, t *engine.Target, pg *facts.Postgres, mark engine.JournalMark, timeout time.Duration) error {
	peers, closePeers, err := t.ClusterPeers(ctx, switchoverSuffix)
	if err != nil {
		return refuseSwitchover(ctx, t, mark, err)
	}
	defer closePeers()
	sw, err := readSwitchover(ctx, t, peers)
	if err != nil {
		return refuseSwitchover(ctx, t, mark, err)
	}
	sw.timeout = timeout
	cand, err := sw.candidate()
	if err != nil {
		return refuseSwitchover(ctx, t, mark, err)
	}
	slots, err := sw.planSlots(ctx, cand)
	if err != nil {
		return refuseSwitchover(ctx, t, mark, err)
	}
	repoints, err := sw.planRepoint(ctx, cand, slots.oldSlot)
	if err != nil {
		return refuseSwitchover(ctx, t, mark, err)
	}
	for _, r := range repoints {
		if err := checkReachable(ctx, r, cand.pg.Port); err != nil {
			return refuseSwitchover(ctx, t, mark, err)
		}
	}
	// The primary still serves: a standby that cannot catch up is found
	// out now, not with the primary down.
	if err := awaitCaughtUpOnPrimary(ctx, sw, cand, sw.timeout); err != nil {
		return refuseSwitchover(ctx, t, mark, err)
	}
	log := t.Log
	// The slots the members will stream through from the new primary,
	// made while it is a standby; a switchover abandoned before the
	// promotion drops again those of slots.create the standby has then.
	sj := newSlotJournal(cand)
	made, err := createSlots(ctx, cand, slots.create, sj)
	if err != nil {
		return refuseSwitchover(ctx, t, mark, slotsBack(ctx, err, cand, slots.create, sj))
	}
	if log != nil && len(made) > 0 {
		log.Info("switchover: created replication slots on the standby to promote, for the members that will stream from it",
			"standby", cand.name(), "slots", strings.Join(made, ","))
	}
	if log != nil {
		log.Info("switchover: stopping the primary (fast shutdown)", "new_primary", cand.name())
	}

	// Steps 3–4: until the promotion, the old primary can take its role back.
	if res, err := t.Run(ctx, "sh", "-c", ownerScript, "sh", pg.Owner, stopScript, pg.BinDir, pg.DataDir, strconv.Itoa(restartTimeout)); err != nil {
		if now, serr := postgresStatus(context.WithoutCancel(ctx), t, pg); serr == nil && now.Ready {
			return refuseSwitchover(ctx, t, mark, slotsBack(ctx, fmt.Errorf("%s: step stop: pg_ctl stop failed (%v %s); it is still the primary", t.Name, err, lastLines(string(res.Stdout), 3)), cand, slots.create, sj))
		}
		return slotsBack(ctx, backToPrimary(ctx, t, pg, "stop", err, cand.name()+" is still its standby"), cand, slots.create, sj)
	}
	lsn, err := shutdownCheckpoint(ctx, t, pg)
	if err != nil {
		return slotsBack(ctx, backToPrimary(ctx, t, pg, "read the shutdown checkpoint", err, cand.name()+" is still its standby"), cand, slots.create, sj)
	}
	if err := awaitReplayed(ctx, cand, lsn, sw.timeout); err != nil {
		return slotsBack(ctx, backToPrimary(ctx, t, pg, "wait for "+cand.name()+" to replay the shutdown checkpoint "+lsn, err, cand.name()+" is still its standby"), cand, slots.create, sj)
	}
	if log != nil {
		log.Info("switchover: standby replayed the old primary's shutdown checkpoint; promoting it", "new_primary", cand.name(), "checkpoint", lsn)
	}
	tl, err := promote(ctx, cand, sw.timeout)
	if err != nil {
		return abandonPromotion(ctx, t, pg, cand, err, slots.create, sj)
	}

	// From here the new primary takes writes: nothing goes back.
	ctx = context.WithoutCancel(ctx)
	sj.settle(ctx, slots.create, promotedSlots)
	state := fmt.Sprintf("%s is the primary now (writable, timeline %d)", cand.name(), tl)
	if log != nil {
		log.Info("switchover: promoted", "new_primary", cand.name(), "timeline", tl)
	}
	var problems []string
	// failed: the members not streaming from the new primary; a slot
	// made for one of them there retains WAL from before the promotion.
	failed := map[*swMember]bool{}
	oldBack := false
	if err := writeRepoint(ctx, repoints[0], true); err != nil {
		problems = append(problems, fmt.Sprintf("%s: step repoint: %v; it is left stopped (cleanly) and must not start as a primary", t.Name, err))
		failed[sw.old] = true
	} else {
		res, err := restartPostgres(ctx, t, pg, false)
		if why := restartFailure(res, err); why != "" {
			problems = append(problems, fmt.Sprintf("%s: step start as standby of %s: %s; it is left stopped with standby.signal and must not start as a primary", t.Name, cand.name(), failedStart(why)))
			failed[sw.old] = true
		} else {
			oldBack = true
		}
	}
	for _, r := range repoints[1:] {
		if err := writeRepoint(ctx, r, false); err != nil {
			problems = append(problems, fmt.Sprintf("%s: step repoint: %v", r.m.name(), err))
			failed[r.m] = true
		}
	}
	for _, m := range append(append([]*swMember{sw.old}, sw.direct...), sw.cascaded...) {
		if m == cand || (m == sw.old && !oldBack) {
			continue
		}
		if err := awaitStreamingOn(ctx, m, tl); err != nil {
			problems = append(problems, fmt.Sprintf("%s: step confirm streaming from %s: %v", m.name(), cand.name(), err))
			failed[m] = true
		}
	}
	if len(problems) > 0 {
		if len(slots.drop) > 0 {
			problems = append(problems, fmt.Sprintf("%s keeps the replication slots %s (not every member streams from %s: pgtune drops them only then; they retain WAL on it)",
				t.Name, quoteList(slots.drop), cand.name()))
		}
		// The slots on the new primary of the members that failed.
		var stranded []slotUser
		if failed[sw.old] && slots.oldSlot != "" {
			stranded = append(stranded, slotUser{member: sw.old.name(), slot: slots.oldSlot})
		}
		for _, m := range sw.direct {
			if m != cand && failed[m] && m.slot != "" {
				stranded = append(stranded, slotUser{member: m.name(), slot: m.slot})
			}
		}
		if len(stranded) > 0 {
			problems = append(problems, strandedSlots(cand.name(), stranded, slotKeepUnbounded(ctx, cand))...)
		}
		return fmt.Errorf("switchover: %s; %s; pgtune does not move clients: they must follow the new primary", state, strings.Join(problems, "; "))
	}
	// Every member streams from the new primary: the old primary's slots
	// they streamed through retain WAL on it for no one.
	dropped, err := dropSlots(ctx, sw.old, slots.drop)
	if log != nil && len(dropped) > 0 {
		log.Info("switchover: dropped replication slots on the old primary (the members stream through slots on the new primary now)",
			"slots", strings.Join(dropped, ","))
	}
	if err != nil {
		return fmt.Errorf("switchover: %s, and every member streams from it; %v: the old primary keeps the replication slots %s, which retain WAL on it: drop them by hand",
			state, err, quoteList(without(slots.drop, dropped)))
	}
	if log != nil && len(slots.left) > 0 {
		log.Warn("switchover: replication slots of no member left on the old primary (a backup tool's, a logical decoding client's: pgtune does not know their consumer): they retain WAL on it until their consumer follows the new primary or they are dropped",
			"slots", strings.Join(slots.left, ","))
	}
	if log != nil && len(sw.clients) > 0 {
		log.Warn("switchover: WAL archivers stream from the old primary, now a standby: pgtune does not move them: each must follow the new primary, or keep streaming from the old one (through its slot there, if it uses one)",
			"old_primary", t.Name, "new_primary", cand.name(), "clients", strings.Join(sw.clients, ", "))
	}
	if log != nil {
		log.Info("switchover done: the old primary streams from the new one", "new_primary", cand.name(), "timeline", tl)
	}
	return nil
}

// planSlots reads the slots of the old primary and of the standby to
// promote, and plans what the switchover makes and drops (slots.go).
func (sw *switchover) planSlots(ctx context.Context, cand *swMember) (slotPlan, error) {
	oldSlots, err := readSlots(ctx, sw.old)
	if err != nil {
		return slotPlan{}, err
	}
	candSlots, err := readSlots(ctx, cand)
	if err != nil {
		return slotPlan{}, err
	}
	var repointed, cascading []slotUser
	for _, m := range sw.direct {
		if m != cand {
			repointed = append(repointed, slotUser{member: m.name(), slot: m.slot})
		}
	}
	candReach := map[string]bool{}
	for _, r := range topology.Addresses(cand.t.Facts.Hostname, cand.pg.SocketDir, cand.pg.Port, cand.t.Facts.Hostname, inventoryAddress(cand.t)) {
		candReach[r] = true
	}
	for _, m := range sw.cascaded {
		if topo := m.t.Facts.Topology; topo != nil && candReach[topology.UpstreamReach(m.t.Facts.Hostname, topo.Upstream)] {
			cascading = append(cascading, slotUser{member: m.name(), slot: m.slot})
		}
	}
	return planSlots(sw.old.name(), slotUser{member: cand.name(), slot: cand.slot}, repointed, cascading, oldSlots, candSlots)
}

// strandedSlots names, after the promotion, the slots on the new primary
// of members that do not stream from it: each retains WAL from before
// the promotion on the writable primary until its member streams (or is
// rebuilt, and the slot dropped); unbounded: max_slot_wal_keep_size is
// -1 there.
func strandedSlots(newPrimary string, users []slotUser, unbounded bool) []string {
	var out []string
	for _, u := range users {
		out = append(out, fmt.Sprintf("%s's replication slot %q on %s retains WAL until %s streams; drop it if %s is to be rebuilt",
			u.member, u.slot, newPrimary, u.member, u.member))
	}
	if len(out) > 0 && unbounded {
		out = append(out, fmt.Sprintf("max_slot_wal_keep_size is -1 on %s: nothing bounds the WAL those slots retain (pg_wal grows until they are used or dropped)", newPrimary))
	}
	return out
}

// slotKeepUnbounded says whether max_slot_wal_keep_size is -1 on m (false
// when it cannot be read, or before PostgreSQL 13, which has none).
func slotKeepUnbounded(ctx context.Context, m *swMember) bool {
	kv, err := ownerQuery(ctx, m.t, m.pg, "SELECT 'keep=' || coalesce(current_setting('max_slot_wal_keep_size', true), '')")
	return err == nil && kv["keep"] == "-1"
}

// promotedSlots settles the slots made on a standby that was promoted:
// the members stream, or will stream, through them.
const promotedSlots = "kept: the standby was promoted and the members stream through them"

// abandonPromotion follows a promotion that failed or did not finish
// within switchover_timeout: the promotion is withdrawn (the standby
// stays a standby) and only then is the old primary started again as
// the primary; a standby that promoted after all stays the primary and
// the old primary stays stopped. Never two primaries.
func abandonPromotion(ctx context.Context, t *engine.Target, pg *facts.Postgres, cand *swMember, cause error, made []string, sj *slotJournal) error {
	ctx = context.WithoutCancel(ctx)
	step := "promote " + cand.name()
	kept := ""
	if len(made) > 0 {
		kept = fmt.Sprintf("; %s keeps the replication slots made on it (%s)", cand.name(), quoteList(made))
	}
	w, err := withdrawPromotion(ctx, cand)
	switch {
	case err != nil:
		return fmt.Errorf("switchover: step %s: %v; withdrawing the promotion failed: %v; %s is stopped (cleanly, its files as before) and is not started again while %s may be a primary: find out which server is the primary before starting %s%s",
			step, cause, err, t.Name, cand.name(), t.Name, kept)
	case w.promoted:
		sj.settle(ctx, made, promotedSlots)
		return fmt.Errorf("switchover: step %s: %v; %s; %s is stopped (cleanly, its files as before) and must not start as a primary: make it a standby of %s; pgtune does not move clients: they must follow the new primary%s",
			step, cause, w.why, t.Name, cand.name(), kept)
	}
	if cand.t.Log != nil {
		cand.t.Log.Info("switchover: promotion withdrawn; the old primary starts again", "standby", cand.name())
	}
	candState := w.why
	if w.restart {
		candState = cand.name() + " is a standby again"
	}
	err = backToPrimary(ctx, t, pg, step, cause, candState)
	if w.restart {
		rctx, cancel := context.WithTimeout(ctx, 2*restartTimeout*time.Second)
		defer cancel()
		res, rerr := restartPostgres(rctx, cand.t, cand.pg, false)
		if why := restartFailure(res, rerr); why != "" {
			return fmt.Errorf("%w; starting %s again as its standby FAILED: %s; it has standby.signal: it can only start as a standby%s", err, cand.name(), failedStart(why), kept)
		}
		return slotsBack(ctx, fmt.Errorf("%w (started again, pid %d)", err, res.NewPID), cand, made, sj)
	}
	if len(made) > 0 {
		// Left stopped: its slots go when it is rebuilt.
		return fmt.Errorf("%w; its replication slots made for the switchover (%s) go with it when it is rebuilt", err, quoteList(made))
	}
	return err
}

// writeRepoint writes a member's new primary_conninfo (journaled, kept
// apart as the switchover's run, never shown: it may hold a password).
// The old primary also gets standby.signal; a running standby reloads.
func writeRepoint(ctx context.Context, r repointing, oldPrimary bool) error {
	st := sideTarget(r.m.t)
	st.Module = Name
	opts := transport.WriteOptions{AsUser: r.m.pg.Owner}
	if err := st.WriteSecretFile(ctx, r.file, r.content, opts); err != nil {
		return fmt.Errorf("write %s: %w", r.file, err)
	}
	if oldPrimary {
		signal := path.Join(r.m.pg.DataDir, "standby.signal")
		return st.WriteFile(ctx, signal, nil, transport.WriteOptions{AsUser: r.m.pg.Owner, Mode: "0600"})
	}
	if _, err := ownerQuery(ctx, r.m.t, r.m.pg, "SELECT 'reload=' || pg_reload_conf()"); err != nil {
		return fmt.Errorf("reload: %w", err)
	}
	return nil
}

// refuseSwitchover puts this apply's files back (the server still runs
// the old values: nothing was restarted) and says why.
func refuseSwitchover(ctx context.Context, t *engine.Target, mark engine.JournalMark, why error) error {
	err := fmt.Errorf("primary: switchover refused, nothing restarted: %w", why)
	if rerr := t.UndoSince(context.WithoutCancel(ctx), mark); rerr != nil {
		return fmt.Errorf("%w; putting the previous configuration files back failed: %v", err, rerr)
	}
	return fmt.Errorf("%w; the previous configuration files are back", err)
}

// backToPrimary starts the old primary again, as the primary (on the new
// values: its pool was checked), after the switchover stopped before the
// promotion; standby says what became of the standby that was to be
// promoted.
func backToPrimary(ctx context.Context, t *engine.Target, pg *facts.Postgres, step string, cause error, standby string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*restartTimeout*time.Second)
	defer cancel()
	res, err := startAgain(rctx, t, pg)
	if why := restartFailure(res, err); why != "" {
		return fmt.Errorf("switchover abandoned at step %s: %v; starting %s again as the primary FAILED: %s; the cluster has no primary: %s; start %s by hand",
			step, cause, t.Name, failedStart(why), standby, t.Name)
	}
	return fmt.Errorf("switchover abandoned at step %s: %v; %s is the primary again (pid %d, on the new values): the cluster is writable; %s",
		step, cause, t.Name, res.NewPID, standby)
}

// switchoverTimeoutOf is the plan's switchover_timeout (a plan made
// without one: the default).
func switchoverTimeoutOf(st *State) time.Duration {
	if st.SwitchoverTimeout > 0 {
		return time.Duration(st.SwitchoverTimeout) * time.Second
	}
	d, _ := time.ParseDuration(defaultSwitchoverTimeout)
	return d
}
