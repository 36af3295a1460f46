package playbook_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/modules/hugepages"
	"github.com/pgtune/pgtune/modules/oom"
	"github.com/pgtune/pgtune/modules/overcommit"
	"github.com/pgtune/pgtune/modules/pgconf"
	"github.com/pgtune/pgtune/playbooks"
)

// BenchmarkParse loads playbooks against the real modules' parameter
// types: the embedded default policy, and a fleet playbook with one play
// per group, each with its own expressions.
func BenchmarkParse(b *testing.B) {
	_, reg := engine.Registry(hugepages.New(), pgconf.New(), overcommit.New(), oom.New())
	var fleet strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&fleet, `- name: memory policy for group %d
  hosts: "pg_%d:!canary"
  policy:
    hugepages:
      pool: "${floor(facts.mem_total * %d / 100)}"
    pgconf:
      restart: true
    overcommit:
      ratio: 0.8
      headroom: "${%d * GiB}"
`, i, i, 20+i%10, 1+i%4)
	}
	for _, tc := range []struct {
		name  string
		data  []byte
		plays int
	}{
		{"default", playbooks.Default, 1},
		{"plays-100", []byte(fleet.String()), 100},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.data)))
			for b.Loop() {
				pb, err := playbook.Parse("bench.yml", tc.data, reg)
				if err != nil {
					b.Fatal(err)
				}
				if len(pb.Plays) != tc.plays {
					b.Fatalf("%d plays, want %d", len(pb.Plays), tc.plays)
				}
			}
		})
	}
}
