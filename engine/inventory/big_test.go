package inventory

import (
	"testing"
)

// A large fleet (range expansion, a host in two groups) loads whole and
// matches correctly. Its speed is measured by the benchmarks, not here.
func TestLargeRange(t *testing.T) {
	if testing.Short() {
		t.Skip("loads 100000 hosts")
	}
	inv, err := Parse("big.yml", []byte("all:\n  children:\n    a:\n      hosts:\n        db[0:99999]:\n    b:\n      hosts:\n        db[0:99999]:\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Hosts) != 100000 {
		t.Fatalf("%d hosts", len(inv.Hosts))
	}
	if hs, err := inv.Match("a:&b:!db5*"); err != nil || len(hs) != 100000-11111 {
		t.Errorf("%d %v", len(hs), err)
	}
}
