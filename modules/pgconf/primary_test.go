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
			if !s.restart && s.pendingReason() != "primary: skip" {
				t.Errorf("pending reason %q", s.pendingReason())
			}
		})
	}
}
