package main

import (
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/inventory"
)

// TestInShard: an empty shard of a non-empty selection is a note and no
// hosts, not an error (a CI matrix larger than the fleet); a bad --shard
// is still an error. db1..db5 fall in shards 7, 4, 1, 6 and 3 of 8.
func TestInShard(t *testing.T) {
	var hosts []*inventory.Host
	for _, n := range []string{"db1", "db2", "db3", "db4", "db5"} {
		hosts = append(hosts, &inventory.Host{Name: n})
	}
	tests := []struct {
		shard, want, note, err string
	}{
		{"", "db1 db2 db3 db4 db5", "", ""},
		{"4/8", "db2", "", ""},
		{"2/8", "", "--shard 2/8: no host of the selection falls in this shard (5 hosts selected): nothing to do", ""},
		{"9/8", "", "", "expected i/n"},
	}
	for _, tt := range tests {
		t.Run(tt.shard, func(t *testing.T) {
			got, note, err := fleetOptions{shard: tt.shard}.inShard(hosts)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, h := range got {
				names = append(names, h.Name)
			}
			if strings.Join(names, " ") != tt.want || note != tt.note || got == nil {
				t.Errorf("hosts %v (nil: %t), note %q; want %q, note %q", names, got == nil, note, tt.want, tt.note)
			}
		})
	}
}
