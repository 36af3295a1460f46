package transport

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strconv"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// Cancelling a remote command cannot rely on the SSH "signal" request
// alone: OpenSSH refuses it for root logins ("session signalling requires
// privilege separation"), and closing the channel does not stop a command
// that neither reads stdin nor writes output (sshd keeps the session until
// its child exits). So every command is started through a tiny wrapper
// that reports its PID on the first stderr line and then execs the real
// program; on cancel a second session kills that process group.

// pidMarker prefixes the wrapper's first stderr line.
const pidMarker = "pgtune-pid:"

// wrapperScript prints the PID and replaces itself with the command, which
// keeps the PID, the exit status and the argument vector untouched.
const wrapperScript = `echo "` + pidMarker + `$$" >&2; exec "$@"`

// remoteLine is the command line sent to the remote login shell. The
// login shell execs it: it would otherwise fork it and wait, a process
// more per session for nothing. The PID the wrapper reports and its group
// are the same either way; a command killed by a signal now comes back
// as sshd's exit-signal (as under a bash login shell before) rather than
// a shell's 128+n status. (A restricted login shell, rbash, refuses exec:
// pgtune never supported one; its quoting needs a POSIX shell.)
func remoteLine(args []string, become bool) string {
	line := Join(append([]string{"sh", "-c", wrapperScript, "sh"}, args...))
	if become {
		line = "sudo -n -- " + line
	}
	return "exec " + line
}

// killScript stops process $1 and its process group: TERM first, KILL if
// it is still there after two seconds. A group id of 0 or 1, or our own,
// is never signalled.
const killScript = `p=$1
g=$(ps -o pgid= -p "$p" 2>/dev/null | tr -d ' ')
me=$(ps -o pgid= -p $$ 2>/dev/null | tr -d ' ')
sig() {
  case $g in ''|0|1|"$me") ;; *) kill -s "$1" -- "-$g" 2>/dev/null ;; esac
  kill -s "$1" "$p" 2>/dev/null
}
sig TERM
i=0
while kill -0 "$p" 2>/dev/null && [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done
if kill -0 "$p" 2>/dev/null; then sig KILL; fi
exit 0
`

var pidLine = regexp.MustCompile(`^` + pidMarker + `([0-9]+)$`)

// pidCapture is the session's stderr: it takes the wrapper's PID line out
// and keeps the rest as the command's stderr. Lines before it are sudo's
// (e.g. "unable to resolve host"); the wrapper prints it before exec, so
// only the first matching line is ours.
type pidCapture struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	scanned int // bytes of buf already known not to hold the PID line
	// Where the next searches start, so that a host printing without
	// newlines (or prompts) costs each byte one look, not one per write.
	nlFrom     int // no newline in buf[scanned:nlFrom]
	promptFrom int // no prompt starts in buf[scanned:promptFrom]
	pid        int
	parsed     chan struct{} // closed once the PID is known

	// prompt, when set, is sudo's password prompt: each one seen before
	// the PID line is taken out and signalled on prompts.
	prompt  []byte
	prompts chan struct{}
}

// watchPrompt makes w take sudo's prompt out of stderr and signal it.
func (w *pidCapture) watchPrompt(prompt string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.prompt = []byte(prompt)
	w.prompts = make(chan struct{}, 8)
}

// takePrompts removes complete prompts from buf[…:limit], the part no
// search has seen yet and known to come before the PID line, in one pass.
// It returns how many bytes it took out (all before limit).
func (w *pidCapture) takePrompts(limit int) int {
	if len(w.prompt) == 0 {
		return 0
	}
	b := w.buf.Bytes()
	from := max(w.scanned, w.promptFrom)
	if from >= limit {
		return 0
	}
	dst, src, first := from, from, -1
	for {
		i := bytes.Index(b[src:limit], w.prompt)
		if i < 0 {
			break
		}
		if first < 0 {
			first = src + i
		}
		dst += copy(b[dst:], b[src:src+i])
		src += i + len(w.prompt)
		select {
		case w.prompts <- struct{}{}:
		default:
		}
	}
	if first < 0 {
		w.promptFrom = max(from, limit-len(w.prompt)+1)
		return 0
	}
	dst += copy(b[dst:], b[src:])
	removed := len(b) - dst
	w.buf.Truncate(dst)
	// A prompt split by a removed one is found by the next write's search.
	w.promptFrom = first
	w.nlFrom = min(w.nlFrom, first)
	return removed
}

func newPIDCapture() *pidCapture { return &pidCapture{parsed: make(chan struct{})} }

// Write keeps p and, until the PID line is seen, looks for it line by
// line. Prompts are taken only from what comes before it: sudo prompts
// before the wrapper runs, and what follows the PID line is the command's
// (a process the cluster owner controls can write there, and must never
// be answered with the password), so once the PID is known no prompt is
// taken again.
func (w *pidCapture) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for w.pid == 0 {
		b := w.buf.Bytes()
		from := max(w.scanned, w.nlFrom)
		i := bytes.IndexByte(b[from:], '\n')
		if i < 0 {
			// An unfinished line: no PID line yet, so all of it
			// precedes the PID line.
			w.takePrompts(len(b))
			w.nlFrom = w.buf.Len()
			break
		}
		// A prompt holds no newline: those on this line end before it.
		end := from + i
		end -= w.takePrompts(end)
		b = w.buf.Bytes()
		if m := pidLine.FindSubmatch(b[w.scanned:end]); m != nil {
			if pid, err := strconv.Atoi(string(m[1])); err == nil && pid > 0 {
				rest := append([]byte(nil), b[end+1:]...)
				w.buf.Truncate(w.scanned)
				w.buf.Write(rest)
				w.pid = pid
				close(w.parsed)
				break
			}
		}
		w.scanned = end + 1
	}
	return len(p), nil
}

func (w *pidCapture) Bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]byte(nil), w.buf.Bytes()...)
}

// started says whether the PID line was seen (the command runs).
func (w *pidCapture) started() bool {
	select {
	case <-w.parsed:
		return true
	default:
		return false
	}
}

func (w *pidCapture) PID() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pid
}

// killGrace bounds how long a cancelled Run waits for the remote command
// to start (to learn its PID) and for the kill to finish.
var killGrace = 5 * time.Second

// abort stops a cancelled session's command: the SSH signal (honoured for
// non-root logins), then a kill from a second session (needed for root),
// then the channel close. It returns when the command is gone or the
// grace period ran out; it never waits for the cancelled ctx.
func (s *SSH) abort(rc *remoteCmd, stderr *pidCapture, become bool) {
	// The signal is sent from a goroutine: a host that stopped reading
	// must not hold the abort past its grace.
	go rc.signal(ssh.SIGTERM)
	deadline := time.Now().Add(killGrace)
	select {
	case <-rc.done:
		return
	case <-stderr.parsed:
	case <-time.After(time.Until(deadline)):
	}
	if pid := stderr.PID(); pid > 0 {
		select {
		case <-rc.done: // the signal was enough
			return
		case <-time.After(100 * time.Millisecond):
		}
		s.killRemote(pid, become, deadline)
	}
	_ = rc.Close()
	select {
	case <-rc.done:
	case <-time.After(time.Until(deadline)):
	}
}

// killRemote runs killScript for pid in a session of its own, bounded by
// deadline.
func (s *SSH) killRemote(pid int, become bool, deadline time.Time) {
	kctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	ks, err := s.newCmd(kctx)
	if err != nil {
		return
	}
	defer ks.Close()
	line := Join([]string{"sh", "-c", killScript, "sh", strconv.Itoa(pid)})
	var in []byte
	switch {
	case become && s.become != "":
		// killScript reads no stdin: the password is consumed by sudo
		// if it asks, ignored otherwise.
		line = "sudo -S -p '' -- " + line
		in = []byte(string(s.become) + "\n")
	case become:
		line = "sudo -n -- " + line
	}
	if err := ks.start(kctx, line, io.Discard, io.Discard); err != nil {
		return
	}
	ks.feed(in)
	select {
	case <-ks.done:
	case <-kctx.Done():
	}
}
