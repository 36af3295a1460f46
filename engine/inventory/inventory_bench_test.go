package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// benchInventory writes an n-host inventory the way a real fleet's looks:
// region and role groups with group vars, every host listed with its own
// address, port and vars, and each host in two groups.
func benchInventory(n int) []byte {
	regions := []string{"eu", "us", "ap"}
	var b strings.Builder
	b.WriteString("all:\n  vars:\n    ansible_user: deploy\n    ansible_become: yes\n    env: prod\n  children:\n")
	for ri, region := range regions {
		fmt.Fprintf(&b, "    %s:\n      vars:\n        region: %s\n        pg_data: /var/lib/postgresql/15/main\n      children:\n", region, region)
		for _, role := range []string{"primary", "replica"} {
			fmt.Fprintf(&b, "        %s_%s:\n          vars:\n            role: %s\n          hosts:\n", region, role, role)
			for i := ri; i < n; i += len(regions) {
				if (i%10 == 0) != (role == "primary") {
					continue
				}
				fmt.Fprintf(&b, "            db%04d.%s.example.com:\n              ansible_host: 10.%d.%d.%d\n              ansible_port: %d\n              rack: r%d\n",
					i, region, ri, i/256, i%256, 22+i%3, i%40)
			}
		}
	}
	// A cross-cutting group, as maintenance windows or canaries are.
	b.WriteString("    canary:\n      vars:\n        serial: 1\n      hosts:\n")
	for i := 0; i < n; i += 50 {
		fmt.Fprintf(&b, "        db%04d.%s.example.com:\n", i, regions[i%len(regions)])
	}
	return []byte(b.String())
}

// BenchmarkLoad reads and resolves a whole inventory from disk, as every
// pgtune command does first.
func BenchmarkLoad(b *testing.B) {
	for _, tc := range []struct {
		name  string
		data  []byte
		hosts int
	}{
		{"explicit-1000", benchInventory(1000), 1000},
		{"range-1000", []byte("all:\n  vars:\n    ansible_user: deploy\n  children:\n    pg:\n      vars:\n        pg_data: /srv/pg\n      hosts:\n        db[0000:0999].example.com:\n"), 1000},
	} {
		path := filepath.Join(b.TempDir(), tc.name+".yml")
		if err := os.WriteFile(path, tc.data, 0o644); err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.data)))
			for b.Loop() {
				inv, err := Load(path)
				if err != nil {
					b.Fatal(err)
				}
				if len(inv.Hosts) != tc.hosts {
					b.Fatalf("%d hosts, want %d", len(inv.Hosts), tc.hosts)
				}
			}
		})
	}
}

// BenchmarkMatch selects hosts with the patterns --limit and plays use.
func BenchmarkMatch(b *testing.B) {
	inv, err := Parse("fleet.yml", benchInventory(1000))
	if err != nil {
		b.Fatal(err)
	}
	for _, pattern := range []string{"all", "eu:&eu_replica:!canary", "db00*", "~db0[0-4].*\\.us\\."} {
		b.Run(pattern, func(b *testing.B) {
			for b.Loop() {
				if hs, err := inv.Match(pattern); err != nil || len(hs) == 0 {
					b.Fatalf("%q: %d hosts, %v", pattern, len(hs), err)
				}
			}
		})
	}
}
