package transport

import (
	"strings"
	"testing"
	"unicode/utf8"
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
	if msg := e.Error(); !utf8.ValidString(msg) || !strings.Contains(msg, "é … é") {
		t.Errorf("ExitError cut inside a character: %q", msg[:40])
	}
}

// TestClipEnds: ClipTail keeps the end (the line that says why comes
// last), text that is not UTF-8 is cut at the limit rather than dropped
// whole, and ExitError keeps both ends of long output.
func TestClipEnds(t *testing.T) {
	a := strings.Repeat("a", MaxErrorOutput)
	bad := strings.Repeat("\x80", 3000)
	tests := []struct {
		name     string
		clip     func(string) string
		in, want string
	}{
		{"tail: short", ClipTail, "abc", "abc"},
		{"tail: exactly the limit", ClipTail, a, a},
		{"tail: the end is kept", ClipTail, "first line / " + a, "…" + a},
		{"tail: trimmed", ClipOutputTail, " \n" + a + "b\n", "…" + a[1:] + "b"},
		// é is two bytes; the cut falls between them: its tail is skipped.
		{"tail: a character across the cut", ClipTail, "éé" + strings.Repeat("a", MaxErrorOutput-1), "…" + strings.Repeat("a", MaxErrorOutput-1)},
		{"head: not UTF-8", Clip, bad, bad[:MaxErrorOutput] + "…"},
		{"tail: not UTF-8", ClipTail, bad, "…" + bad[:MaxErrorOutput]},
		{"head: not UTF-8 after a character", Clip, "é" + bad, ("é" + bad)[:MaxErrorOutput] + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.clip(tt.in); got != tt.want {
				t.Errorf("got %d bytes %.40q…, want %d bytes %.40q…", len(got), got, len(tt.want), tt.want)
			}
		})
	}
	out := "could not stop: " + strings.Repeat(".", 5000) + "\npg_ctl: server does not shut down\n"
	msg := (&ExitError{Command: "pg_ctl stop", Result: Result{ExitCode: 1, Stderr: []byte(out)}}).Error()
	if !strings.HasPrefix(msg, "pg_ctl stop: exit status 1: could not stop: ") || !strings.HasSuffix(msg, "\npg_ctl: server does not shut down") || len(msg) > MaxErrorOutput+100 {
		t.Errorf("ExitError of %d bytes: %.60q … %q", len(msg), msg, msg[max(0, len(msg)-60):])
	}
}
