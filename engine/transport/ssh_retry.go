package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// Handshakes that fail transiently are tried again: sshd drops connections
// beyond MaxStartups before its banner, and a busy host may reset them.
// Authentication and host key failures are never retried.
var (
	dialAttempts    = 4
	dialBackoffBase = 300 * time.Millisecond
	dialBackoffMax  = 5 * time.Second
)

// transientError marks a connection failure that another attempt may not
// meet (connection reset, EOF before the handshake completed).
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// isTransientNetErr reports stream failures that a busy or throttling
// sshd causes: the peer closed or reset the connection mid-handshake.
func isTransientNetErr(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) ||
		strings.Contains(err.Error(), "connection reset by peer")
}

// dialEndpointRetry is dialEndpoint with bounded, jittered, exponential
// backoff between attempts that failed transiently. Waiting ends early
// when ctx does.
func dialEndpointRetry(ctx context.Context, via *ssh.Client, e *endpoint, timeout time.Duration, ag agent.ExtendedAgent) (*ssh.Client, error) {
	for attempt := 1; ; attempt++ {
		c, err := dialEndpoint(ctx, via, e, timeout, ag)
		var te *transientError
		if err == nil || !errors.As(err, &te) {
			return c, err
		}
		if attempt >= dialAttempts {
			return nil, fmt.Errorf("%w (gave up after %d attempts)", te.err, attempt)
		}
		if !sleepCtx(ctx, backoff(attempt)) {
			return nil, fmt.Errorf("%w (retry interrupted: %w)", te.err, ctx.Err())
		}
	}
}

// backoff is the wait after the given failed attempt: exponential, capped,
// with jitter so that hosts throttled together do not return together.
func backoff(attempt int) time.Duration {
	d := dialBackoffBase << (attempt - 1)
	if d > dialBackoffMax || d <= 0 {
		d = dialBackoffMax
	}
	return d/2 + rand.N(d/2+1)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
