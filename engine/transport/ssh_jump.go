package transport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// jumpPool shares jump-host connections across the targets behind them: a
// hundred hosts behind one bastion use one bastion connection, opened by
// the first of them and closed when the last one closes. Each hop of a
// chain is its own entry, holding a reference to the hop before it.
type jumpPool struct {
	mu      sync.Mutex
	entries map[string]*jumpEntry
}

var jumpHosts = &jumpPool{entries: map[string]*jumpEntry{}}

type jumpEntry struct {
	key    string
	ready  chan struct{} // closed once client or err is set
	client *ssh.Client
	err    error
	parent *jumpEntry // previous hop, nil for the first
	refs   int        // guarded by jumpPool.mu
}

// chainKey identifies a chain of hops by everything that decides how each
// is reached and authenticated, so only identical routes share.
func chainKey(chain []*endpoint) string {
	parts := make([]string, len(chain))
	for i, e := range chain {
		parts[i] = fmt.Sprintf("%#v", *e)
	}
	return strings.Join(parts, "\x00")
}

// acquire returns a connected client for the last hop of chain, dialling
// it (and the hops before it) unless another target already has. Every
// successful acquire is paired with a release.
func (p *jumpPool) acquire(ctx context.Context, chain []*endpoint, timeout time.Duration, ag agent.ExtendedAgent) (*jumpEntry, error) {
	for tries := 1; ; tries++ {
		e, err := p.acquireOnce(ctx, chain, timeout, ag)
		// A wait that ended because the dialling target gave up (its own
		// deadline) is not this caller's failure: try again (bounded).
		if err != nil && ctx.Err() == nil && tries < 3 && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
			continue
		}
		return e, err
	}
}

func (p *jumpPool) acquireOnce(ctx context.Context, chain []*endpoint, timeout time.Duration, ag agent.ExtendedAgent) (*jumpEntry, error) {
	key := chainKey(chain)
	p.mu.Lock()
	if e, ok := p.entries[key]; ok {
		e.refs++
		p.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			p.release(e)
			return nil, &jumpError{hop: chain[len(chain)-1].name, err: ctx.Err()}
		}
		if e.err != nil {
			p.release(e)
			return nil, e.err
		}
		return e, nil
	}
	e := &jumpEntry{key: key, ready: make(chan struct{}), refs: 1}
	p.entries[key] = e
	p.mu.Unlock()

	e.client, e.parent, e.err = p.dial(ctx, chain, timeout, ag)
	if e.err != nil {
		p.forget(e)
		close(e.ready)
		p.release(e)
		return nil, e.err
	}
	close(e.ready)
	// A jump connection that dies is not handed to later targets.
	go func() {
		_ = e.client.Wait()
		p.forget(e)
	}()
	return e, nil
}

// dial connects the last hop of chain, through the shared previous hop.
func (p *jumpPool) dial(ctx context.Context, chain []*endpoint, timeout time.Duration, ag agent.ExtendedAgent) (*ssh.Client, *jumpEntry, error) {
	hop := chain[len(chain)-1]
	var parent *jumpEntry
	var via *ssh.Client
	if len(chain) > 1 {
		var err error
		if parent, err = p.acquire(ctx, chain[:len(chain)-1], timeout, ag); err != nil {
			return nil, nil, err
		}
		via = parent.client
	}
	c, err := dialEndpointRetry(ctx, via, hop, timeout, ag)
	if err != nil {
		if parent != nil {
			p.release(parent)
		}
		return nil, nil, &jumpError{hop: hop.name, err: err}
	}
	return c, parent, nil
}

// jumpError is a jump host's own failure (its host key, its login, the
// connection to it), kept apart from the target's: "via jump host X: host
// key … changed" did not say which of the two refused. The entry's error
// is shared by every target behind the hop; DialSSH names its own target
// on a copy (forTarget).
type jumpError struct {
	hop    string // the hop as ProxyJump names it
	target string // the host it was on the way to; "" inside the pool
	err    error
}

func (e *jumpError) Error() string {
	if e.target == "" {
		return fmt.Sprintf("jump host %s: %v", e.hop, e.err)
	}
	return fmt.Sprintf("jump host %s (on the way to %s): %v", e.hop, e.target, e.err)
}

func (e *jumpError) Unwrap() error { return e.err }

// forTarget names the target in a jump host's failure.
func forTarget(err error, target string) error {
	var je *jumpError
	if !errors.As(err, &je) {
		return err
	}
	return &jumpError{hop: je.hop, target: target, err: je.err}
}

// viaError names the route in the target's own failure when it was
// reached through jump hosts or a proxy command: "db1 (via jump host
// bastion1): host key … CHANGED" is the target refusing, not the bastion.
func viaError(r *route, err error) error {
	switch {
	case len(r.jumps) > 0:
		hops := make([]string, len(r.jumps))
		for i, j := range r.jumps {
			hops[i] = j.name
		}
		return fmt.Errorf("%s (via jump host %s): %w", r.target.name, strings.Join(hops, ", then "), err)
	case r.target.proxyCommand != "":
		return fmt.Errorf("%s (via a proxy command): %w", r.target.name, err)
	}
	return err
}

// forget takes e out of the pool so the next target dials afresh; holders
// keep using (and releasing) it.
func (p *jumpPool) forget(e *jumpEntry) {
	p.mu.Lock()
	if p.entries[e.key] == e {
		delete(p.entries, e.key)
	}
	p.mu.Unlock()
}

// release drops one reference; the last one closes the connection and
// releases the hop before it.
func (p *jumpPool) release(e *jumpEntry) {
	p.mu.Lock()
	e.refs--
	last := e.refs == 0
	if last && p.entries[e.key] == e {
		delete(p.entries, e.key)
	}
	p.mu.Unlock()
	if !last || e.client == nil {
		return
	}
	e.client.Close()
	if e.parent != nil {
		p.release(e.parent)
	}
}
