package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// A remote command runs in a session channel driven here rather than by
// x/crypto's ssh.Session, because a hostile or broken host can hold
// ssh.Session for ever in three places: NewSession waits for the channel's
// confirmation, Start waits for the reply to the exec request, and Wait
// returns only when the server closes the channel, however long after the
// command's exit status. Here the first two are bounded by the connect
// timeout (the host's SSH server answers them at once when it is healthy),
// and a command is over once its exit status came and both streams
// reached their end; a channel held open after the exit status (a process
// left behind with the command's stdout, or a server that never closes) is
// given up when no output arrived for the connect timeout.

// ErrNoResponse matches, with errors.Is, a host whose SSH server took a
// session request and did not answer it within the connect timeout.
var ErrNoResponse = errors.New("no response")

// errExitMissing: the channel closed without an exit status or signal,
// which sshd never does: its sshd child died or the connection dropped.
var errExitMissing = errors.New("session ended without an exit status")

// remoteExit is how a command ended: its exit status, or 128 + the signal
// number for a command killed by a signal.
type remoteExit struct {
	code   int
	signal string
}

func (e *remoteExit) Error() string {
	if e.signal != "" {
		return fmt.Sprintf("killed by signal %s (exit status %d)", e.signal, e.code)
	}
	return fmt.Sprintf("exit status %d", e.code)
}

// signalNumbers are the signals RFC 4254 names, by Linux number.
var signalNumbers = map[string]int{
	"ABRT": 6, "ALRM": 14, "FPE": 8, "HUP": 1, "ILL": 4, "INT": 2, "KILL": 9,
	"PIPE": 13, "QUIT": 3, "SEGV": 11, "TERM": 15, "USR1": 10, "USR2": 12,
}

// heldOpenError: the command exited but its session was not closed.
type heldOpenError struct {
	exit  *remoteExit
	addr  string
	after time.Duration
}

func (e *heldOpenError) Error() string {
	return fmt.Sprintf("%s, but %s kept the session open %s after it with no output (a process it left behind holds its stdout or stderr?)",
		e.exit, e.addr, e.after)
}

func (e *heldOpenError) Is(target error) bool { return target == ErrNoResponse }

// remoteCmd is one command in a session channel of its own.
type remoteCmd struct {
	s    *SSH
	ch   ssh.Channel
	reqs <-chan *ssh.Request

	exitOnce sync.Once
	exited   chan struct{} // closed on exit-status or exit-signal
	exit     *remoteExit   // set before exited is closed

	closed           chan struct{} // the server closed the channel
	outDone, errDone chan struct{} // stdout, stderr at their end
	progress         atomic.Int64  // bytes received on both streams

	done chan struct{} // the command is over; err says how
	err  error         // nil or *remoteExit for an exit status
}

// chanStdin is a channel's stdin: Close sends EOF.
type chanStdin struct{ ch ssh.Channel }

func (w chanStdin) Write(p []byte) (int, error) { return w.ch.Write(p) }
func (w chanStdin) Close() error                { return w.ch.CloseWrite() }

// stdin is the command's stdin; Close sends EOF. Writes block while the
// host reads nothing (its window is full): callers write from a goroutine
// of their own and never wait for it beyond a bound.
func (c *remoteCmd) stdin() io.WriteCloser { return chanStdin{c.ch} }

// feed writes data to the command's stdin and then closes it, from a
// goroutine of its own: a host that reads nothing must not hold the
// caller (the goroutine ends with the channel).
func (c *remoteCmd) feed(data []byte) {
	go func(in io.WriteCloser) {
		if len(data) > 0 {
			if _, err := in.Write(data); err != nil {
				return
			}
		}
		_ = in.Close()
	}(c.stdin())
}

// boundedWait waits for ch, at most the connect timeout and never past
// ctx, the transport's Close or the connection's loss.
func (s *SSH) boundedWait(ctx context.Context, ch <-chan struct{}, what string) error {
	t := time.NewTimer(s.timeout)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closed:
		return errTransportClosed
	case <-s.lost:
		return fmt.Errorf("%w to %s: no keepalive reply", ErrConnectionLost, s.addr)
	case <-t.C:
		return fmt.Errorf("%s did not answer the %s within %s: %w", s.addr, what, s.timeout, ErrNoResponse)
	}
}

// newCmd opens a session channel, bounded by ctx and the connect timeout.
// A channel confirmed after the caller gave up is closed.
func (s *SSH) newCmd(ctx context.Context) (*remoteCmd, error) {
	type opened struct {
		ch   ssh.Channel
		reqs <-chan *ssh.Request
		err  error
	}
	res := make(chan opened, 1)
	ready := make(chan struct{})
	go func() {
		ch, reqs, err := s.client.OpenChannel("session", nil)
		res <- opened{ch, reqs, err}
		close(ready)
	}()
	if err := s.boundedWait(ctx, ready, "request for a session"); err != nil {
		go func() {
			if o := <-res; o.err == nil {
				go ssh.DiscardRequests(o.reqs)
				o.ch.Close()
			}
		}()
		return nil, fmt.Errorf("open session: %w", err)
	}
	o := <-res
	if o.err != nil {
		return nil, fmt.Errorf("open session: %w", s.lostErr(o.err))
	}
	c := &remoteCmd{s: s, ch: o.ch, reqs: o.reqs,
		exited: make(chan struct{}), closed: make(chan struct{}),
		outDone: make(chan struct{}), errDone: make(chan struct{}), done: make(chan struct{})}
	go c.requests()
	return c, nil
}

// requests takes the server's requests on the channel: the exit status or
// signal is kept, anything asking for a reply is refused (as ssh.Session
// does), and the loop ends when the channel closes. Reading them keeps
// the connection going: unread, they would stall every channel on it.
func (c *remoteCmd) requests() {
	for req := range c.reqs {
		switch req.Type {
		case "exit-status":
			if len(req.Payload) >= 4 {
				code := int(uint32(req.Payload[0])<<24 | uint32(req.Payload[1])<<16 | uint32(req.Payload[2])<<8 | uint32(req.Payload[3]))
				c.setExit(&remoteExit{code: code})
			}
		case "exit-signal":
			var sig struct {
				Signal     string
				CoreDumped bool
				Error      string
				Lang       string
			}
			if ssh.Unmarshal(req.Payload, &sig) == nil {
				code := 128
				if n, ok := signalNumbers[sig.Signal]; ok {
					code += n
				}
				c.setExit(&remoteExit{code: code, signal: sig.Signal})
			}
		}
		if req.WantReply {
			_ = req.Reply(false, nil)
		}
	}
	close(c.closed)
}

func (c *remoteCmd) setExit(e *remoteExit) {
	c.exitOnce.Do(func() {
		c.exit = e
		close(c.exited)
	})
}

// progressWriter counts what a stream delivers.
type progressWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (p progressWriter) Write(b []byte) (int, error) {
	p.n.Add(int64(len(b)))
	return p.w.Write(b)
}

// start sends the exec request for line, bounded by ctx and the connect
// timeout, with stdout and stderr copied to the writers (which must keep
// taking data: a stream left unread stalls the connection's other
// channels).
func (c *remoteCmd) start(ctx context.Context, line string, stdout, stderr io.Writer) error {
	go func() {
		defer close(c.outDone)
		_, _ = io.Copy(progressWriter{stdout, &c.progress}, c.ch)
	}()
	go func() {
		defer close(c.errDone)
		_, _ = io.Copy(progressWriter{stderr, &c.progress}, c.ch.Stderr())
	}()
	var ok bool
	var err error
	replied := make(chan struct{})
	go func() {
		ok, err = c.ch.SendRequest("exec", true, ssh.Marshal(&struct{ Command string }{line}))
		close(replied)
	}()
	if werr := c.s.boundedWait(ctx, replied, "exec request"); werr != nil {
		c.Close()
		return werr
	}
	if err == nil && !ok {
		err = errors.New("the server refused the exec request")
	}
	if err != nil {
		c.Close()
		return c.s.lostErr(err)
	}
	go c.wait()
	return nil
}

// wait decides when the command is over: its exit status came and both
// streams ended, or the channel closed. After the exit status, the
// channel may stay open only while output keeps arriving.
func (c *remoteCmd) wait() {
	defer close(c.done)
	select {
	case <-c.closed:
		<-c.outDone
		<-c.errDone
	case <-c.exited:
		if err := c.drain(); err != nil {
			c.err = err
			return
		}
	}
	select {
	case <-c.exited:
		if c.exit.code != 0 || c.exit.signal != "" {
			c.err = c.exit
		}
	default:
		c.err = errExitMissing
	}
}

// drain waits, after the exit status, for the end of both streams (or the
// channel's close); it gives up after the connect timeout without output.
func (c *remoteCmd) drain() error {
	bothDone := make(chan struct{})
	go func() {
		<-c.outDone
		<-c.errDone
		close(bothDone)
	}()
	seen := c.progress.Load()
	t := time.NewTimer(c.s.timeout)
	defer t.Stop()
	for {
		select {
		case <-bothDone:
			return nil
		case <-c.closed:
			<-bothDone
			return nil
		case <-t.C:
			if now := c.progress.Load(); now != seen {
				seen = now
				t.Reset(c.s.timeout)
				continue
			}
			// The copiers end when Close's reply closes the channel.
			return &heldOpenError{exit: c.exit, addr: c.s.addr, after: c.s.timeout}
		}
	}
}

// signal asks the server to signal the command; it does not wait for an
// answer.
func (c *remoteCmd) signal(sig ssh.Signal) {
	_, _ = c.ch.SendRequest("signal", false, ssh.Marshal(&struct{ Signal string }{string(sig)}))
}

// Close closes the channel, from a goroutine of its own: the close is a
// write on the connection like any other, and a host that stopped reading
// (its TCP window shut) must not hold the caller; the keepalive ends such a
// connection, and the goroutine with it. Safe to call more than once.
func (c *remoteCmd) Close() error {
	go c.ch.Close()
	return nil
}
