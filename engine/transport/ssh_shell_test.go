package transport

import (
	"bytes"
	"strings"
	"testing"
)

// TestFrameWriter splits a stream at the marker however the bytes come
// in, keeps output that only looks like a marker, and trips the cap.
func TestFrameWriter(t *testing.T) {
	const mark = "pgtune-end-0123"
	stream := "out1\n" + mark + " 0\n" + "no newline" + "\n" + mark + " 3\n" +
		"\npgtune-end-9999 1\n" + mark + "x\n" + "\n" + mark + " 0\n"
	want := []frame{{[]byte("out1"), "0"}, {[]byte("no newline"), "3"}, {[]byte("\npgtune-end-9999 1\n" + mark + "x\n"), "0"}}
	for _, chunk := range []int{1, 2, 7, len(stream)} {
		stop := make(chan struct{})
		over := ""
		w := newFrameWriter("stdout", mark, stop, func(s string) { over = s })
		w.frames = make(chan frame, len(want))
		for i := 0; i < len(stream); i += chunk {
			if _, err := w.Write([]byte(stream[i:min(i+chunk, len(stream))])); err != nil {
				t.Fatal(err)
			}
		}
		close(w.frames)
		var got []frame
		for f := range w.frames {
			got = append(got, f)
		}
		if len(got) != len(want) || over != "" {
			t.Fatalf("chunk %d: %d frames (over %q), want %d", chunk, len(got), over, len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i].data, want[i].data) || got[i].status != want[i].status {
				t.Errorf("chunk %d: frame %d = %q %q, want %q %q", chunk, i, got[i].data, got[i].status, want[i].data, want[i].status)
			}
		}
	}
}

func TestFrameWriterCap(t *testing.T) {
	const mark = "pgtune-end-0123"
	for _, tc := range []struct {
		name   string
		writes []string
		over   bool
	}{
		{"at the cap", []string{strings.Repeat("x", 10) + "\n" + mark + " 0\n"}, false},
		{"over, marker in the same write", []string{strings.Repeat("x", 11) + "\n" + mark + " 0\n"}, true},
		{"over, no marker yet", []string{strings.Repeat("x", 5), strings.Repeat("x", 40)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			over := ""
			w := newFrameWriter("stderr", mark, make(chan struct{}), func(s string) { over = s })
			w.limit.Store(10)
			for _, s := range tc.writes {
				if n, err := w.Write([]byte(s)); err != nil || n != len(s) {
					t.Fatalf("write: %d, %v", n, err)
				}
			}
			if (over == "stderr") != tc.over || (len(w.frames) == 1) == tc.over {
				t.Fatalf("over %q, %d frames; want over %v", over, len(w.frames), tc.over)
			}
		})
	}
}

// TestShellRequest frames a command as the shell reads it.
func TestShellRequest(t *testing.T) {
	got := string(shellRequest(Command{Args: []string{"sh", "-c", "it's"}, Stdin: []byte("a\x00b")}))
	args := `'sh' '-c' 'it'\''s'`
	if want := "19 3\n" + args + "a\x00b.\n"; len(args) != 19 || got != want {
		t.Fatalf("request %q, want %q", got, want)
	}
}

// TestPIDCapturePrompts: sudo's prompts are taken out of stderr and
// counted however the bytes come in (several in one write, one split
// across writes, one that ends a line before the PID line), and output
// without newlines or prompts is looked at once, not once per write.
func TestPIDCapturePrompts(t *testing.T) {
	const p = "[pgtune-sudo-00] password:"
	for _, tc := range []struct {
		name        string
		chunks      []string
		wantPrompts int
		wantPID     int
		wantErr     string
	}{
		{"one", []string{p}, 1, 0, ""},
		{"two in one write, text around", []string{"a" + p + "b" + p + "c"}, 2, 0, "abc"},
		{"split", []string{"x[pgtune-su", "do-00] pass", "word:y"}, 1, 0, "xy"},
		{"split byte by byte", strings.Split("w"+p+"z", ""), 1, 0, "wz"},
		{"prompt, newline, PID", []string{p + "\n", "pgtune-pid:7\nout"}, 1, 7, "\nout"},
		{"no prompt", []string{"[pgtune-sudo-00] pass", "phrase:"}, 0, 0, "[pgtune-sudo-00] passphrase:"},
		// After the PID line the command runs: a prompt there is
		// the command's output (anyone it runs as can write it), never
		// answered (audit h98).
		{"prompt after the PID line, one write", []string{"pgtune-pid:4242\n" + p}, 0, 4242, p},
		{"prompt after the PID line, later write", []string{"pgtune-pid:4242\n", p}, 0, 4242, p},
		{"prompt on the PID line's line and after it", []string{p + "pgtune-pid:5\n" + p + "\n"}, 1, 5, p + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newPIDCapture()
			w.watchPrompt(p)
			for _, c := range tc.chunks {
				w.Write([]byte(c))
			}
			if len(w.prompts) != tc.wantPrompts || w.PID() != tc.wantPID || string(w.Bytes()) != tc.wantErr {
				t.Errorf("%d prompts, pid %d, stderr %q; want %d, %d, %q", len(w.prompts), w.PID(), w.Bytes(), tc.wantPrompts, tc.wantPID, tc.wantErr)
			}
		})
	}
	t.Run("linear", func(t *testing.T) {
		// 8 MiB in 4 KiB writes, no newline: 2048 writes, each of which
		// rescanned everything before (8 GiB of searching) before the
		// search kept its place. Shown without a clock: each write leaves
		// both searches at the end of what it wrote, and a newline and a
		// prompt planted in what was searched already are never seen
		// again (a search that started over would take the prompt out and
		// move past the newline).
		w := newPIDCapture()
		w.watchPrompt(p)
		chunk := bytes.Repeat([]byte("x"), 4<<10)
		for i := range 2048 {
			w.Write(chunk)
			end := (i + 1) * len(chunk)
			if w.nlFrom != end || w.promptFrom != end-len(p)+1 {
				t.Fatalf("after write %d: searches resume at %d and %d, want %d and %d", i+1, w.nlFrom, w.promptFrom, end, end-len(p)+1)
			}
			if i == 0 {
				b := w.buf.Bytes()
				b[0] = '\n'
				copy(b[1:], p)
			}
		}
		if w.scanned != 0 || len(w.prompts) != 0 || w.buf.Len() != 8<<20 {
			t.Errorf("bytes searched before were searched again: line scan at %d, %d prompts taken, %d bytes kept", w.scanned, len(w.prompts), w.buf.Len())
		}
	})
}
