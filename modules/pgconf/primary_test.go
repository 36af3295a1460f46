package pgconf

import (
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
)

func TestPrimaryPolicy(t *testing.T) {
	withStandbys := &facts.Topology{Role: "primary", SystemID: "1", Standbys: []facts.StandbyInfo{{Name: "s1", State: "streaming"}}}
	lone := &facts.Topology{Role: "primary", SystemID: "1"}
	standby := &facts.Topology{Role: "standby", SystemID: "1", Receiver: "streaming"}
	archiver := facts.WALClient{Name: "barman_receive_wal", Addr: "10.0.0.7", State: "streaming", Kind: facts.ClientArchiver}
	logical := facts.WALClient{Name: "debezium", Addr: "local", State: "streaming", Kind: facts.ClientLogical}
	loneArchived := &facts.Topology{Role: "primary", SystemID: "1", Clients: []facts.WALClient{archiver}}
	archived := &facts.Topology{Role: "primary", SystemID: "1", Standbys: withStandbys.Standbys, Clients: []facts.WALClient{archiver}}
	decoded := &facts.Topology{Role: "primary", SystemID: "1", Standbys: withStandbys.Standbys, Clients: []facts.WALClient{logical, archiver}}
	for _, tc := range []struct {
		name        string
		topo        *facts.Topology
		primary     string
		wantRestart bool
		wantNote    string
		wantErr     string
	}{
		{"replicated primary, restart", withStandbys, primaryRestart, true, "", ""},
		{"replicated primary, skip", withStandbys, primarySkip, false, "primary: skip leaves its restart pending", ""},
		{"replicated primary, switchover without Patroni: pgtune's own", withStandbys, primarySwitchover, true, "primary: switchover: apply switches over to a standby already restarted on the new values", ""},
		{"lone server, skip: restarts as before", lone, primarySkip, true, "", ""},
		{"standby, skip: restarts (standbys always go first)", standby, primarySkip, true, "", ""},
		{"no topology", nil, primarySkip, true, "", ""},
		// WAL clients that are no standby: no members, named.
		{"lone server with an archiver, skip: restarts (an archiver is no standby)", loneArchived, primarySkip, true,
			`stream from this primary: "barman_receive_wal" (WAL archiver, from 10.0.0.7); they are no members of its cluster and hold no restart: the restart cuts them off and they reconnect`, ""},
		{"replicated primary with clients, restart: named", decoded, primaryRestart, true,
			`"debezium" (logical decoding client, from local), "barman_receive_wal" (WAL archiver, from 10.0.0.7); they are no members`, ""},
		{"replicated primary with a logical client, switchover: refused in apply", decoded, primarySwitchover, true,
			"apply refuses the switchover while a logical decoding client streams (its slot stays on this server): use primary: restart", ""},
		{"replicated primary with an archiver, switchover: it must follow", archived, primarySwitchover, true,
			"each must follow the new primary, or keep streaming from this server once it is a standby", ""},
		{"replicated primary with clients, skip: no restart, no client note", decoded, primarySkip, false, "primary: skip leaves its restart pending", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := settings{restart: true, primary: tc.primary}
			p := &plan.ModulePlan{Module: Name}
			err := primaryPolicy(tc.topo, &s, p)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.restart != tc.wantRestart {
				t.Errorf("restart = %t, want %t", s.restart, tc.wantRestart)
			}
			notes := strings.Join(p.Notes, "\n")
			if (tc.wantNote == "") != (notes == "") || !strings.Contains(notes, tc.wantNote) {
				t.Errorf("notes %q, want %q", notes, tc.wantNote)
			}
			if strings.Contains(tc.name, "no client note") && strings.Contains(notes, "WAL clients") {
				t.Errorf("notes name WAL clients of a primary not restarted: %q", notes)
			}
			if !s.restart && s.pendingReason() != "primary: skip" {
				t.Errorf("pending reason %q", s.pendingReason())
			}
		})
	}
}
