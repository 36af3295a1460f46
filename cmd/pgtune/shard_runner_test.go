package main

import "testing"

// TestRunnerKnowsShard: --shard tells the engine the run is a shard, so
// it refuses restarts in clusters split across shards (engine/clusters.go).
func TestRunnerKnowsShard(t *testing.T) {
	for _, shard := range []string{"", "2/4"} {
		o := &options{}
		o.fleet.shard = shard
		if r := newApp().runner(o, nil); r.Shard != (shard != "") {
			t.Errorf("--shard %q: Runner.Shard %t", shard, r.Shard)
		}
	}
}
