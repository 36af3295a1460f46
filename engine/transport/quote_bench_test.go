package transport

import (
	"strings"
	"testing"
)

// Every command the SSH transport sends is quoted with Join, the gather
// script included (about 2 kB of shell in one argument), once per host per
// round trip.
func BenchmarkQuote(b *testing.B) {
	for _, tc := range []struct{ name, s string }{
		{"safe", "/etc/sysctl.d/10-hugepages.conf"},
		{"space", "/var/lib/postgresql/15/main data"},
		{"quotes", strings.Repeat("it's ", 20)},
		{"script", benchScript},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.s)))
			for b.Loop() {
				_ = Quote(tc.s)
			}
		})
	}
}

func BenchmarkJoin(b *testing.B) {
	args := []string{"sh", "-c", benchScript, "sh",
		"vm.nr_hugepages", "vm.overcommit_memory", "vm.overcommit_kbytes", "vm.overcommit_ratio"}
	n := 0
	for _, a := range args {
		n += len(a)
	}
	b.SetBytes(int64(n))
	for b.Loop() {
		_ = Join(args)
	}
}

// benchScript has the shape of the engine's fixed scripts: shell syntax,
// single quotes that need escaping, positional parameters.
var benchScript = strings.Repeat(`for k in "$@"; do
  p=/proc/sys/$(printf %s "$k" | tr . /)
  if [ -r "$p" ]; then printf 'S %s %s\n' "$k" "$(cat "$p")"; fi
done
`, 16)
