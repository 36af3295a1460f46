package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/pgtune/pgtune/internal/mask"
)

// proxyStderrMax bounds how much of a ProxyCommand's stderr is kept for
// error messages.
const proxyStderrMax = 4 << 10

// proxyKillDelay is how long Close waits after SIGTERM before SIGKILL.
const proxyKillDelay = 3 * time.Second

// proxyConn is the stream to a host through a ProxyCommand run on this
// machine: writes go to its stdin, reads come from its stdout. Closing it
// ends the command (its whole process group).
type proxyConn struct {
	command string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stdout  io.ReadCloser
	stderr  *tailBuffer
	remote  net.Addr

	closeOnce sync.Once
	waitErr   error
}

// dialProxyCommand starts e.proxyCommand with /bin/sh, as ssh(1) does with
// the user's shell ("exec" so the shell does not linger).
func dialProxyCommand(ctx context.Context, e *endpoint) (*proxyConn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", "exec "+e.proxyCommand)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A grandchild holding stderr open must not keep Close waiting.
	cmd.WaitDelay = 2 * time.Second
	p := &proxyConn{command: e.proxyCommand, cmd: cmd, stderr: &tailBuffer{max: proxyStderrMax}}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("ProxyCommand: %w", err)
	}
	if p.stdout, err = cmd.StdoutPipe(); err != nil {
		return nil, fmt.Errorf("ProxyCommand: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("ProxyCommand %q: %w", e.proxyCommand, err)
	}
	// The known_hosts check wants a host:port; the name checked is the one
	// we pass to the handshake, this address is never used to connect.
	p.remote = &net.TCPAddr{IP: net.IPv4zero, Port: e.port}
	return p, nil
}

func (p *proxyConn) Read(b []byte) (int, error)  { return p.stdout.Read(b) }
func (p *proxyConn) Write(b []byte) (int, error) { return p.stdin.Write(b) }

// Close ends the command: stdin closed, then its process group killed
// (ssh(1) does not wait for a proxy to notice EOF either).
func (p *proxyConn) Close() error {
	p.closeOnce.Do(func() {
		p.stdin.Close()
		pgid := p.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case p.waitErr = <-done:
		case <-time.After(proxyKillDelay):
			// A proxy that ignores SIGTERM must not hang Close.
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			p.waitErr = <-done
		}
	})
	return nil
}

// failure describes why the command ended, for a handshake error; "" when
// it was still running when we closed it.
func (p *proxyConn) failure() string {
	p.Close()
	var ee *exec.ExitError
	if !errors.As(p.waitErr, &ee) || ee.Exited() == false {
		return ""
	}
	// The command is not shown (it may carry a secret: ncat's
	// --proxy-auth user:password), and its output is masked, the
	// command's own credentials first: a proxy may echo them.
	msg := fmt.Sprintf("ProxyCommand (not shown: it may carry a secret) exited with status %d", ee.ExitCode())
	if s := strings.TrimSpace(p.stderr.String()); s != "" {
		for _, secret := range mask.Secrets(p.command) {
			s = strings.ReplaceAll(s, secret, mask.Masked)
		}
		msg += ": " + strconv.Quote(mask.Text(s))
	}
	return msg
}

// permanent says the command could not run at all (not found, not
// executable): retrying cannot help.
func (p *proxyConn) permanent() bool {
	var ee *exec.ExitError
	return errors.As(p.waitErr, &ee) && ee.Exited() && (ee.ExitCode() == 126 || ee.ExitCode() == 127)
}

func (p *proxyConn) LocalAddr() net.Addr  { return &net.UnixAddr{Name: "proxycommand", Net: "unix"} }
func (p *proxyConn) RemoteAddr() net.Addr { return p.remote }

// Deadlines are not supported on pipes to a command; the handshake is
// bounded by closing the stream instead (see dialEndpoint).
func (p *proxyConn) SetDeadline(time.Time) error      { return nil }
func (p *proxyConn) SetReadDeadline(time.Time) error  { return nil }
func (p *proxyConn) SetWriteDeadline(time.Time) error { return nil }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// openStream opens the byte stream the SSH handshake runs on: a channel
// through the previous hop, the ProxyCommand's stdio, or TCP. proxy is
// set when a ProxyCommand was started, for error messages.
func openStream(ctx context.Context, via *ssh.Client, e *endpoint) (net.Conn, *proxyConn, error) {
	switch {
	case via != nil:
		c, err := via.DialContext(ctx, "tcp", e.hostPort())
		return c, nil, err
	case e.proxyCommand != "":
		p, err := dialProxyCommand(ctx, e)
		if err != nil {
			return nil, nil, err
		}
		return p, p, nil
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", e.hostPort())
	return c, nil, err
}

// handshakeError says why the handshake failed, naming the ProxyCommand
// when it exited, and marks failures another attempt may not meet.
func handshakeError(addr string, proxy *proxyConn, err error) error {
	wrapped := fmt.Errorf("ssh handshake with %s: %w", addr, err)
	if proxy != nil {
		if f := proxy.failure(); f != "" {
			wrapped = fmt.Errorf("ssh handshake with %s: %s: %w", addr, f, err)
		}
		if proxy.permanent() {
			return wrapped
		}
	}
	if isTransientNetErr(err) {
		return &transientError{wrapped}
	}
	return wrapped
}
