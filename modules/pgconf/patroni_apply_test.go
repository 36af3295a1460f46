package pgconf

import (
	"strings"
	"testing"
)

func TestSwitchoverCandidate(t *testing.T) {
	tests := []struct {
		name, cluster, want, err string
	}{
		{name: "least lag among replicas on the new values",
			cluster: `{"members": [
				{"name": "a", "role": "leader", "state": "running", "lag": 0},
				{"name": "b", "role": "replica", "state": "running", "lag": 4096},
				{"name": "c", "role": "sync_standby", "state": "streaming", "lag": 0},
				{"name": "d", "role": "replica", "state": "running", "lag": 0, "pending_restart": true}]}`,
			want: "c"},
		{name: "nofailover and unknown lag passed over",
			cluster: `{"members": [
				{"name": "a", "role": "leader", "state": "running"},
				{"name": "b", "role": "replica", "state": "running", "lag": 0, "tags": {"nofailover": true}},
				{"name": "c", "role": "replica", "state": "running", "lag": "unknown"},
				{"name": "d", "role": "replica", "state": "running", "lag": 10}]}`,
			want: "d"},
		{name: "none fit: says why for each",
			cluster: `{"members": [
				{"name": "a", "role": "leader", "state": "running"},
				{"name": "b", "role": "replica", "state": "starting", "lag": 0},
				{"name": "c", "role": "replica", "state": "running", "lag": 0, "pending_restart": true}]}`,
			err: "no replica to switch over to (b (state starting), c (restart pending: not on the new values))"},
		{name: "not JSON", cluster: `<html>`, err: "not Patroni's JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := switchoverCandidate([]byte(tt.cluster), "a")
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}
