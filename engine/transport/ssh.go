package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/melbahja/goph"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// SSHConfig says how to reach one host. Empty fields take their value from
// the ssh_config file (ConfigFile), then from OpenSSH's defaults.
type SSHConfig struct {
	Name           string        // inventory host name (messages; ssh_config lookups when Address is empty)
	Address        string        // ansible_host: the name ssh_config is evaluated for, as `ssh ADDRESS` (its HostName still applies); default Name
	Port           int           // default 22 (or ssh_config Port)
	User           string        // default: ssh_config User, else current user
	PrivateKeyFile string        // plus ssh_config IdentityFile; plus the SSH agent (SSH_AUTH_SOCK) when present
	KnownHostsFile string        // default ~/.ssh/known_hosts (or ssh_config UserKnownHostsFile)
	HostKeyPolicy  string        // "strict" (default) or "accept-new"; a changed key is always refused
	ConfigFile     string        // ssh_config file (e.g. `vagrant ssh-config` output)
	ConnectTimeout time.Duration // default 10s (or ssh_config ConnectTimeout)
	// ProxyJump is "[user@]host[:port][,...]", dialled in order; default
	// ssh_config ProxyJump. Each hop is looked up in ConfigFile as well.
	ProxyJump string
	// ProxyCommand is run with /bin/sh and its stdio is the connection
	// (tokens %h %p %r %n expanded); it wins over the ssh_config's
	// ProxyJump and ProxyCommand, as `ssh -o ProxyCommand=…` does.
	ProxyCommand string
	// Password is tried after the keys (password and keyboard-interactive
	// authentication) on the target, never on jump hosts.
	Password string
	// BecomePassword is given to `sudo -S` on its stdin when sudo asks
	// for it (see ssh_become.go); never on a command line.
	BecomePassword string
	// PrivilegedShell runs privileged commands (Become, or every command
	// of a root login) one after the other in one remote shell started on
	// first use: one sudo per connection instead of one session, login
	// shell and sudo per command (see ssh_shell.go). A command that finds
	// the shell busy gets a session of its own, as without it.
	PrivilegedShell bool
}

// Errors a caller can test with errors.Is to tell why a host failed.
var (
	ErrUnknownHostKey  = errors.New("unknown host key")
	ErrChangedHostKey  = errors.New("host key changed")
	ErrAuthFailed      = errors.New("authentication failed")
	ErrConnectionLost  = errors.New("connection lost")
	ErrBecomePassword  = errors.New("become needs passwordless sudo")
	errTransportClosed = errors.New("ssh transport closed")
)

// maxSessions bounds concurrent sessions on one connection: OpenSSH's
// MaxSessions defaults to 10 and refuses the channel beyond it; half is
// kept free for the kill sessions that cancelled commands need.
const maxSessions = 5

// Keepalives detect a dead peer during a long run: after keepaliveMissed
// unanswered probes the connection is closed and every pending Run fails
// instead of waiting for TCP to give up.
var (
	keepaliveInterval = 30 * time.Second
	keepaliveMissed   = 3
)

// SSH is a Transport over one SSH connection (possibly through jump hosts).
// Every Run opens its own session on that connection, so Runs may be
// concurrent.
type SSH struct {
	name string
	user string
	addr string
	// timeout is the connect timeout; it also bounds each wait on the
	// host's SSH server itself (see ssh_session.go).
	timeout time.Duration
	client  *goph.Client
	jump    *jumpEntry // shared connection to the last jump host, if any
	become  becomeSecret
	sem     chan struct{}

	privShell bool          // SSHConfig.PrivilegedShell
	shellBusy chan struct{} // held by the Run using the shell
	shellMu   sync.Mutex    // guards shell and shellOff
	shell     *privShell
	shellOff  bool // the shell cannot run on this host

	closeOnce sync.Once
	closed    chan struct{}
	lost      chan struct{} // closed by the keepalive when the peer is gone
	lostOnce  sync.Once
	wg        sync.WaitGroup
}

// DialSSH connects and authenticates to the host described by cfg. The
// connection lives until Close.
func DialSSH(ctx context.Context, cfg SSHConfig) (*SSH, error) {
	sock := os.Getenv("SSH_AUTH_SOCK")
	r, err := resolve(cfg, currentIdentity(), sock != "")
	if err != nil {
		return nil, err
	}

	// The agent connection is only needed while authenticating.
	var ag agent.ExtendedAgent
	if sock != "" {
		if c, err := net.Dial("unix", sock); err == nil {
			defer c.Close()
			ag = agent.NewClient(c)
		}
	}

	var jump *jumpEntry
	var via *ssh.Client
	if len(r.jumps) > 0 {
		if jump, err = jumpHosts.acquire(ctx, r.jumps, r.timeout, ag); err != nil {
			return nil, forTarget(err, r.target.name)
		}
		via = jump.client
	}
	r.target.password = cfg.Password
	target, err := dialEndpointRetry(ctx, via, r.target, r.timeout, ag)
	if err != nil {
		if jump != nil {
			jumpHosts.release(jump)
		}
		return nil, viaError(r, err)
	}
	s := &SSH{
		name:    r.target.name,
		user:    r.target.user,
		addr:    r.target.hostPort(),
		timeout: r.timeout,
		client: &goph.Client{Client: target, Config: &goph.Config{
			User: r.target.user, Addr: r.target.host, Port: uint(r.target.port), Timeout: r.timeout,
		}},
		jump:   jump,
		become: becomeSecret(cfg.BecomePassword),
		sem:    make(chan struct{}, maxSessions),
		closed: make(chan struct{}),
		lost:   make(chan struct{}),

		privShell: cfg.PrivilegedShell,
		shellBusy: make(chan struct{}, 1),
	}
	s.wg.Add(1)
	go s.keepalive()
	return s, nil
}

// dialEndpoint opens the TCP stream (directly, or through the previous
// hop) and runs the SSH handshake on it, bounded by timeout and ctx.
func dialEndpoint(ctx context.Context, via *ssh.Client, e *endpoint, timeout time.Duration, ag agent.ExtendedAgent) (*ssh.Client, error) {
	addr := e.hostPort()
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	conn, proxy, err := openStream(hctx, via, e)
	if err != nil {
		if proxy == nil && isTransientNetErr(err) && hctx.Err() == nil {
			return nil, &transientError{connectError(ctx, hctx, addr, timeout, err)}
		}
		return nil, connectError(ctx, hctx, addr, timeout, err)
	}

	hk, err := newHostKeyChecker(e)
	if err != nil {
		conn.Close()
		return nil, err
	}
	signers, keyNotes := loadSigners(e.keyFiles)
	auth := []ssh.AuthMethod{ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
		out := append([]ssh.Signer(nil), signers...)
		if e.agent && ag != nil {
			if as, err := ag.Signers(); err == nil {
				out = append(out, as...)
			}
		}
		return out, nil
	})}
	auth = append(auth, passwordAuth(e.password)...)
	algos, recorded := hk.algorithms()
	config := &ssh.ClientConfig{
		User:              e.user,
		Auth:              auth,
		HostKeyCallback:   hk.callback,
		HostKeyAlgorithms: algos,
		Timeout:           timeout,
	}

	// The handshake has no context of its own: closing the stream when
	// the deadline passes or ctx ends unblocks it, on direct TCP and on
	// jump channels alike (which do not support deadlines).
	stop := context.AfterFunc(hctx, func() { conn.Close() })
	c, chans, reqs, err := ssh.NewClientConn(conn, e.knownHostsName(), config)
	interrupted := !stop()
	if err != nil {
		conn.Close()
		switch {
		case hk.err != nil:
			return nil, hk.err
		case strings.Contains(err.Error(), "no common algorithm for host key") && recorded:
			return nil, &hostKeyError{kind: ErrChangedHostKey, msg: fmt.Sprintf(
				"host key for %s CHANGED: the server offers none of the key types recorded in %s (%s); possible man-in-the-middle, refusing to connect",
				addr, strings.Join(hk.files, ", "), strings.Join(config.HostKeyAlgorithms, ", "))}
		case interrupted:
			return nil, connectError(ctx, hctx, addr, timeout, err)
		case isAuthError(err):
			if e.password != "" {
				keyNotes = append(keyNotes, "a password")
			}
			return nil, authError(e, keyNotes, ag != nil && e.agent)
		}
		return nil, handshakeError(addr, proxy, err)
	}
	if interrupted {
		c.Close()
		return nil, connectError(ctx, hctx, addr, timeout, context.DeadlineExceeded)
	}
	return ssh.NewClient(c, chans, reqs), nil
}

// connectError says plainly whether the caller gave up, the deadline
// passed, or the network refused.
func connectError(ctx, hctx context.Context, addr string, timeout time.Duration, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("connect to %s: %w", addr, ctx.Err())
	case hctx.Err() != nil || errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("connect to %s: timed out after %s", addr, timeout)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("connect to %s: connection refused", addr)
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return fmt.Errorf("connect to %s: host unreachable", addr)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return fmt.Errorf("connect to %s: cannot resolve %s: %s", addr, dnsErr.Name, dnsErr.Err)
	}
	return fmt.Errorf("connect to %s: %w", addr, err)
}

func isAuthError(err error) bool {
	return strings.Contains(err.Error(), "unable to authenticate") ||
		strings.Contains(err.Error(), "no supported methods remain")
}

func authError(e *endpoint, notes []string, agent bool) error {
	var tried []string
	tried = append(tried, notes...)
	if agent {
		tried = append(tried, "ssh-agent keys")
	}
	if len(tried) == 0 {
		tried = []string{"no keys: set ssh_private_key_file or load a key into ssh-agent"}
	}
	return fmt.Errorf("%w for user %s at %s (tried %s)", ErrAuthFailed, e.user, e.hostPort(), strings.Join(tried, ", "))
}

// loadSigners reads the key files; a missing or unusable key is noted
// (for the authentication-failure message) rather than fatal, since
// another key or the agent may still work.
func loadSigners(files []string) ([]ssh.Signer, []string) {
	var signers []ssh.Signer
	var notes []string
	for _, f := range files {
		s, err := goph.GetSigner(f, "")
		var pm *ssh.PassphraseMissingError
		switch {
		case err == nil:
			signers = append(signers, s)
			notes = append(notes, f)
		case errors.As(err, &pm):
			notes = append(notes, f+" (passphrase-protected: load it into ssh-agent)")
		case errors.Is(err, os.ErrNotExist):
			notes = append(notes, f+" (missing)")
		default:
			notes = append(notes, fmt.Sprintf("%s (unusable: %v)", f, err))
		}
	}
	return signers, notes
}

// Run executes cmd in a new session on the shared connection. The argument
// vector is quoted into one shell word list (the remote sshd hands it to
// the login shell); become prefixes `sudo -n --` unless we log in as root.
func (s *SSH) Run(ctx context.Context, cmd Command) (Result, error) {
	if len(cmd.Args) == 0 {
		return Result{}, errors.New("empty command")
	}
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("%s: %w", cmd, err)
	}
	if s.privShell && (cmd.Become || s.user == "root") {
		if res, ok, err := s.runInShell(ctx, cmd); ok {
			return res, err
		}
	}
	become := cmd.Become && s.user != "root"
	line := remoteLine(cmd.Args, become)
	var feed *becomeFeed
	if become && s.become != "" {
		feed = newBecomeFeed(s.become)
		line = feed.line(cmd.Args)
	}

	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		return Result{}, fmt.Errorf("%s: %w", cmd, ctx.Err())
	case <-s.closed:
		return Result{}, fmt.Errorf("%s: %w", cmd, errTransportClosed)
	}

	rc, err := s.newCmd(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", cmd, err)
	}
	defer rc.Close()

	var stdout bytes.Buffer
	stderr := newPIDCapture()
	lim := newOutputLimit(MaxOutput())
	lim.drain = true
	if feed != nil {
		feed.attachPipe(rc.stdin(), stderr)
	}
	if err := rc.start(ctx, line, lim.writer("stdout", &stdout), lim.writer("stderr", stderr)); err != nil {
		return Result{}, fmt.Errorf("%s: start: %w", cmd, err)
	}
	if feed != nil {
		stopFeed := feed.run(cmd.Stdin)
		defer stopFeed()
	} else {
		rc.feed(cmd.Stdin)
	}

	select {
	case <-rc.done:
		err = rc.err
	case <-ctx.Done():
		s.abort(rc, stderr, become)
		return Result{}, fmt.Errorf("%s: %w", cmd, ctx.Err())
	case <-lim.over:
		s.abort(rc, stderr, become)
	}
	if lim.exceeded() {
		return Result{}, lim.err(cmd)
	}
	var held *heldOpenError
	if errors.As(err, &held) {
		// Its streams never ended: their copiers may still be writing.
		return Result{}, fmt.Errorf("%s: %w", cmd, err)
	}

	res := Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes()}
	var exitErr *remoteExit
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &exitErr):
		res.ExitCode = exitErr.code
		xe := &ExitError{Command: cmd.String(), Result: res}
		if feed != nil && feed.refused(res.ExitCode) {
			return res, &BecomeError{User: s.user, Reason: "sudo: the become password was refused for user " + s.user +
				" (check ansible_become_password or what --ask-become-pass was given)", Exit: xe}
		}
		if become {
			if berr := becomeError(xe, s.user); berr != nil {
				return res, berr
			}
		}
		return res, xe
	default:
		return res, fmt.Errorf("%s: %w", cmd, s.lostErr(err))
	}
}

// lostErr classifies a session failure: after Close, or once the peer is
// gone, it is reported as ErrConnectionLost so callers can mark the host
// unreachable.
func (s *SSH) lostErr(err error) error {
	select {
	case <-s.closed:
		return fmt.Errorf("%w (%v)", errTransportClosed, err)
	case <-s.lost:
		return fmt.Errorf("%w to %s: no keepalive reply (%v)", ErrConnectionLost, s.addr, err)
	default:
	}
	// sshd always ends a command's channel with exit-status or
	// exit-signal; a channel closed without either means the sshd serving
	// it died or the connection dropped under it.
	if errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, errExitMissing) || strings.Contains(err.Error(), "EOF") {
		return fmt.Errorf("%w to %s: %v", ErrConnectionLost, s.addr, err)
	}
	return err
}

// becomeError turns sudo's refusals into messages that say what to fix.
func becomeError(xe *ExitError, user string) error {
	msg := string(xe.Stderr)
	switch {
	case xe.ExitCode == 1 && (strings.Contains(msg, "sudo: a password is required") ||
		strings.Contains(msg, "sudo: a terminal is required")):
		return &BecomeError{User: user, Reason: "sudo: a password is required (become needs passwordless sudo for user " + user + ")", Exit: xe}
	case xe.ExitCode == 1 && strings.Contains(msg, "is not in the sudoers file"):
		return &BecomeError{User: user, Reason: "sudo: user " + user + " is not in the sudoers file (become needs passwordless sudo for user " + user + ")", Exit: xe}
	case xe.ExitCode == 127 && strings.Contains(msg, "sudo") && strings.Contains(msg, "not found"):
		return &BecomeError{User: user, Reason: "sudo is not installed on the host (become needs passwordless sudo for user " + user + ")", Exit: xe}
	}
	return nil
}

// BecomeError reports that privilege escalation itself failed, as opposed
// to the command failing. It matches ErrBecomePassword and the
// underlying *ExitError.
type BecomeError struct {
	User   string
	Reason string
	Exit   *ExitError
}

func (e *BecomeError) Error() string   { return e.Reason }
func (e *BecomeError) Unwrap() []error { return []error{ErrBecomePassword, e.Exit} }

func (s *SSH) keepalive() {
	defer s.wg.Done()
	t := time.NewTicker(keepaliveInterval)
	defer t.Stop()
	missed := 0
	reply := make(chan error, 1)
	pending := false
	for {
		select {
		case <-s.closed:
			return
		case err := <-reply:
			pending = false
			if err != nil {
				s.markLost()
				return
			}
			missed = 0
		case <-t.C:
			if pending {
				missed++
				if missed >= keepaliveMissed {
					s.markLost()
					return
				}
				continue
			}
			pending = true
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				_, _, err := s.client.SendRequest("keepalive@openssh.com", true, nil)
				reply <- err // buffered: never blocks, at most one probe in flight
			}()
		}
	}
}

// markLost closes the connection so that blocked sessions return.
func (s *SSH) markLost() {
	s.lostOnce.Do(func() {
		close(s.lost)
		s.client.Close()
	})
}

// Close ends the connection and every session on it. Safe to call more
// than once.
func (s *SSH) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closeShell()
		close(s.closed)
		err = s.client.Close()
		s.wg.Wait()
		if s.jump != nil {
			jumpHosts.release(s.jump)
		}
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
	})
	return err
}

// String names the connection for logs: user@host:port.
func (s *SSH) String() string { return s.user + "@" + s.addr }
