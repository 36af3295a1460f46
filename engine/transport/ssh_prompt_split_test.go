package transport

import "testing"

// TestPromptSplits: prompts are counted only before the
// PID line, whatever the write boundaries; what follows it is kept as the
// command's stderr, marker included.
func TestPromptSplits(t *testing.T) {
	const prompt = "[pgtune-sudo-0123456789abcdef] password:"
	cases := []struct {
		name   string
		stream string
		want   int // prompts signalled
		stderr string
	}{
		{"prompt, PID", prompt + "\n" + pidMarker + "42\n", 1, "\n"},
		{"marker after PID", prompt + "\n" + pidMarker + "42\n" + prompt + "\n", 1, "\n" + prompt + "\n"},
		{"marker right after PID, no newline", pidMarker + "42\n" + prompt, 0, prompt},
		{"lecture then prompt twice", "We trust you...\n" + prompt + "Sorry, try again.\n" + prompt, 2, "We trust you...\nSorry, try again.\n"},
		{"marker glued to PID line", prompt + pidMarker + "42\n" + prompt, 1, prompt},
	}
	for _, tc := range cases {
		for size := 1; size <= len(tc.stream); size++ {
			w := newPIDCapture()
			w.watchPrompt(prompt)
			for i := 0; i < len(tc.stream); i += size {
				_, _ = w.Write([]byte(tc.stream[i:min(len(tc.stream), i+size)]))
			}
			if got := len(w.prompts); got != tc.want {
				t.Errorf("%s, writes of %d: %d prompts, want %d", tc.name, size, got, tc.want)
			}
			if got := string(w.Bytes()); got != tc.stderr {
				t.Errorf("%s, writes of %d: stderr %q, want %q", tc.name, size, got, tc.stderr)
			}
		}
	}
}
