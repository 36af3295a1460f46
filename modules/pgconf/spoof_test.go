package pgconf

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/transport"
	base "github.com/pgtune/pgtune/internal/fakehost"
)

// spoofMember is a member of a switchover's cluster at inventory
// address addr, saying it lags lag bytes, with primary_conninfo ci.
func spoofMember(name, addr string, lag int64, ci string) *swMember {
	h := base.New()
	conf := "/var/lib/postgresql/15/main/postgresql.auto.conf"
	h.Files[conf] = "primary_conninfo = '" + ci + "'\n"
	pairs, _ := parseConninfo(ci)
	return &swMember{t: &engine.Target{Name: name, Transport: h, Vars: map[string]any{"ssh_host": addr},
		Facts: &facts.Facts{Hostname: name, Topology: &facts.Topology{Role: "standby", Receiver: "streaming", ReplayLagBytes: lag}}},
		pg:        &facts.Postgres{DataDir: "/var/lib/postgresql/15/main", SocketDir: "/run/postgresql", Port: 5432},
		hugePages: "on", conninfo: pairs, file: conf, line: 1}
}

// TestSpoofedCandidateGetsNoConninfo: a host claiming to be a caught-up
// standby of the primary (zero lag, said by itself) is not promoted when
// the primary's WAL senders do not show it: promoted, it would be handed
// the old primary and every other standby, with their passwords.
func TestSpoofedCandidateGetsNoConninfo(t *testing.T) {
	old := spoofMember("db1", "10.0.0.1", 0, "host=10.0.0.9 user=rep password=OLDPRIMARYpw")
	// What the primary's pg_stat_replication shows: db2 only.
	old.t.Facts.Topology = &facts.Topology{Role: "primary", Standbys: []facts.StandbyInfo{{Name: "db2", Addr: "10.0.0.2", State: "streaming", LagBytes: 4096}}}
	s1 := spoofMember("db2", "10.0.0.2", 4096, "host=10.0.0.1 user=rep password=S1SECRETpw")
	evil := spoofMember("zz-evil", "10.6.6.6", 0, "host=10.0.0.1 user=x sslmode=disable")
	sw := &switchover{old: old, direct: []*swMember{s1, evil}}
	cand, _ := sw.candidate()
	reps, err := sw.planRepoint(context.Background(), cand, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reps {
		if r.m == evil && strings.Contains(string(r.content), "S1SECRETpw") {
			t.Errorf("%s is handed db2's password", evil.name())
		}
	}
	if cand == evil {
		t.Errorf("spoofed member promoted; others repointed at it with their passwords")
	}
}

// TestCandidateByPrimarySenders: the standby to promote is one the old
// primary streams to, with the lag the old primary shows.
func TestCandidateByPrimarySenders(t *testing.T) {
	sender := func(name, addr string, lag int64) facts.StandbyInfo {
		return facts.StandbyInfo{Name: name, Addr: addr, State: "streaming", LagBytes: lag}
	}
	for _, tc := range []struct {
		name    string
		senders []facts.StandbyInfo
		want    string // candidate, or the error's start
	}{
		{"the less lagged by the primary's count", []facts.StandbyInfo{sender("db2", "10.0.0.2", 4096), sender("db3", "10.0.0.3", 0)}, "db3"},
		{"the primary's lag, not the standby's", []facts.StandbyInfo{sender("db2", "10.0.0.2", 0), sender("db3", "10.0.0.3", 1<<30)}, "db2"},
		{"no sender to either", []facts.StandbyInfo{sender("x", "10.9.9.9", 0)}, "no standby to switch over to (db2: db1 shows no WAL sender of its own to it; db3: db1 shows no WAL sender of its own to it)"},
		{"one sender: its standby", []facts.StandbyInfo{sender("db3", "10.0.0.3", 0)}, "db3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := spoofMember("db1", "10.0.0.1", 0, "")
			old.t.Facts.Topology = &facts.Topology{Role: "primary", Standbys: tc.senders}
			// db3 says it lags 0 bytes, db2 8 kB: only the primary's word counts.
			db2, db3 := spoofMember("db2", "10.0.0.2", 8192, "host=10.0.0.1"), spoofMember("db3", "10.0.0.3", 0, "host=10.0.0.1")
			sw := &switchover{old: old, direct: []*swMember{db2, db3}}
			cand, err := sw.candidate()
			got := ""
			if err != nil {
				got = err.Error()
			} else {
				got = cand.name()
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("candidate %q, want %q", got, tc.want)
			}
		})
	}
}

// TestMatchSendersNamesUnknownStandby: a standby saying it streams
// from the primary with no WAL sender of its own there refuses the
// switchover, named, before anything is touched.
func TestMatchSendersNamesUnknownStandby(t *testing.T) {
	old := spoofMember("db1", "10.0.0.1", 0, "")
	sw := &switchover{old: old, senders: &facts.Topology{Role: "primary", Standbys: []facts.StandbyInfo{{Name: "db2", Addr: "10.0.0.2", State: "streaming"}}},
		direct: []*swMember{spoofMember("db2", "10.0.0.2", 0, "host=10.0.0.1"), spoofMember("zz-evil", "10.6.6.6", 0, "host=10.0.0.1")}}
	_, _, why := sw.matchSenders(sw.oldSenders())
	if len(why) != 1 || !strings.HasPrefix(why[0], "zz-evil says it streams from db1, but db1 has no WAL sender to a client at an address the controller knows zz-evil by (10.6.6.6") {
		t.Errorf("unmatched %q, want zz-evil named", why)
	}
}

// TestSwitchoverTiesSendersByConnection: two standbys of the run on one
// machine (one address), one of them hostile, naming itself as the
// other (its cluster_name) and saying it lags nothing. The old
// primary's senders, as the switchover reads them, are tied to each by
// the WAL receiver connection its kernel shows (over TCP: the client
// end; over a unix socket: the socket's other end): the hostile one gets
// its own sender, lagging 1 GiB, and the honest one is promoted. By
// address alone (either sender could be either's) the match gave the
// honest standby the first sender it tried, the hostile one's, and left
// the hostile one the sender named as it names itself: the honest
// standby's lag, its catch-up, and the promotion.
func TestSwitchoverTiesSendersByConnection(t *testing.T) {
	conn := func(local string) []facts.Conn {
		return []facts.Conn{{Local: netip.MustParseAddrPort(local), Remote: netip.MustParseAddrPort("10.0.0.1:5432")}}
	}
	for _, tc := range []struct {
		name            string
		honest, hostile facts.StandbyInfo
		setReceiver     func(honest, hostile *facts.Postgres)
		standbyAddr     string // both standbys' address and machine
	}{
		{"over TCP", facts.StandbyInfo{Name: "db2", Addr: "10.0.0.2", Port: 40001, PID: 101, State: "streaming"},
			facts.StandbyInfo{Name: "walreceiver", Addr: "10.0.0.2", Port: 40002, PID: 100, State: "streaming", LagBytes: 1 << 30},
			func(h, e *facts.Postgres) {
				h.WALReceiver, h.WALReceiverRead = conn("10.0.0.2:40001"), true
				e.WALReceiver, e.WALReceiverRead = conn("10.0.0.2:40002"), true
			}, "10.0.0.2"},
		{"over a unix socket", facts.StandbyInfo{Name: "db2", Addr: "local", Port: -1, PID: 101, State: "streaming", Peers: []uint64{9001}, PeersRead: true},
			facts.StandbyInfo{Name: "walreceiver", Addr: "local", Port: -1, PID: 100, State: "streaming", LagBytes: 1 << 30, Peers: []uint64{9002}, PeersRead: true},
			func(h, e *facts.Postgres) {
				h.WALReceiverSockets, h.WALReceiverRead = []uint64{9001}, true
				e.WALReceiverSockets, e.WALReceiverRead = []uint64{9002}, true
			}, "10.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := spoofMember("db1", "10.0.0.1", 0, "")
			old.t.Facts.Hostname = "m1"
			db2 := spoofMember("db2", tc.standbyAddr, 0, "host=10.0.0.1")
			// Tried first (name order), saying it is db2.
			evil := spoofMember("a-evil", tc.standbyAddr, 0, "host=10.0.0.1")
			// db2's sender is named by its primary_conninfo's
			// application_name: the hostile one names itself so.
			evil.t.Facts.Topology.ClusterName = "db2"
			if tc.standbyAddr == "10.0.0.1" {
				db2.t.Facts.Hostname, evil.t.Facts.Hostname = "m1", "m1"
			} else {
				db2.t.Facts.Hostname, evil.t.Facts.Hostname = "m2", "m2"
			}
			for _, m := range []*swMember{db2, evil} {
				m.t.Facts.Topology.Upstream = "10.0.0.1:5432"
				m.t.Facts.Postgres = m.pg
			}
			tc.setReceiver(db2.pg, evil.pg)
			sw := &switchover{old: old, direct: []*swMember{evil, db2},
				senders: &facts.Topology{Role: "primary", Standbys: []facts.StandbyInfo{tc.hostile, tc.honest}}} // by PID, as read
			if _, _, why := sw.matchSenders(sw.oldSenders()); len(why) > 0 {
				t.Fatalf("not every standby tied: %q", why)
			}
			if lag, ok := sw.primaryLag(sw.oldSenders(), evil); !ok || lag != 1<<30 {
				t.Errorf("the hostile standby's lag as the primary shows it: %d (%v), want its own sender's 1 GiB", lag, ok)
			}
			cand, err := sw.candidate()
			if err != nil {
				t.Fatal(err)
			}
			if cand != db2 {
				t.Errorf("candidate %s, want db2 (the hostile standby was handed db2's sender)", cand.name())
			}
			// The catch-up polls find db2's sender by its process and
			// client end: not once it reconnected.
			later := []facts.StandbyInfo{tc.honest, tc.hostile}
			if got := stillOwn(later, sw.tiedSenders(db2)); len(got) != 1 || got[0] != 0 {
				t.Errorf("db2's sender in a later read: %v, want [0]", got)
			}
			if got := stillOwn(later, sw.tiedSenders(evil)); len(got) != 1 || got[0] != 1 {
				t.Errorf("the hostile standby's sender in a later read: %v, want [1]", got)
			}
			again := tc.honest
			again.PID = 103 // db2 reconnected: another sender
			if got := stillOwn([]facts.StandbyInfo{tc.hostile, again}, sw.tiedSenders(db2)); len(got) != 0 {
				t.Errorf("a new sender at db2's end is still tied to db2: %v", got)
			}
		})
	}
}

// TestParseCaught reads the switchover's polls of the old primary's
// senders: host input.
func TestParseCaught(t *testing.T) {
	for _, tc := range []struct {
		in     string
		rows   []facts.StandbyInfo
		caught []bool
		err    string
	}{
		{"sender=10.0.0.2 40001 101 true 646232\nsender=local -1 102 false 77616c72656365697665720a\n",
			[]facts.StandbyInfo{{Addr: "10.0.0.2", Port: 40001, PID: 101, Name: "db2", LagBytes: -1}, {Addr: "local", Port: -1, PID: 102, Name: "walreceiver\n", LagBytes: -1}},
			[]bool{true, false}, ""},
		{"sender=10.0.0.2 0 101 true 646232", []facts.StandbyInfo{{Addr: "10.0.0.2", Port: -1, PID: 101, Name: "db2", LagBytes: -1}}, []bool{true}, ""},
		{"noise\n", nil, nil, ""},
		{"sender=10.0.0.2 40001 101 true", nil, nil, "4 fields"},
		{"sender=10.0.0.2 70000 101 true 00", nil, nil, "client_port"},
		{"sender=10.0.0.2 40001 0 true 00", nil, nil, "WAL sender pid"},
		{"sender=10.0.0.2 40001 101 yes 00", nil, nil, `replayed "yes"`},
	} {
		rows, caught, err := parseCaught(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(rows, tc.rows) || !slices.Equal(caught, tc.caught) {
			t.Errorf("%q: %+v %v %v, want %+v %v", tc.in, rows, caught, err, tc.rows, tc.caught)
		}
	}
}

// sqlHost answers the switchover's queries of the old primary: its WAL
// position, then each read of its senders in turn (the last one again
// when they run out), counting the reads.
type sqlHost struct {
	base.Host
	reads    [][]facts.StandbyInfo
	n        int
	replayed bool // every sender replayed past the position
}

func (h *sqlHost) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	sql := cmd.Args[len(cmd.Args)-1]
	if strings.Contains(sql, "pg_current_wal_lsn") {
		return transport.Result{Stdout: []byte("lsn=0/3000000\n")}, nil
	}
	rows := h.reads[min(h.n, len(h.reads)-1)]
	h.n++
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "sender=%s %d %d %v %x\n", r.Addr, r.Port, r.PID, h.replayed, r.Name)
	}
	return transport.Result{Stdout: []byte(b.String())}, nil
}

// TestCatchUpRefusesOnceSenderGone: the candidate's sender, tied by
// process and client end when the switchover began, gone from a later
// read (the standby reconnected, or its sender ended) never comes back:
// the switchover is refused at that read, not after switchover_timeout
// (review h116); while it is there, the wait goes on until it caught up.
func TestCatchUpRefusesOnceSenderGone(t *testing.T) {
	db2Sender := facts.StandbyInfo{Name: "db2", Addr: "10.0.0.2", Port: 40001, PID: 101, State: "streaming"}
	setup := func(reads ...[]facts.StandbyInfo) (*switchover, *swMember, *sqlHost) {
		old := spoofMember("db1", "10.0.0.1", 0, "")
		h := &sqlHost{reads: reads}
		old.t.Transport = h
		db2 := spoofMember("db2", "10.0.0.2", 0, "host=10.0.0.1")
		db2.t.Facts.Topology.Upstream = "10.0.0.1:5432"
		db2.pg.WALReceiver = []facts.Conn{{Local: netip.MustParseAddrPort("10.0.0.2:40001"), Remote: netip.MustParseAddrPort("10.0.0.1:5432")}}
		db2.pg.WALReceiverRead = true
		db2.t.Facts.Postgres = db2.pg
		sw := &switchover{old: old, direct: []*swMember{db2}, senders: &facts.Topology{Role: "primary", Standbys: []facts.StandbyInfo{db2Sender}}}
		if len(sw.tiedSenders(db2)) != 1 {
			t.Fatal("db2 is not tied to its sender")
		}
		return sw, db2, h
	}
	reconnected := db2Sender
	reconnected.PID = 103

	sw, db2, h := setup([]facts.StandbyInfo{db2Sender}, []facts.StandbyInfo{reconnected})
	// A bound of several polls: waiting it out reads more than twice.
	err := awaitCaughtUpOnPrimary(context.Background(), sw, db2, 5*switchoverPoll)
	if err == nil || !strings.Contains(err.Error(), "no longer shows the WAL sender tied to db2") || h.n != 2 {
		t.Fatalf("after %d reads: %v; want refused at the second read", h.n, err)
	}

	// Still its sender, caught up at the third read.
	sw, db2, h = setup([]facts.StandbyInfo{db2Sender})
	h.replayed = true
	if err := awaitCaughtUpOnPrimary(context.Background(), sw, db2, time.Hour); err != nil || h.n != 1 {
		t.Fatalf("after %d reads: %v; want caught up at once", h.n, err)
	}
	// Not caught up within the bound: the timeout's error.
	sw, db2, h = setup([]facts.StandbyInfo{db2Sender})
	if err := awaitCaughtUpOnPrimary(context.Background(), sw, db2, time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not catch up") || h.n < 1 {
		t.Fatalf("after %d reads: %v; want the timeout", h.n, err)
	}
}
