package rollout

import (
	"fmt"
	"testing"

	"github.com/pgtune/pgtune/engine/inventory"
)

func TestParseShard(t *testing.T) {
	tests := []struct {
		in   string
		want Shard
		ok   bool
	}{
		{"1/1", Shard{1, 1}, true},
		{"3/8", Shard{3, 8}, true},
		{" 8/8 ", Shard{8, 8}, true},
		{"0/4", Shard{}, false},
		{"5/4", Shard{}, false},
		{"1/0", Shard{}, false},
		{"2", Shard{}, false},
		{"a/b", Shard{}, false},
		{"-1/4", Shard{}, false},
	}
	for _, tt := range tests {
		got, err := ParseShard(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func hostsNamed(names ...string) []*inventory.Host {
	out := make([]*inventory.Host, len(names))
	for i, n := range names {
		out[i] = &inventory.Host{Name: n}
	}
	return out
}

func shardOf(hosts []*inventory.Host, n int) map[string]int {
	out := map[string]int{}
	for i := 1; i <= n; i++ {
		for _, h := range (Shard{i, n}).Filter(hosts) {
			if prev, dup := out[h.Name]; dup {
				panic(fmt.Sprintf("%s in shards %d and %d", h.Name, prev, i))
			}
			out[h.Name] = i
		}
	}
	return out
}

// TestShardStable: every host lands in exactly one shard; the order of the
// inventory changes nothing; adding or removing a host moves no other.
func TestShardStable(t *testing.T) {
	var names []string
	for i := 0; i < 500; i++ {
		names = append(names, fmt.Sprintf("db%03d.example.com", i))
	}
	for _, n := range []int{1, 2, 7, 16} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			base := shardOf(hostsNamed(names...), n)
			if len(base) != len(names) {
				t.Fatalf("%d of %d hosts in a shard", len(base), len(names))
			}
			reversed := make([]string, len(names))
			for i, name := range names {
				reversed[len(names)-1-i] = name
			}
			added := append(append([]string{}, reversed...), "db-new.example.com")
			removed := names[1:]
			for label, set := range map[string][]string{"reversed": reversed, "one added": added, "one removed": removed} {
				got := shardOf(hostsNamed(set...), n)
				for _, name := range set {
					if want, ok := base[name]; ok && got[name] != want {
						t.Errorf("%s: %s moved from shard %d to %d", label, name, want, got[name])
					}
				}
				if len(got) != len(set) {
					t.Errorf("%s: %d of %d hosts in a shard", label, len(got), len(set))
				}
			}
			if n > 1 {
				// Spread: no shard empty or holding most of the fleet.
				count := map[int]int{}
				for _, s := range base {
					count[s]++
				}
				for i := 1; i <= n; i++ {
					if count[i] == 0 || count[i] > 2*len(names)/n {
						t.Errorf("shard %d/%d holds %d of %d hosts", i, n, count[i], len(names))
					}
				}
			}
		})
	}
}
