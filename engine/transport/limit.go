package transport

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
)

// DefaultMaxOutput is how much one command may print on stdout, and
// separately on stderr, before it is stopped. pgtune's commands print
// configuration files and /proc summaries: kilobytes. The cap is what keeps
// a host that streams endlessly from filling the controller's memory.
const DefaultMaxOutput = 16 << 20

var maxOutput atomic.Int64

func init() { maxOutput.Store(DefaultMaxOutput) }

// MaxOutput returns the current per-stream output cap in bytes.
func MaxOutput() int64 { return maxOutput.Load() }

// SetMaxOutput changes the cap for Runs started from now on and returns
// the previous value (tests lower it and put it back).
func SetMaxOutput(n int64) (previous int64) {
	if n <= 0 {
		panic("transport: output cap must be positive")
	}
	return maxOutput.Swap(n)
}

// ErrOutputTooLarge matches, with errors.Is, a Run stopped because the
// command printed more than the cap.
var ErrOutputTooLarge = errors.New("output too large")

// OutputTooLargeError says which command overran which stream's cap. The
// command was stopped and its output dropped.
type OutputTooLargeError struct {
	Command string
	Stream  string // "stdout" or "stderr"
	Limit   int64
}

func (e *OutputTooLargeError) Error() string {
	return fmt.Sprintf("%s: %s: more than %s of output, over the cap; the command was stopped",
		e.Command, e.Stream, formatLimit(e.Limit))
}

func (e *OutputTooLargeError) Is(target error) bool { return target == ErrOutputTooLarge }

func formatLimit(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// errCapped is what a capped writer returns once over the cap unless it
// drains: the copier feeding it stops reading, and the local pipe's
// writers get EPIPE instead of being drained forever.
var errCapped = errors.New("output cap reached")

// outputLimit caps a command's stdout and stderr, each at limit bytes. The
// first stream over it records itself and closes over, then the caller
// stops the command.
type outputLimit struct {
	limit  int64
	once   sync.Once
	over   chan struct{}
	stream string // written before over is closed
	onOver func() // optional, called once when the cap is hit
	// drain makes writers past the cap discard instead of failing: sshd
	// sends a command's exit status only after its output went through,
	// so the channel must keep being read until the kill lands.
	drain bool
}

func newOutputLimit(limit int64) *outputLimit {
	return &outputLimit{limit: limit, over: make(chan struct{})}
}

// writer wraps w (which sees at most limit bytes) for one stream.
func (l *outputLimit) writer(stream string, w io.Writer) io.Writer {
	return &cappedWriter{l: l, stream: stream, w: w}
}

func (l *outputLimit) trip(stream string) {
	l.once.Do(func() {
		l.stream = stream
		close(l.over)
		if l.onOver != nil {
			l.onOver()
		}
	})
}

// exceeded reports whether a stream went over the cap.
func (l *outputLimit) exceeded() bool {
	select {
	case <-l.over:
		return true
	default:
		return false
	}
}

// err is the error for a Run that went over the cap; call it only when
// exceeded.
func (l *outputLimit) err(cmd Command) error {
	return &OutputTooLargeError{Command: cmd.String(), Stream: l.stream, Limit: l.limit}
}

// cappedWriter is used by one copying goroutine, so its count needs no
// lock.
type cappedWriter struct {
	l      *outputLimit
	stream string
	w      io.Writer
	n      int64
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	room := c.l.limit - c.n
	if int64(len(p)) <= room {
		c.n += int64(len(p))
		return c.w.Write(p)
	}
	if room > 0 {
		c.n += room
		_, _ = c.w.Write(p[:room])
	}
	c.l.trip(c.stream)
	if c.l.drain {
		return len(p), nil
	}
	return int(max(room, 0)), errCapped
}
