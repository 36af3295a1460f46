package pgconf

import (
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
)

func swStandby(name, machine string, receiver string, lag int64, pending int, hugePages string) *swMember {
	return &swMember{
		t: &engine.Target{Name: name, Vars: map[string]any{}, Facts: &facts.Facts{Hostname: machine,
			Topology: &facts.Topology{Role: "standby", Receiver: receiver, ReplayLagBytes: lag, ClusterName: name}}},
		pg:      &facts.Postgres{SocketDir: "/run/" + name, Port: 5432},
		pending: pending, hugePages: hugePages,
	}
}

func delayed(m *swMember) *swMember { m.delayed = true; return m }

// onPrimary is a switchover from a primary on machine m whose WAL senders
// (to unix-socket clients) show each streaming standby of direct with
// the lag it says it has; every member is reached at one address.
func onPrimary(direct []*swMember) *switchover {
	old := swStandby("p", "m", "", 0, 0, "on")
	old.t.Facts.Topology = &facts.Topology{Role: "primary"}
	for _, m := range append([]*swMember{old}, direct...) {
		m.t.Vars["ssh_host"] = "127.0.0.1"
	}
	for _, m := range direct {
		if topo := m.t.Facts.Topology; topo.Receiver == "streaming" {
			old.t.Facts.Topology.Standbys = append(old.t.Facts.Topology.Standbys, facts.StandbyInfo{Name: m.name(), Addr: "local", State: "streaming", LagBytes: topo.ReplayLagBytes})
		}
	}
	return &switchover{old: old, direct: direct}
}

func TestPlainSwitchoverCandidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		direct  []*swMember
		want    string
		wantErr string
	}{
		{"least lag wins", []*swMember{swStandby("s1", "m", "streaming", 900, 0, "on"), swStandby("s2", "m", "streaming", 10, 0, "on")}, "s2", ""},
		{"same lag: by name", []*swMember{swStandby("s2", "m", "streaming", 0, 0, "on"), swStandby("s1", "m", "streaming", 0, 0, "on")}, "s1", ""},
		{"not yet on the new values", []*swMember{swStandby("s1", "m", "streaming", 0, 1, "on"), swStandby("s2", "m", "streaming", 0, 0, "try")}, "", "s1: not restarted on the new values yet; s2: not restarted"},
		{"not streaming", []*swMember{swStandby("s1", "m", "waiting", 0, 0, "on")}, "", `s1: WAL receiver "waiting"`},
		{"lag over the bound", []*swMember{swStandby("s1", "m", "streaming", 1<<30, 0, "on"), swStandby("s2", "m", "streaming", 5, 0, "on")}, "s2", ""},
		{"a delayed standby is never promoted", []*swMember{delayed(swStandby("s1", "m", "streaming", 0, 0, "on")), swStandby("s2", "m", "streaming", 900, 0, "on")}, "s2", ""},
		{"only delayed standbys", []*swMember{delayed(swStandby("s1", "m", "streaming", 0, 0, "on"))}, "", "s1: a delayed standby (recovery_min_apply_delay)"},
		{"none left", []*swMember{swStandby("s1", "m", "streaming", 1<<30, 0, "on")}, "", "s1: replay lags 1073741824 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := onPrimary(tc.direct).candidate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got.name() != tc.want {
				t.Fatalf("candidate = %v, %v; want %s", got, err, tc.want)
			}
		})
	}
}

func TestUpstreamHost(t *testing.T) {
	cand := swStandby("db2", "m2", "streaming", 0, 0, "on")
	cand.t.Vars["ssh_host"] = "10.0.0.2"
	same := swStandby("db3", "m2", "streaming", 0, 0, "on")
	other := swStandby("db1", "m1", "streaming", 0, 0, "on")
	for _, tc := range []struct {
		name, current string
		member        *swMember
		vars          map[string]any
		want, err     string
	}{
		{"socket, same machine: the new primary's socket", "/run/db1", same, nil, "/run/db2", ""},
		{"default socket, same machine", "", same, nil, "/run/db2", ""},
		{"socket, another machine: refused", "/run/db1", other, nil, "", "through a unix socket"},
		{"TCP: the inventory's address", "10.0.0.1", other, nil, "10.0.0.2", ""},
		{"the replication host var wins", "/run/db1", other, map[string]any{replicationHostVar: "db2.repl"}, "db2.repl", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			delete(cand.t.Vars, replicationHostVar)
			for k, v := range tc.vars {
				cand.t.Vars[k] = v
			}
			got, err := upstreamHost(cand, tc.member, tc.current)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
