package pgconf

import (
	"context"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
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
