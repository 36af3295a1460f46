package transport

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	gliderssh "github.com/gliderlabs/ssh"
	"github.com/skeema/knownhosts"
	gossh "golang.org/x/crypto/ssh"
)

// testServer is an in-process SSH server that runs each received command
// with `sh -c` on this machine, honouring stdin, exit status and signals.
type testServer struct {
	Addr string
	Port int

	srv      *gliderssh.Server
	hostKeys map[string]gossh.Signer // by key type
	hostCA   gossh.PublicKey         // withHostCert's authority

	conns    atomic.Int32 // TCP connections accepted
	forwards atomic.Int32 // direct-tcpip channels (jump host use)
	running  atomic.Int32
	peak     atomic.Int32 // most commands running at once

	mu       sync.Mutex
	commands []string // raw command lines received, in order
	signals  []string
	env      []string // extra environment for commands (e.g. PATH with a fake sudo)
	// changed is closed (and replaced) on every event a test may wait
	// for: a signal received, a command finished.
	changed chan struct{}

	// ignoreSignals records signals without acting on them, as OpenSSH
	// does for root logins.
	ignoreSignals bool
}

// ignoringSignals makes the server behave like OpenSSH for root.
func ignoringSignals() serverOption {
	return func(_ testing.TB, s *testServer) { s.ignoreSignals = true }
}

type keyType string

const (
	keyEd25519 keyType = "ed25519"
	keyECDSA   keyType = "ecdsa"
	keyRSA     keyType = "rsa"
)

// newKey makes a private key and its signer.
func newKey(t testing.TB, typ keyType) (any, gossh.Signer) {
	t.Helper()
	var priv any
	var err error
	switch typ {
	case keyEd25519:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	case keyECDSA:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case keyRSA:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	}
	if err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return priv, signer
}

// clientKey writes a fresh ed25519 private key file and returns its path
// and public key.
func clientKey(t testing.TB) (string, gossh.PublicKey) {
	t.Helper()
	priv, signer := newKey(t, keyEd25519)
	block, err := gossh.MarshalPrivateKey(priv, "test")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, signer.PublicKey()
}

type serverOption func(testing.TB, *testServer)

// withHostKeys replaces the default ed25519 host key.
func withHostKeys(types ...keyType) serverOption {
	return func(t testing.TB, s *testServer) {
		s.hostKeys = map[string]gossh.Signer{}
		for _, typ := range types {
			_, sig := newKey(t, typ)
			s.hostKeys[string(typ)] = sig
		}
	}
}

// withHostCert adds a certificate for the ed25519 host key, signed by a
// CA of its own, as a fleet with an SSH CA presents (sshd's
// HostCertificate): a client offering certificate types gets it first.
func withHostCert() serverOption {
	return func(t testing.TB, s *testServer) {
		_, ca := newKey(t, keyEd25519)
		host := s.hostKeys[string(keyEd25519)]
		cert := &gossh.Certificate{Key: host.PublicKey(), CertType: gossh.HostCert, KeyId: "test host",
			ValidPrincipals: []string{"127.0.0.1"}, ValidBefore: gossh.CertTimeInfinity}
		if err := cert.SignCert(rand.Reader, ca); err != nil {
			t.Fatal(err)
		}
		signer, err := gossh.NewCertSigner(cert, host)
		if err != nil {
			t.Fatal(err)
		}
		s.hostKeys["cert"] = signer
		s.hostCA = ca.PublicKey()
	}
}

// asJumpHost lets the server forward TCP (direct-tcpip), as a bastion does.
func asJumpHost() serverOption {
	return func(_ testing.TB, s *testServer) {
		s.srv.LocalPortForwardingCallback = func(ctx gliderssh.Context, host string, port uint32) bool {
			s.forwards.Add(1)
			return true
		}
		s.srv.ChannelHandlers = map[string]gliderssh.ChannelHandler{
			"session":      gliderssh.DefaultSessionHandler,
			"direct-tcpip": gliderssh.DirectTCPIPHandler,
		}
	}
}

// newTestServer starts a server accepting the given client keys for any user.
func newTestServer(t testing.TB, authorized []gossh.PublicKey, opts ...serverOption) *testServer {
	t.Helper()
	s := &testServer{changed: make(chan struct{})}
	_, sig := newKey(t, keyEd25519)
	s.hostKeys = map[string]gossh.Signer{string(keyEd25519): sig}
	s.srv = &gliderssh.Server{
		Handler: s.handle,
		PublicKeyHandler: func(ctx gliderssh.Context, key gliderssh.PublicKey) bool {
			for _, a := range authorized {
				if gliderssh.KeysEqual(key, a) {
					return true
				}
			}
			return false
		},
		ConnCallback: func(ctx gliderssh.Context, conn net.Conn) net.Conn {
			s.conns.Add(1)
			return conn
		},
	}
	for _, o := range opts {
		o(t, s)
	}
	for _, k := range s.hostKeys {
		s.srv.AddHostKey(k)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.Addr = ln.Addr().String()
	s.Port = ln.Addr().(*net.TCPAddr).Port
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = s.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		s.srv.Close()
		<-served
	})
	return s
}

func (s *testServer) hostKey(typ keyType) gossh.PublicKey { return s.hostKeys[string(typ)].PublicKey() }

// knownHostsLine is the line OpenSSH would record for this server.
func (s *testServer) knownHostsLine(typ keyType) string {
	return knownhosts.Line([]string{s.Addr}, s.hostKey(typ))
}

func (s *testServer) Commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.commands...)
}

func (s *testServer) Signals() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.signals...)
}

var signalsByName = map[gliderssh.Signal]syscall.Signal{
	gliderssh.SIGTERM: syscall.SIGTERM, gliderssh.SIGKILL: syscall.SIGKILL,
	gliderssh.SIGINT: syscall.SIGINT, gliderssh.SIGHUP: syscall.SIGHUP,
}

// notify wakes every await.
func (s *testServer) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.changed)
	s.changed = make(chan struct{})
}

// await blocks until cond holds, re-checking it on each server event (no
// polling); hangGuard only stops a test that would block forever.
func (s *testServer) await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-time.After(hangGuard):
			t.Fatalf("still waiting for %s after %v", what, hangGuard)
		}
	}
}

func (s *testServer) handle(sess gliderssh.Session) {
	n := s.running.Add(1)
	// A session stops counting before its exit status is sent: the client
	// may open its next session as soon as it has that status, before
	// this handler returns, and must not be seen as one too many.
	var once sync.Once
	stopCounting := func() { once.Do(func() { s.running.Add(-1) }) }
	defer func() {
		stopCounting()
		s.notify()
	}()
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	s.mu.Lock()
	s.commands = append(s.commands, sess.RawCommand())
	env := append(os.Environ(), s.env...)
	s.mu.Unlock()

	sigs := make(chan gliderssh.Signal, 4)
	sess.Signals(sigs)
	cmd := exec.Command("sh", "-c", sess.RawCommand())
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = sess, sess.Stderr()
	// Stdin through a pipe we close ourselves: exec would otherwise wait
	// for the client's EOF even after the process died.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		stopCounting()
		sess.Exit(255)
		return
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		io.WriteString(sess.Stderr(), err.Error())
		stopCounting()
		sess.Exit(127)
		return
	}
	go func() {
		io.Copy(stdin, sess)
		stdin.Close()
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-sigs:
			s.mu.Lock()
			s.signals = append(s.signals, string(sig))
			s.mu.Unlock()
			s.notify()
			if ss, ok := signalsByName[sig]; ok && !s.ignoreSignals {
				syscall.Kill(-cmd.Process.Pid, ss)
			}
			continue
		case <-sess.Context().Done():
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			return
		case err := <-done:
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
				if code < 0 {
					code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
				}
			}
			stopCounting()
			sess.Exit(code)
			return
		}
	}
}

// writeKnownHosts writes lines to a new known_hosts file.
func writeKnownHosts(t testing.TB, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// baseConfig reaches s as user "tester" with key and known_hosts.
func (s *testServer) baseConfig(key, known string) SSHConfig {
	return SSHConfig{
		Name:           "db1",
		Address:        "127.0.0.1",
		Port:           s.Port,
		User:           "tester",
		PrivateKeyFile: key,
		KnownHostsFile: known,
		ConnectTimeout: 5e9,
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// withSessionChannels replaces the server's session handling with h, for
// servers that misbehave below what a command can do: h gets each session
// channel before it is accepted, and the connection's context.
func withSessionChannels(h func(nc gossh.NewChannel, ctx gliderssh.Context)) serverOption {
	return func(_ testing.TB, s *testServer) {
		s.srv.ChannelHandlers = map[string]gliderssh.ChannelHandler{
			"session": func(_ *gliderssh.Server, _ *gossh.ServerConn, nc gossh.NewChannel, ctx gliderssh.Context) {
				h(nc, ctx)
			},
		}
	}
}

// neverConfirmed leaves every session request unanswered (neither
// accepted nor refused) until the connection ends.
func neverConfirmed(_ gossh.NewChannel, ctx gliderssh.Context) { <-ctx.Done() }

// execNeverAnswered accepts the session and never replies to any request
// on it (the exec request included); it reads nothing.
func execNeverAnswered(nc gossh.NewChannel, _ gliderssh.Context) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	for range reqs {
	}
	ch.Close()
}

// exitNeverClosed answers the exec request, prints "out" and "err",
// sends exit status 3 and then, if eof, the end of its output; it never
// closes the channel (the client's close ends it). trickle > 0 prints
// that many more stdout lines, 300 ms apart, after the exit status.
func exitNeverClosed(eof bool, trickle int) func(gossh.NewChannel, gliderssh.Context) {
	return func(nc gossh.NewChannel, _ gliderssh.Context) {
		ch, reqs, err := nc.Accept()
		if err != nil {
			return
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		defer wg.Wait()
		defer close(stop)
		for req := range reqs {
			if req.Type != "exec" {
				if req.WantReply {
					req.Reply(false, nil)
				}
				continue
			}
			req.Reply(true, nil)
			wg.Add(1)
			go func() {
				defer wg.Done()
				io.WriteString(ch, "out\n")
				io.WriteString(ch.Stderr(), "err\n")
				ch.SendRequest("exit-status", false, []byte{0, 0, 0, 3})
				for i := range trickle {
					select {
					case <-time.After(300 * time.Millisecond):
					case <-stop:
						return
					}
					io.WriteString(ch, "late "+itoa(i)+"\n")
				}
				if eof {
					ch.CloseWrite()
				}
			}()
		}
	}
}
