package thp

import (
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
)

// TestParseFactsClipsLines: a line of the host's answer quoted in an
// error is clipped (one line may be as long as the output cap).
func TestParseFactsClipsLines(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	for _, out := range []string{
		"f relative/" + long,
		"l " + long,
		"o " + long,
		"zz " + long,
	} {
		_, err := parseFacts([]byte(out + "\n"))
		if err == nil || len(err.Error()) > transport.MaxErrorOutput+200 {
			t.Errorf("%.10s…: error of %d bytes, want the line clipped", out, len(err.Error()))
		}
	}
}
