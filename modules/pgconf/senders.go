package pgconf

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/topology"
)

// A switchover promotes a standby and hands it the old primary (which
// then streams from it with the standby's own primary_conninfo, password
// included) and the other standbys: what a standby says of itself (that
// it streams from this primary, how far it replayed) is its own word, and
// any host of the run can claim another cluster's system identifier. So
// the old primary's WAL senders decide: the standby to promote must be
// one of them (topology.Match, by the addresses the controller resolved),
// its lag is the one the old primary shows, and its catch-up is read off
// the old primary's pg_stat_replication before the primary is stopped.
//
// A sender is tied to a standby by its connection, as the run's layout
// ties it (topology.sameConn): the members are read when the switchover
// starts (ClusterPeers gathers each one's facts then, its WAL receiver's
// connections included, after the standbys' restarts), and the old
// primary's senders with them (readSwitchover), each with its client
// port and, over a unix socket, its socket's other end. By address
// alone, a standby of the run could name itself as another standby on
// its machine and be handed that one's sender: its lag, its catch-up,
// and with them the promotion. The catch-up is then polled by the tied
// senders' process IDs (a WAL sender serves one connection for its
// life): a standby that reconnects meanwhile is no longer tied.

// topoMember is m as topology.Match sees it, with topo as its topology:
// its WAL receiver's connections and its server's port as its facts,
// gathered with the switchover, read them.
func topoMember(m *swMember, topo *facts.Topology) topology.Member {
	tm := topology.Member{Host: m.name(), Topo: topo, Addrs: m.t.Addrs()}
	if m.t.Facts != nil {
		tm.Machine = m.t.Facts.Hostname
	}
	if pg := m.pg; pg != nil {
		tm.Receiver, tm.ReceiverRead, tm.ReceiverSockets, tm.Port = pg.WALReceiver, pg.WALReceiverRead, pg.WALReceiverSockets, pg.Port
	}
	return tm
}

// streamingDirect are the direct standbys that say they stream: each must
// have one of the old primary's WAL senders.
func (sw *switchover) streamingDirect() []*swMember {
	var out []*swMember
	for _, m := range sw.direct {
		if topo := m.t.Facts.Topology; topo != nil && topo.Receiver == "streaming" {
			out = append(out, m)
		}
	}
	return out
}

// matchSenders matches the streaming direct standbys to senders (the old
// primary's WAL senders to standbys): each one's sender, and why a
// standby has none.
func (sw *switchover) matchSenders(senders []facts.StandbyInfo) (map[*swMember]facts.StandbyInfo, map[*swMember]int, []string) {
	up := topoMember(sw.old, &facts.Topology{Role: "primary", Standbys: senders})
	var claimants []topology.Member
	byName := map[string]*swMember{}
	for _, m := range sw.streamingDirect() {
		claimants = append(claimants, topoMember(m, m.t.Facts.Topology))
		byName[m.name()] = m
	}
	got, why := topology.Match(up, claimants)
	rows, idx := map[*swMember]facts.StandbyInfo{}, map[*swMember]int{}
	for host, i := range got {
		rows[byName[host]], idx[byName[host]] = senders[i], i
	}
	return rows, idx, why
}

// oldSenders is the old primary's WAL senders to standbys as read with
// the switchover (readSwitchover), else as its facts say.
func (sw *switchover) oldSenders() []facts.StandbyInfo {
	if sw.senders != nil {
		return sw.senders.Standbys
	}
	if sw.old == nil || sw.old.t.Facts == nil {
		return nil
	}
	if topo := sw.old.t.Facts.Topology; topo != nil {
		return topo.Standbys
	}
	return nil
}

// ownSenders are the indexes of senders that can be m's (topology.Own):
// none when no sender is m's alone.
func (sw *switchover) ownSenders(senders []facts.StandbyInfo, m *swMember) []int {
	_, idx, _ := sw.matchSenders(senders)
	i, ok := idx[m]
	if !ok {
		return nil
	}
	return topology.Own(topoMember(sw.old, &facts.Topology{Role: "primary", Standbys: senders}), topoMember(m, m.t.Facts.Topology), i)
}

// senderKey is a WAL sender's process and client end: the same in two
// reads only for the same connection (but for a process ID reused in
// between, with the same client end).
type senderKey struct {
	pid  int
	addr string
	port int
}

func keyOf(r facts.StandbyInfo) senderKey { return senderKey{r.PID, r.Addr, r.Port} }

// tiedSenders are the senders tied to m in the switchover's own read
// (ownSenders of oldSenders), by process and client end: found once, not
// at every poll.
func (sw *switchover) tiedSenders(m *swMember) map[senderKey]bool {
	senders := sw.oldSenders()
	tied := map[senderKey]bool{}
	for _, i := range sw.ownSenders(senders, m) {
		if senders[i].PID > 0 {
			tied[keyOf(senders[i])] = true
		}
	}
	return tied
}

// stillOwn are the indexes of rows, a later read of the old primary's
// senders, that are senders in tied: the same process with the same
// client end.
func stillOwn(rows []facts.StandbyInfo, tied map[senderKey]bool) []int {
	var out []int
	for i, r := range rows {
		if tied[keyOf(r)] {
			out = append(out, i)
		}
	}
	return out
}

// primaryLag is the lag the old primary shows for m's WAL sender (the
// most of those that can be m's), and false when it shows none.
func (sw *switchover) primaryLag(senders []facts.StandbyInfo, m *swMember) (int64, bool) {
	own := sw.ownSenders(senders, m)
	lag := int64(-1)
	for _, i := range own {
		if senders[i].LagBytes < 0 {
			return 0, false // unknown
		}
		lag = max(lag, senders[i].LagBytes)
	}
	return lag, lag >= 0
}

// sendersSQL lists the server's WAL senders to standbys (as
// facts.classifyWALSender tells them from WAL archivers, base backups and
// logical decoding clients), each with its client end and process, and
// whether its standby has replayed past $LSN: "client_addr client_port
// pid caught hex(application_name)".
const sendersSQL = `SELECT 'sender=' || coalesce(host(r.client_addr), 'local') || ' ' || coalesce(r.client_port, -1) || ' ' || r.pid
  || ' ' || coalesce(r.replay_lsn >= '%s'::pg_lsn, false)
  || ' ' || encode(convert_to(r.application_name, 'UTF8'), 'hex')
  FROM pg_stat_replication r
  WHERE coalesce(r.state, '') <> 'backup' AND NOT (r.write_lsn IS NOT NULL AND r.replay_lsn IS NULL)
  AND NOT EXISTS (SELECT 1 FROM pg_replication_slots s WHERE s.active_pid = r.pid AND s.slot_type = 'logical')
  ORDER BY r.pid`

// readCaught reads the old primary's WAL senders to standbys and, for
// each, whether its standby replayed past lsn.
func readCaught(ctx context.Context, old *swMember, lsn string) ([]facts.StandbyInfo, []bool, error) {
	res, err := old.t.Run(ctx, "sh", "-c", psqlScript, "sh", old.pg.Owner, path.Join(old.pg.BinDir, "psql"),
		old.pg.SocketDir, strconv.Itoa(old.pg.Port), fmt.Sprintf(sendersSQL, lsn))
	if err != nil {
		return nil, nil, fmt.Errorf("read its pg_stat_replication: %w", err)
	}
	return parseCaught(string(res.Stdout))
}

// parseCaught reads sendersSQL's rows. Host input: a row that is not
// five well-formed fields is an error.
func parseCaught(out string) ([]facts.StandbyInfo, []bool, error) {
	var rows []facts.StandbyInfo
	var caught []bool
	for _, l := range strings.Split(out, "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(l), "sender=")
		if !ok {
			continue
		}
		f := strings.SplitN(v, " ", 5)
		if len(f) != 5 {
			return nil, nil, fmt.Errorf("pg_stat_replication row: %d fields", len(f))
		}
		port, err := facts.ParseInt("client_port", f[1], -1, 65535)
		if err != nil {
			return nil, nil, err
		}
		pid, err := facts.ParseInt("WAL sender pid", f[2], 1, facts.MaxPID)
		if err != nil {
			return nil, nil, err
		}
		if port == 0 {
			port = -1 // no TCP port PostgreSQL reports: never a tie
		}
		if f[3] != "true" && f[3] != "false" {
			return nil, nil, fmt.Errorf("pg_stat_replication row: replayed %q, not true or false", clipText(f[3]))
		}
		rows = append(rows, facts.StandbyInfo{Addr: f[0], Port: int(port), PID: int(pid), Name: clipText(unhex(f[4])), LagBytes: -1})
		caught = append(caught, f[3] == "true")
	}
	return rows, caught, nil
}

// awaitCaughtUpOnPrimary waits, before the primary is touched, until the
// old primary shows cand's WAL sender replayed past everything it had
// written when the wait began: a standby whose replay stalls or falls
// behind (a long query holding it back, a slow disk) is found out while
// the primary still serves, and the switchover is refused instead of
// taking the primary down for it. Each look finds cand's senders by
// process and client end (stillOwn): a sender that reconnected is a new
// row, tied to nobody.
func awaitCaughtUpOnPrimary(ctx context.Context, sw *switchover, cand *swMember, timeout time.Duration) error {
	primary := sw.old
	kv, err := ownerQuery(ctx, primary.t, primary.pg, "SELECT 'lsn=' || pg_current_wal_lsn()")
	if err != nil {
		return fmt.Errorf("%s: read its WAL position: %w", primary.name(), err)
	}
	lsn := kv["lsn"]
	if !lsnRE.MatchString(lsn) {
		return fmt.Errorf("%s: its WAL position %q is not an LSN", primary.name(), lsn)
	}
	tied := sw.tiedSenders(cand)
	gone := false
	if err := poll(ctx, timeout, func() (bool, string) {
		rows, caught, err := readCaught(ctx, primary, lsn)
		if err != nil {
			return false, err.Error()
		}
		own := stillOwn(rows, tied)
		if len(own) == 0 {
			// A sender never comes back: stop now, not at the timeout.
			gone = true
			return true, ""
		}
		for _, i := range own {
			if !caught[i] {
				return false, fmt.Sprintf("%s shows %s's replay not yet past its %s", primary.name(), cand.name(), lsn)
			}
		}
		return true, ""
	}); err != nil {
		return fmt.Errorf("%s did not catch up with %s (switchover_timeout): %w", cand.name(), primary.name(), err)
	}
	if gone {
		return fmt.Errorf("%s no longer shows the WAL sender tied to %s when the switchover began (%s reconnected, or its sender ended): its catch-up can no longer be seen", primary.name(), cand.name(), cand.name())
	}
	return nil
}
