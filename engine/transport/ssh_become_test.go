package transport

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"
)

// recordingStdin is a command's stdin that keeps what was written.
type recordingStdin struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	closed chan struct{}
}

func (r *recordingStdin) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

func (r *recordingStdin) Close() error { close(r.closed); return nil }

// TestBecomeFeedNeverAnswersAfterStart: the password goes to sudo only;
// a prompt marker that arrives with or after the wrapper's PID line (a
// process of the command writing the marker, visible in sudo's argv, to
// the session's stderr) is never answered (audit h98). Each case is tried
// many times: the race it guards against was a random select.
func TestBecomeFeedNeverAnswersAfterStart(t *testing.T) {
	const password = "s3cr3t-become"
	cmdStdin := []byte("the command's input\n")
	for _, tc := range []struct {
		name string
		// ready makes the feed's stderr show the command started, and
		// whatever marker the case plants.
		ready func(f *becomeFeed, w *pidCapture)
	}{
		{"PID line and marker in one write", func(f *becomeFeed, w *pidCapture) {
			w.Write([]byte("pgtune-pid:4242\n" + f.prompt))
		}},
		{"PID line, then marker", func(f *becomeFeed, w *pidCapture) {
			w.Write([]byte("pgtune-pid:4242\n"))
			w.Write([]byte(f.prompt))
		}},
		{"a prompt signalled and the PID known at once", func(f *becomeFeed, w *pidCapture) {
			w.Write([]byte("pgtune-pid:4242\n"))
			w.prompts <- struct{}{}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 200 {
				f := newBecomeFeed(password)
				w := newPIDCapture()
				in := &recordingStdin{closed: make(chan struct{})}
				f.attachPipe(in, w)
				tc.ready(f, w)
				stop := f.run(cmdStdin)
				<-in.closed
				stop()
				if got := in.buf.String(); got != string(cmdStdin) || f.answered.Load() {
					t.Fatalf("stdin got %q (answered %v); want only the command's input", got, f.answered.Load())
				}
			}
		})
	}
}

// TestBecomeFeedAnswersSudo: a prompt before the PID line is sudo's and is
// answered once, then the command gets its stdin.
func TestBecomeFeedAnswersSudo(t *testing.T) {
	f := newBecomeFeed("pw")
	w := newPIDCapture()
	in := &recordingStdin{closed: make(chan struct{})}
	f.attachPipe(in, w)
	stop := f.run([]byte("input"))
	defer stop()
	w.Write([]byte(f.prompt))
	for !f.answered.Load() {
		select {
		case <-in.closed:
			t.Fatal("stdin closed before the password was written")
		case <-time.After(time.Millisecond):
		}
	}
	w.Write([]byte("pgtune-pid:9\n"))
	<-in.closed
	if got := in.buf.String(); got != "pw\ninput" {
		t.Fatalf("stdin got %q, want the password then the input", got)
	}
}

// TestShellThroughNeverAnswersAfterStart: the privileged shell's start
// answers sudo the same way: a prompt signalled when the shell already
// runs is never answered (the password would be a command line to it).
func TestShellThroughNeverAnswersAfterStart(t *testing.T) {
	for range 200 {
		f := newBecomeFeed("s3cr3t-become")
		pc := newPIDCapture()
		in := &recordingStdin{closed: make(chan struct{})}
		f.attachPipe(in, pc)
		pc.Write([]byte("pgtune-pid:4242\n"))
		pc.prompts <- struct{}{}
		sh := &privShell{stdin: in, overCh: make(chan struct{}), ended: make(chan struct{})}
		if err := sh.through(context.Background(), f, pc); err != nil {
			t.Fatal(err)
		}
		if sh.last != nil {
			<-sh.last.done
			t.Fatalf("the shell's stdin got %q after it started", in.buf.String())
		}
	}
}
