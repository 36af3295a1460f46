package transport

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// The privileged shell (SSHConfig.PrivilegedShell) is one remote sh,
// started once per connection through sudo (or directly for root), that
// runs the controller's privileged commands one after the other. Each
// command otherwise costs a session, a login shell and a sudo (PAM,
// sudoers, logging): most of a host check's remote CPU.
//
// The shell runs only what the controller sends, as an argument vector;
// nothing the host says is ever run. A request on its stdin is a line
// "ALEN INLEN", ALEN bytes of the argument vector quoted for sh, INLEN
// bytes of the command's stdin, and a line "." that proves the request
// arrived whole (GNU head -c reads no byte past its count, which the
// framing needs; without it the shell exits at once and every command gets
// a session of its own): a connection cut inside a request ends the shell
// before the command runs. After the command, each stream carries a
// newline, the session's marker (random, sent on stdin, never on a command
// line) and the exit status. Output cannot forge the marker without
// knowing it.
//
// Commands run host code (an owner's postgres, its preload libraries), and
// such code can leave a process behind holding whatever it inherited. So a
// command never gets the shell's own streams: its stdout and stderr are
// pipes of its own, copied out by cat, and a leftover holding them keeps
// that command from ending (until its timeout stops the shell), as a
// session of its own would, instead of writing into later commands'
// output. Its stdin (a patroni.yml with passwords, say) is a file of a
// root-only directory, in memory where /run is, unlinked once opened.
const shellScript = `case $(head --version 2>/dev/null) in *GNU*) ;; *) exit 3;; esac
IFS= read -r m || exit 1
d=$(mktemp -d /run/pgtune-sh.XXXXXX 2>/dev/null) || d=$(mktemp -d) || exit 1
trap 'rm -rf -- "$d"' EXIT
trap 'exit 1' HUP INT TERM PIPE
end() { printf '\n%s %s\n' "$m" "$1"; printf '\n%s %s\n' "$m" "$1" >&2; }
end ready
while read -r c n; do
  a=$(head -c "$c") || exit 1
  if [ "$n" -gt 0 ]; then
    head -c "$n" > "$d/in" && exec 4< "$d/in" && rm -f -- "$d/in" || exit 1
  else
    exec 4< /dev/null
  fi
  IFS= read -r t && [ "$t" = . ] || exit 1
  eval "set -- $a"
  rm -f -- "$d/s"
  { { { ( exec "$@" ) <&4 4<&-; echo "$?" > "$d/s"; } | cat; } 2>&1 >&3 3>&- | cat >&2; } 3>&1
  exec 4<&-
  s=
  read -r s < "$d/s" || :
  end "${s:-255}"
done
`

// errShellUnavailable makes a Run fall back to a session of its own.
var errShellUnavailable = errors.New("privileged shell unavailable")

// shellQuoteAll quotes every argument for the privileged shell's eval:
// always single-quoted, so the result never depends on which characters
// are safe bare.
func shellQuoteAll(args []string) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("'" + strings.ReplaceAll(a, "'", `'\''`) + "'")
	}
	return b.String()
}

// shellRequest frames cmd for shellScript.
func shellRequest(cmd Command) []byte {
	a := shellQuoteAll(cmd.Args)
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d %d\n", len(a), len(cmd.Stdin))
	b.WriteString(a)
	b.Write(cmd.Stdin)
	b.WriteString(".\n")
	return b.Bytes()
}

// frame is one stream's share of a finished command.
type frame struct {
	data   []byte
	status string
}

// frameWriter splits one stream of the shell into frames at the marker.
// It is written by one goroutine (the session's copier).
type frameWriter struct {
	stream string
	mark   []byte // "\n" + marker + " "
	limit  atomic.Int64
	onOver func(stream string)
	frames chan frame
	stop   <-chan struct{}

	buf     bytes.Buffer
	scanned int  // bytes of buf known to hold no marker start
	over    bool // past the cap: discard until the shell is stopped
}

func newFrameWriter(stream, marker string, stop <-chan struct{}, onOver func(string)) *frameWriter {
	w := &frameWriter{stream: stream, mark: []byte("\n" + marker + " "), onOver: onOver,
		frames: make(chan frame, 2), stop: stop}
	w.limit.Store(MaxOutput())
	return w
}

func (w *frameWriter) Write(p []byte) (int, error) {
	if w.over {
		return len(p), nil
	}
	w.buf.Write(p)
	for {
		b := w.buf.Bytes()
		i := bytes.Index(b[w.scanned:], w.mark)
		if i < 0 {
			w.scanned = max(0, len(b)-len(w.mark)+1)
			if int64(w.scanned) > w.limit.Load() {
				w.over = true
				w.buf.Reset()
				w.onOver(w.stream)
			}
			return len(p), nil
		}
		start := w.scanned + i
		eol := bytes.IndexByte(b[start+len(w.mark):], '\n')
		if eol < 0 {
			w.scanned = start
			return len(p), nil
		}
		f := frame{data: append([]byte(nil), b[:start]...), status: string(b[start+len(w.mark) : start+len(w.mark)+eol])}
		if int64(len(f.data)) > w.limit.Load() {
			w.over = true
			w.buf.Reset()
			w.onOver(w.stream)
			return len(p), nil
		}
		rest := append([]byte(nil), b[start+len(w.mark)+eol+1:]...)
		w.buf.Reset()
		w.buf.Write(rest)
		w.scanned = 0
		select {
		case w.frames <- f:
		case <-w.stop:
			return len(p), nil
		}
	}
}

// shellStderr hands the shell's stderr to the PID capture (sudo's prompts,
// the wrapper's PID line) until the PID is known, then to the frames.
// Before the PID it keeps at most the output cap: a host that prints
// endlessly there trips the cap instead of filling the controller.
type shellStderr struct {
	pc      *pidCapture
	frames  *frameWriter
	started bool
	n       int64 // bytes before the PID line
	over    bool
}

func (w *shellStderr) Write(p []byte) (int, error) {
	if w.started {
		return w.frames.Write(p)
	}
	if w.over {
		return len(p), nil
	}
	w.n += int64(len(p))
	if w.n > w.frames.limit.Load() {
		w.over = true
		w.frames.onOver(w.frames.stream)
		return len(p), nil
	}
	w.pc.Write(p)
	if w.pc.PID() == 0 {
		return len(p), nil
	}
	w.started = true
	// What came with the PID line belongs to the first frame ("ready"),
	// which is dropped: sudo's noise, never a command's output.
	if _, err := w.frames.Write(w.pc.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// privShell is one running shellScript.
type privShell struct {
	s      *SSH
	rc     *remoteCmd
	stdin  io.WriteCloser
	last   *shellWrite // the latest write to stdin (see send)
	become bool        // started through sudo
	pid    int
	out    *frameWriter
	errs   *frameWriter

	stop     chan struct{} // closed when the shell is being torn down
	stopOnce sync.Once
	overOnce sync.Once
	overCh   chan struct{} // a stream went over the cap
	overIn   string        // which one; written before overCh closes
	ended    chan struct{} // the session ended (rc.done); rc.err says how
}

// shellWrite is one write to the shell's stdin, done from a goroutine of
// its own so that a host that reads nothing (its window stays full)
// never holds the controller: the waits on the shell are bounded, the
// write ends with the channel.
type shellWrite struct {
	done chan struct{}
	err  error
}

// send writes p to the shell's stdin after the writes sent before it, in
// order. Only the Run holding the shell (or its start) calls it.
func (sh *privShell) send(p []byte) *shellWrite {
	prev := sh.last
	w := &shellWrite{done: make(chan struct{})}
	sh.last = w
	go func() {
		defer close(w.done)
		if prev != nil {
			<-prev.done
			if prev.err != nil {
				w.err = prev.err
				return
			}
		}
		_, w.err = sh.stdin.Write(p)
	}()
	return w
}

// stopped reports whether the shell was stopped or ended: it never runs
// another command.
func (sh *privShell) stopped() bool {
	select {
	case <-sh.stop:
		return true
	case <-sh.ended:
		return true
	default:
		return false
	}
}

// shellFor returns the connection's privileged shell, starting it when
// there is none. errShellUnavailable: run the command in a session of its
// own. The caller holds s.shellBusy.
func (s *SSH) shellFor(ctx context.Context, cmd Command) (*privShell, error) {
	s.shellMu.Lock()
	sh, off := s.shell, s.shellOff
	s.shellMu.Unlock()
	if off {
		return nil, errShellUnavailable
	}
	if sh != nil {
		if !sh.stopped() {
			return sh, nil
		}
		// Stopped (cancelled, over the cap, killed, or ended by the
		// host): never reused, whether or not its session is gone yet.
		_ = sh.rc.Close()
		s.shellMu.Lock()
		if s.shell == sh {
			s.shell = nil
		}
		s.shellMu.Unlock()
	}
	sh, err := s.startShell(ctx, cmd)
	if err != nil {
		// Only a host where the shell cannot run turns it off; a start
		// that was cancelled, timed out or met a lost connection leaves
		// the next command to try again.
		if errors.Is(err, errShellUnavailable) {
			s.shellMu.Lock()
			s.shellOff = true
			s.shellMu.Unlock()
		}
		return nil, err
	}
	s.shellMu.Lock()
	defer s.shellMu.Unlock()
	select {
	case <-s.closed:
		sh.teardown()
		return nil, errTransportClosed
	default:
	}
	s.shell = sh
	return sh, nil
}

// startShell opens the session, gets through sudo (answering its prompt
// with the become password when there is one), hands the shell its marker
// and waits for its first frame. cmd names the Run that needed it, for
// errors. Opening the session and the exec request are each bounded by
// the connect timeout, and so is the rest of the start (sudo, the shell's
// first frame): a healthy host is through in well under a second, and the
// commands' own timeouts only start once the shell runs.
func (s *SSH) startShell(ctx context.Context, cmd Command) (*privShell, error) {
	become := s.user != "root"
	args := []string{"sh", "-c", shellScript, "sh"}
	line := remoteLine(args, become)
	var feed *becomeFeed
	if become && s.become != "" {
		feed = newBecomeFeed(s.become)
		line = feed.line(args)
	}
	nonce := make([]byte, 16)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	marker := "pgtune-end-" + hex.EncodeToString(nonce)

	rc, err := s.newCmd(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: privileged shell: %w", cmd, err)
	}
	sh := &privShell{s: s, rc: rc, stdin: rc.stdin(), become: become, stop: make(chan struct{}),
		overCh: make(chan struct{}), ended: rc.done}
	sh.out = newFrameWriter("stdout", marker, sh.stop, sh.tripOver)
	sh.errs = newFrameWriter("stderr", marker, sh.stop, sh.tripOver)
	pc := newPIDCapture()
	if feed != nil {
		feed.attachPipe(sh.stdin, pc)
	}
	if err := rc.start(ctx, line, sh.out, &shellStderr{pc: pc, frames: sh.errs}); err != nil {
		sh.stopOnce.Do(func() { close(sh.stop) })
		_ = rc.Close()
		return nil, fmt.Errorf("%s: privileged shell: start: %w", cmd, err)
	}
	sctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := sh.through(sctx, feed, pc); err != nil {
		sh.teardown()
		if serr := s.shellStartTimeout(ctx, sctx, cmd, "did not get through sudo"); serr != nil {
			return nil, serr
		}
		return nil, s.startError(cmd, sh, feed, pc, err)
	}
	sh.pid = pc.PID()
	sh.send([]byte(marker + "\n"))
	if _, _, err := sh.result(sctx); err != nil {
		if serr := s.shellStartTimeout(ctx, sctx, cmd, "was not ready"); serr != nil {
			return nil, serr
		}
		switch {
		case errors.Is(err, ErrOutputTooLarge):
			return nil, &OutputTooLargeError{Command: cmd.String(), Stream: sh.overIn, Limit: MaxOutput()}
		case sh.exited():
			// The shell itself refused this host (no GNU head, no
			// mktemp): sessions of their own still work there.
			return nil, errShellUnavailable
		}
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return sh, nil
}

// shellStartTimeout is the error of a start that ended with ctx (the
// caller's) or with sctx (the start's own bound), nil otherwise.
func (s *SSH) shellStartTimeout(ctx, sctx context.Context, cmd Command, what string) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", cmd, ctx.Err())
	case sctx.Err() != nil:
		return fmt.Errorf("%s: privileged shell on %s %s within %s: %w", cmd, s.addr, what, s.timeout, ErrNoResponse)
	}
	return nil
}

// errShellEnded says the shell's session ended before it was through sudo.
var errShellEnded = errors.New("ended")

// through waits until sudo let the shell run (the wrapper's PID line),
// answering sudo's prompt once with the become password.
func (sh *privShell) through(ctx context.Context, feed *becomeFeed, pc *pidCapture) error {
	var prompts chan struct{}
	if feed != nil {
		prompts = pc.prompts
	}
	asked := 0
	for {
		select {
		case <-pc.parsed:
			return nil
		case <-prompts:
			if pc.started() {
				// Never answer once the shell runs.
				return nil
			}
			asked++
			if asked > 1 {
				feed.wrong.Store(true)
				go sh.stdin.Close()
				continue // sudo gives up on the closed stdin
			}
			w := sh.send([]byte(feed.password + "\n"))
			go func() {
				<-w.done
				if w.err == nil {
					feed.answered.Store(true)
				}
			}()
		case <-sh.overCh:
			// Output before the shell even started (a sudo or sh that
			// streams forever): the cap ends the start as it ends a
			// command, instead of waiting for a PID line that never comes.
			return ErrOutputTooLarge
		case <-sh.ended:
			return errShellEnded
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// startError says why the shell did not start, as a Run of cmd would
// have: sudo's refusals are BecomeErrors; an exit for another reason
// leaves the command to a session of its own.
func (s *SSH) startError(cmd Command, sh *privShell, feed *becomeFeed, pc *pidCapture, err error) error {
	if errors.Is(err, ErrOutputTooLarge) {
		return &OutputTooLargeError{Command: cmd.String(), Stream: sh.overIn, Limit: MaxOutput()}
	}
	if !errors.Is(err, errShellEnded) {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	code := 0
	if err := sh.rc.err; err != nil {
		var exitErr *remoteExit
		if !errors.As(err, &exitErr) {
			return fmt.Errorf("%s: %w", cmd, s.lostErr(err))
		}
		code = exitErr.code
	}
	xe := &ExitError{Command: cmd.String(), Result: Result{Stderr: pc.Bytes(), ExitCode: code}}
	if feed != nil && feed.refused(xe.ExitCode) {
		return &BecomeError{User: s.user, Reason: "sudo: the become password was refused for user " + s.user +
			" (check ansible_become_password or what --ask-become-pass was given)", Exit: xe}
	}
	if berr := becomeError(xe, s.user); berr != nil {
		return berr
	}
	return errShellUnavailable
}

// exited reports whether the shell's session ended with an exit status
// (as opposed to a lost connection, or still running).
func (sh *privShell) exited() bool {
	select {
	case <-sh.ended:
		var exitErr *remoteExit
		return sh.rc.err == nil || errors.As(sh.rc.err, &exitErr)
	default:
		return false
	}
}

func (sh *privShell) tripOver(stream string) {
	sh.overOnce.Do(func() {
		sh.overIn = stream
		close(sh.overCh)
	})
}

// run sends cmd and waits for its frames on both streams.
func (sh *privShell) run(ctx context.Context, cmd Command) (Result, error) {
	limit := MaxOutput()
	sh.out.limit.Store(limit)
	sh.errs.limit.Store(limit)
	// A failed write shows as the session's end; one that never ends
	// leaves the wait to ctx.
	sh.send(shellRequest(cmd))
	out, errOut, err := sh.result(ctx)
	if errors.Is(err, ErrOutputTooLarge) {
		return Result{}, &OutputTooLargeError{Command: cmd.String(), Stream: sh.overIn, Limit: limit}
	}
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", cmd, err)
	}
	res := Result{Stdout: out.data, Stderr: errOut.data}
	code, err := strconv.Atoi(out.status)
	if err != nil || out.status != errOut.status {
		sh.teardown()
		return Result{}, fmt.Errorf("%s: privileged shell: malformed status %q/%q", cmd, out.status, errOut.status)
	}
	if code != 0 {
		res.ExitCode = code
		return res, &ExitError{Command: cmd.String(), Result: res}
	}
	return res, nil
}

// result waits for one frame of each stream. On cancel or over the cap,
// the shell (and the command in it) is stopped.
func (sh *privShell) result(ctx context.Context) (out, errOut *frame, err error) {
	for out == nil || errOut == nil {
		select {
		case f := <-sh.out.frames:
			out = &f
		case f := <-sh.errs.frames:
			errOut = &f
		case <-ctx.Done():
			sh.teardown()
			return nil, nil, ctx.Err()
		case <-sh.overCh:
			sh.teardown()
			return nil, nil, ErrOutputTooLarge
		case <-sh.ended:
			// Frames that arrived with the end still count.
			select {
			case f := <-sh.out.frames:
				out = &f
				continue
			case f := <-sh.errs.frames:
				errOut = &f
				continue
			default:
			}
			err := sh.rc.err
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return nil, nil, fmt.Errorf("privileged shell ended: %w", sh.s.lostErr(err))
		}
	}
	return out, errOut, nil
}

// teardown stops the shell and whatever command runs in it: the SSH
// signal, then the kill of its process group from a second session, then
// the channel close; bounded by killGrace.
func (sh *privShell) teardown() {
	sh.stopOnce.Do(func() { close(sh.stop) })
	select {
	case <-sh.ended:
		return
	default:
	}
	go sh.rc.signal(ssh.SIGTERM)
	deadline := time.Now().Add(killGrace)
	select {
	case <-sh.ended:
		return
	case <-time.After(100 * time.Millisecond):
	}
	if sh.pid > 0 {
		sh.s.killRemote(sh.pid, sh.become, deadline)
	}
	_ = sh.rc.Close()
	select {
	case <-sh.ended:
	case <-time.After(time.Until(deadline)):
	}
}

// closeShell ends the shell at Close: stdin closed, so it leaves its loop
// and removes its directory; bounded, the connection closes after it.
func (s *SSH) closeShell() {
	s.shellMu.Lock()
	sh := s.shell
	s.shell = nil
	s.shellMu.Unlock()
	if sh == nil {
		return
	}
	sh.stopOnce.Do(func() { close(sh.stop) })
	go sh.stdin.Close()
	select {
	case <-sh.ended:
	case <-time.After(time.Second):
	}
}

// runInShell runs cmd in the privileged shell; ok is false when the
// command must run in a session of its own (the shell is busy with
// another Run, or cannot be used on this host).
func (s *SSH) runInShell(ctx context.Context, cmd Command) (res Result, ok bool, err error) {
	select {
	case s.shellBusy <- struct{}{}:
		defer func() { <-s.shellBusy }()
	default:
		return Result{}, false, nil
	}
	sh, err := s.shellFor(ctx, cmd)
	if errors.Is(err, errShellUnavailable) {
		return Result{}, false, nil
	}
	if err != nil {
		return Result{}, true, err
	}
	res, err = sh.run(ctx, cmd)
	return res, true, err
}
