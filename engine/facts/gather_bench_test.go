package facts

import (
	"os"
	"path/filepath"
	"testing"
)

// ParseGather runs once per host per gather (plan, and again before each
// module in apply); ScopeVars turns the result into what policy
// expressions see.
func BenchmarkParseGather(b *testing.B) {
	for _, name := range []string{"gather-debian-vm.txt", "gather-numa.txt"} {
		out, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(out)))
			for b.Loop() {
				if _, err := ParseGather(out, testSets...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkScopeVars(b *testing.B) {
	out, err := os.ReadFile(filepath.Join("testdata", "gather-debian-vm.txt"))
	if err != nil {
		b.Fatal(err)
	}
	f, err := ParseGather(out, testSets...)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := f.ScopeVars(); err != nil {
			b.Fatal(err)
		}
	}
}
