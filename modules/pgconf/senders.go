package pgconf

import (
	"context"
	"fmt"
	"path"
	"slices"
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

// topoMember is m as topology.Match sees it, with topo as its topology.
func topoMember(m *swMember, topo *facts.Topology) topology.Member {
	machine := ""
	if m.t.Facts != nil {
		machine = m.t.Facts.Hostname
	}
	return topology.Member{Host: m.name(), Topo: topo, Machine: machine, Addrs: m.t.Addrs()}
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
	up := topoMember(sw.old, &facts.Topology{Role: "primary", Standbys: byAddress(senders)})
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
	return topology.Own(topoMember(sw.old, &facts.Topology{Role: "primary", Standbys: byAddress(senders)}), topoMember(m, m.t.Facts.Topology), i)
}

// byAddress is senders without their client ports: a switchover ties a
// standby to the old primary's sender by address. Its senders are read
// again as it goes, but the standbys' WAL receiver connections are as old
// as their facts, and a standby this run restarted streams over a new
// one. The tie by connection (topology.sameConn) was made with the run's
// layout, from facts of one moment: a cluster it left unverified gets no
// switchover.
func byAddress(senders []facts.StandbyInfo) []facts.StandbyInfo {
	out := slices.Clone(senders)
	for i := range out {
		out[i].Port = 0
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
// logical decoding clients), each with whether its standby has replayed
// past $LSN: "client_addr caught hex(application_name)".
const sendersSQL = `SELECT 'sender=' || coalesce(host(r.client_addr), 'local') || ' ' || coalesce(r.replay_lsn >= '%s'::pg_lsn, false)
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
	var rows []facts.StandbyInfo
	var caught []bool
	for _, l := range strings.Split(string(res.Stdout), "\n") {
		v, ok := strings.CutPrefix(strings.TrimSpace(l), "sender=")
		if !ok {
			continue
		}
		f := strings.SplitN(v, " ", 3)
		if len(f) != 3 {
			return nil, nil, fmt.Errorf("pg_stat_replication row: %d fields", len(f))
		}
		rows = append(rows, facts.StandbyInfo{Addr: f[0], Name: clipText(unhex(f[2])), LagBytes: -1})
		caught = append(caught, f[1] == "true")
	}
	return rows, caught, nil
}

// awaitCaughtUpOnPrimary waits, before the primary is touched, until the
// old primary shows cand's WAL sender replayed past everything it had
// written when the wait began: a standby whose replay stalls or falls
// behind (a long query holding it back, a slow disk) is found out while
// the primary still serves, and the switchover is refused instead of
// taking the primary down for it. The senders are matched to the
// streaming standbys again at each look (a sender that reconnected is a
// new row).
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
	if err := poll(ctx, timeout, func() (bool, string) {
		rows, caught, err := readCaught(ctx, primary, lsn)
		if err != nil {
			return false, err.Error()
		}
		own := sw.ownSenders(rows, cand)
		if len(own) == 0 {
			_, _, why := sw.matchSenders(rows)
			return false, fmt.Sprintf("%s shows no WAL sender of its own to %s (%s)", primary.name(), cand.name(), strings.Join(why, "; "))
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
	return nil
}
