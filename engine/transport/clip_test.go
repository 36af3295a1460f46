package transport

import (
	"strings"
	"testing"
)

// TestClipOutput: host output in an error is trimmed and cut to
// MaxErrorOutput bytes, never inside a character.
func TestClipOutput(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"short", "  pg_ctl: no server running\n", "pg_ctl: no server running"},
		{"exactly the limit", strings.Repeat("a", MaxErrorOutput), strings.Repeat("a", MaxErrorOutput)},
		{"over it", strings.Repeat("a", MaxErrorOutput+1), strings.Repeat("a", MaxErrorOutput) + "…"},
		// é is two bytes; the limit falls between them.
		{"a character across the limit", strings.Repeat("a", MaxErrorOutput-1) + "éé", strings.Repeat("a", MaxErrorOutput-1) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ClipOutput(tt.in); got != tt.want {
				t.Errorf("ClipOutput = %q (%d bytes), want %d bytes", got, len(got), len(tt.want))
			}
		})
	}
	// Clip keeps the text as it is: %q shows it exactly.
	if got := Clip(" a\n"); got != " a\n" {
		t.Errorf("Clip trimmed: %q", got)
	}
	e := &ExitError{Command: "pg_ctl", Result: Result{ExitCode: 1, Stderr: []byte("a" + strings.Repeat("é", MaxErrorOutput))}}
	if msg := e.Error(); !strings.HasSuffix(msg, "é…") {
		t.Errorf("ExitError cut inside a character: …%q", msg[len(msg)-8:])
	}
}
