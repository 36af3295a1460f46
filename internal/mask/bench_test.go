package mask

import (
	"os"
	"testing"
)

// BenchmarkConfig masks a stock postgresql.conf: the size of what every
// host's report carries for each rewritten config file.
func BenchmarkConfig(b *testing.B) {
	conf, err := os.ReadFile("/usr/share/postgresql/15/postgresql.conf.sample")
	if err != nil {
		b.Skip("no postgresql.conf.sample:", err)
	}
	s := string(conf)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		_ = Config(s)
	}
}
