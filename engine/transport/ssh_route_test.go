package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/skeema/knownhosts"
	gossh "golang.org/x/crypto/ssh"
)

// proxyHelperArg makes the test binary act as a ProxyCommand (TestMain):
// LOG HOST PORT USER ALIAS. It records its pid and tokens in LOG, then
// relays stdin/stdout to 127.0.0.1:PORT whatever HOST is, as a bastion's
// `ssh -W` would.
const proxyHelperArg = "-pgtune-proxy-helper"

func runProxyHelper(args []string) int {
	if len(args) != 5 {
		fmt.Fprintln(os.Stderr, "proxy helper: want LOG HOST PORT USER ALIAS")
		return 2
	}
	f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Fprintf(f, "pid=%d host=%s port=%s user=%s alias=%s\n", os.Getpid(), args[1], args[2], args[3], args[4])
	f.Close()
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", args[2]))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() {
		io.Copy(conn, os.Stdin)
		conn.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(os.Stdout, conn)
	return 0
}

// proxyCommand is the ssh_config line running the helper with log.
func proxyCommand(t *testing.T, log string) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("ProxyCommand %s %s %s %%h %%p %%r %%n", exe, proxyHelperArg, log)
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func runEcho(t *testing.T, c *SSH) {
	t.Helper()
	res, err := c.Run(context.Background(), Command{Args: []string{"echo", "hi"}})
	if err != nil || string(res.Stdout) != "hi\n" {
		t.Fatalf("Run: %q, %v", res.Stdout, err)
	}
}

func TestSSHProxyCommand(t *testing.T) {
	key, pub := clientKey(t)
	srv := newTestServer(t, []gossh.PublicKey{pub})
	port := itoa(srv.Port)
	// The host key is recorded under the unresolvable name only: the
	// connection can work only through the proxy.
	known := writeKnownHosts(t, knownhosts.Line([]string{"proxied.invalid:" + port}, srv.hostKey(keyEd25519)))

	t.Run("proxied, tokens expanded, process ended on Close", func(t *testing.T) {
		log := filepath.Join(t.TempDir(), "proxy.log")
		conf := writeTemp(t, "ssh_config", fmt.Sprintf("Host db1\n  HostName proxied.invalid\n  Port %s\n  User tester\n  %s\n", port, proxyCommand(t, log)))
		before := srv.conns.Load()
		c := dial(t, SSHConfig{Name: "db1", ConfigFile: conf, PrivateKeyFile: key, KnownHostsFile: known})
		runEcho(t, c)
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatalf("the proxy never ran: %v", err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 1 || !strings.HasSuffix(lines[0], " host=proxied.invalid port="+port+" user=tester alias=db1") {
			t.Fatalf("proxy log %q: want one run with the expanded tokens", b)
		}
		if n := srv.conns.Load() - before; n != 1 {
			t.Errorf("server accepted %d connections, want 1", n)
		}
		pid, _ := strconv.Atoi(strings.TrimPrefix(strings.Fields(lines[0])[0], "pid="))
		c.Close()
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("proxy process %d still there after Close (kill 0: %v)", pid, err)
		}
	})
	t.Run("ProxyCommand none dials directly", func(t *testing.T) {
		conf := writeTemp(t, "ssh_config", fmt.Sprintf("Host db1\n  HostName 127.0.0.1\n  Port %s\n  User tester\n  ProxyCommand none\nHost *\n  ProxyCommand false\n", port))
		c := dial(t, SSHConfig{Name: "db1", ConfigFile: conf, PrivateKeyFile: key, KnownHostsFile: writeKnownHosts(t, srv.knownHostsLine(keyEd25519))})
		runEcho(t, c)
	})
	t.Run("a proxy that cannot run fails once, with its reason", func(t *testing.T) {
		count := filepath.Join(t.TempDir(), "count")
		conf := writeTemp(t, "ssh_config", fmt.Sprintf("Host db1\n  HostName proxied.invalid\n  Port %s\n  ProxyCommand sh -c 'echo run >> %s; echo no such proxy >&2; exit 127'\n", port, count))
		_, err := DialSSH(context.Background(), SSHConfig{Name: "db1", ConfigFile: conf, PrivateKeyFile: key, KnownHostsFile: known, ConnectTimeout: 5 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "exited with status 127") || !strings.Contains(err.Error(), "no such proxy") {
			t.Fatalf("err = %v", err)
		}
		if b, _ := os.ReadFile(count); string(b) != "run\n" {
			t.Errorf("proxy ran %q, want once (exit 127 is not transient)", b)
		}
	})
	t.Run("a failed proxy's command is not shown, its output masked", func(t *testing.T) {
		// ncat-style credentials in the command, echoed by the proxy.
		conf := writeTemp(t, "ssh_config", fmt.Sprintf("Host db1\n  HostName proxied.invalid\n  Port %s\n  ProxyCommand sh -c 'echo \"auth walker:PXPW1 refused\" >&2; exit 127' --proxy-auth walker:PXPW1\n", port))
		_, err := DialSSH(context.Background(), SSHConfig{Name: "db1", ConfigFile: conf, PrivateKeyFile: key, KnownHostsFile: known, ConnectTimeout: 5 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "ProxyCommand (not shown: it may carry a secret) exited with status 127") || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("err = %v", err)
		}
		if strings.Contains(err.Error(), "PXPW1") {
			t.Errorf("the proxy's password reached the error: %v", err)
		}
	})
	t.Run("a proxy that drops the stream is retried", func(t *testing.T) {
		fastRetries(t)
		count := filepath.Join(t.TempDir(), "count")
		conf := writeTemp(t, "ssh_config", fmt.Sprintf("Host db1\n  HostName proxied.invalid\n  Port %s\n  ProxyCommand sh -c 'echo run >> %s; exit 1'\n", port, count))
		_, err := DialSSH(context.Background(), SSHConfig{Name: "db1", ConfigFile: conf, PrivateKeyFile: key, KnownHostsFile: known, ConnectTimeout: 5 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "gave up after 4 attempts") {
			t.Fatalf("err = %v", err)
		}
		if b, _ := os.ReadFile(count); strings.Count(string(b), "run\n") != 4 {
			t.Errorf("proxy ran %q, want 4 times", b)
		}
	})
	t.Run("a proxy ignoring SIGTERM does not hang Close", func(t *testing.T) {
		dir := t.TempDir()
		log, pidFile := filepath.Join(dir, "proxy.log"), filepath.Join(dir, "pid")
		exe, _ := os.Executable()
		conf := writeTemp(t, "ssh_config", fmt.Sprintf("Host db1\n  HostName proxied.invalid\n  Port %s\n  User tester\n"+
			"  ProxyCommand sh -c 'echo $$ > %s; trap \"\" TERM; %s %s %s %%h %%p %%r %%n; sleep 600'\n", port, pidFile, exe, proxyHelperArg, log))
		c := dial(t, SSHConfig{Name: "db1", ConfigFile: conf, PrivateKeyFile: key, KnownHostsFile: known})
		runEcho(t, c)
		b, _ := os.ReadFile(pidFile)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("pid file %q", b)
		}
		c.Close()
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("proxy shell %d still there after Close (kill 0: %v)", pid, err)
		}
	})
	t.Run("first jump host reached through its ProxyCommand", func(t *testing.T) {
		jump := newTestServer(t, []gossh.PublicKey{pub}, asJumpHost())
		log := filepath.Join(t.TempDir(), "proxy.log")
		conf := writeTemp(t, "ssh_config", fmt.Sprintf("Host db1\n  HostName 127.0.0.1\n  Port %s\n  User tester\n  ProxyJump bastion\n"+
			"Host bastion\n  HostName bastion.invalid\n  Port %d\n  User j\n  %s\n", port, jump.Port, proxyCommand(t, log)))
		kh := writeKnownHosts(t, knownhosts.Line([]string{fmt.Sprintf("bastion.invalid:%d", jump.Port)}, jump.hostKey(keyEd25519)), srv.knownHostsLine(keyEd25519))
		before := srv.conns.Load()
		c := dial(t, SSHConfig{Name: "db1", ConfigFile: conf, PrivateKeyFile: key, KnownHostsFile: kh})
		runEcho(t, c)
		c.Close()
		if b, _ := os.ReadFile(log); !strings.Contains(string(b), fmt.Sprintf("host=bastion.invalid port=%d user=j alias=bastion", jump.Port)) {
			t.Errorf("proxy log %q", b)
		}
		if j, f, n := jump.conns.Load(), jump.forwards.Load(), srv.conns.Load()-before; j != 1 || f != 1 || n != 1 {
			t.Errorf("jump conns %d, forwards %d, target conns %d; want 1 each", j, f, n)
		}
	})
	t.Run("refused: unknown token, both ProxyCommand and ProxyJump", func(t *testing.T) {
		conf := writeTemp(t, "ssh_config", "Host tok\n  ProxyCommand nc %C\nHost both\n  ProxyCommand nc %h %p\n  ProxyJump bastion\n")
		for alias, want := range map[string]string{
			"tok":  "Host tok: ProxyCommand \"nc %C\": token %C is not supported",
			"both": "Host both: both ProxyCommand and ProxyJump are set",
		} {
			_, err := DialSSH(context.Background(), SSHConfig{Name: alias, ConfigFile: conf})
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: err = %v, want %q", alias, err, want)
			}
		}
	})
}

func TestSSHHostKeyAliasAndGlobalKnownHosts(t *testing.T) {
	key, pub := clientKey(t)
	srv := newTestServer(t, []gossh.PublicKey{pub})
	aliasLine := knownhosts.Line([]string{"db-alias"}, srv.hostKey(keyEd25519))
	otherKey := knownhosts.Line([]string{"db-alias"}, pub) // a key the server does not have
	dir := t.TempDir()
	file := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	underAlias := file("alias", aliasLine)
	underAddr := file("addr", srv.knownHostsLine(keyEd25519))
	changed := file("changed", otherKey)
	empty := file("empty")

	tests := []struct {
		name    string
		opts    string // ssh_config lines for Host db1
		wantErr error
	}{
		{"alias recorded: connects", "HostKeyAlias db-alias\n  UserKnownHostsFile " + underAlias, nil},
		{"wrong alias: unknown", "HostKeyAlias db-other\n  UserKnownHostsFile " + underAlias, ErrUnknownHostKey},
		{"alias set, key recorded under the address only: unknown", "HostKeyAlias db-alias\n  UserKnownHostsFile " + underAddr, ErrUnknownHostKey},
		{"alias with another key: changed", "HostKeyAlias db-alias\n  UserKnownHostsFile " + changed, ErrChangedHostKey},
		{"global file, second of two", "UserKnownHostsFile " + empty + "\n  GlobalKnownHostsFile " + empty + " " + underAddr, nil},
		{"global file with user none", "UserKnownHostsFile none\n  GlobalKnownHostsFile " + underAddr, nil},
		{"global file that changed", "UserKnownHostsFile none\n  GlobalKnownHostsFile " + file("gchanged", knownhosts.Line([]string{srv.Addr}, pub)), ErrChangedHostKey},
		{"no file at all", "UserKnownHostsFile none\n  GlobalKnownHostsFile none", ErrUnknownHostKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conf := writeTemp(t, "ssh_config", fmt.Sprintf("Host db1\n  HostName 127.0.0.1\n  Port %d\n  User tester\n  %s\n", srv.Port, tc.opts))
			c, err := DialSSH(context.Background(), SSHConfig{Name: "db1", ConfigFile: conf, PrivateKeyFile: key, ConnectTimeout: 5 * time.Second})
			if tc.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				runEcho(t, c)
				c.Close()
				return
			}
			if c != nil {
				c.Close()
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if strings.HasPrefix(tc.opts, "HostKeyAlias ") {
				alias := strings.Fields(tc.opts)[1]
				if want := fmt.Sprintf("host key for %s (HostKeyAlias of %s)", alias, srv.Addr); !strings.Contains(err.Error(), want) {
					t.Errorf("err = %v, want it to say %q", err, want)
				}
			}
		})
	}

	t.Run("accept-new records under the alias", func(t *testing.T) {
		kh := filepath.Join(t.TempDir(), "known_hosts")
		conf := writeTemp(t, "ssh_config", fmt.Sprintf("Host db1\n  HostName 127.0.0.1\n  Port %d\n  HostKeyAlias db-alias\n  StrictHostKeyChecking accept-new\n  UserKnownHostsFile %s\n", srv.Port, kh))
		c := dial(t, SSHConfig{Name: "db1", User: "tester", ConfigFile: conf, PrivateKeyFile: key})
		c.Close()
		b, _ := os.ReadFile(kh)
		if !strings.HasPrefix(string(b), "db-alias ssh-ed25519 ") {
			t.Fatalf("known_hosts = %q, want the key under db-alias", b)
		}
	})
}

// fastRetries shortens the backoff for the test.
func fastRetries(t *testing.T) {
	base, max := dialBackoffBase, dialBackoffMax
	dialBackoffBase, dialBackoffMax = time.Millisecond, 5*time.Millisecond
	t.Cleanup(func() { dialBackoffBase, dialBackoffMax = base, max })
}

// dropper accepts TCP connections and drops the first `drop` of them at
// once, as sshd does beyond MaxStartups; later ones are relayed to backend.
type dropper struct {
	addr     string
	port     int
	accepted atomic.Int32
	dropped  chan struct{} // one value per dropped connection
}

func newDropper(t *testing.T, backend string, drop int32, rst bool) *dropper {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dropper{addr: ln.Addr().String(), port: ln.Addr().(*net.TCPAddr).Port, dropped: make(chan struct{}, 128)}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if d.accepted.Add(1) <= drop {
				if rst {
					c.(*net.TCPConn).SetLinger(0) // RST instead of FIN
				} else {
					io.WriteString(c, "Exceeded MaxStartups\r\n")
				}
				c.Close()
				select {
				case d.dropped <- struct{}{}:
				default:
				}
				continue
			}
			b, err := net.Dial("tcp", backend)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(b, c); b.Close() }()
			go func() { defer wg.Done(); io.Copy(c, b); c.Close() }()
		}
	}()
	return d
}

func TestSSHHandshakeRetries(t *testing.T) {
	fastRetries(t)
	key, pub := clientKey(t)
	srv := newTestServer(t, []gossh.PublicKey{pub})
	cfgFor := func(port int, known string) SSHConfig {
		return SSHConfig{Name: "db1", Address: "127.0.0.1", Port: port, User: "tester", PrivateKeyFile: key, KnownHostsFile: known, ConnectTimeout: 5 * time.Second}
	}
	knownFor := func(d *dropper) string {
		return writeKnownHosts(t, knownhosts.Line([]string{d.addr}, srv.hostKey(keyEd25519)))
	}

	t.Run("first two dropped (MaxStartups banner), third connects", func(t *testing.T) {
		d := newDropper(t, srv.Addr, 2, false)
		c := dial(t, cfgFor(d.port, knownFor(d)))
		runEcho(t, c)
		if n := d.accepted.Load(); n != 3 {
			t.Errorf("%d connections, want 3", n)
		}
	})
	t.Run("first three reset, fourth connects", func(t *testing.T) {
		d := newDropper(t, srv.Addr, 3, true)
		c := dial(t, cfgFor(d.port, knownFor(d)))
		runEcho(t, c)
		if n := d.accepted.Load(); n != 4 {
			t.Errorf("%d connections, want 4", n)
		}
	})
	t.Run("bounded: gives up after 4 attempts", func(t *testing.T) {
		d := newDropper(t, srv.Addr, 100, false)
		_, err := DialSSH(context.Background(), cfgFor(d.port, knownFor(d)))
		if err == nil || !strings.Contains(err.Error(), "gave up after 4 attempts") {
			t.Fatalf("err = %v", err)
		}
		if n := d.accepted.Load(); n != 4 {
			t.Errorf("%d connections, want 4", n)
		}
	})
	t.Run("waiting ends with the context", func(t *testing.T) {
		dialBackoffBase, dialBackoffMax = time.Hour, time.Hour
		d := newDropper(t, srv.Addr, 100, false)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := DialSSH(ctx, cfgFor(d.port, knownFor(d)))
			done <- err
		}()
		// Cancel once the first attempt has been dropped: the dial is then
		// in its (hour-long) backoff.
		<-d.dropped
		cancel()
		// With an hour of backoff, returning at all shows the wait ended
		// with ctx (the cancel may land in the handshake or in the wait).
		err := <-done
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
		dialBackoffBase, dialBackoffMax = time.Millisecond, 5*time.Millisecond
	})
	t.Run("auth failure is not retried", func(t *testing.T) {
		other, _ := clientKey(t)
		before := srv.conns.Load()
		cfg := srv.baseConfig(other, writeKnownHosts(t, srv.knownHostsLine(keyEd25519)))
		_, err := DialSSH(context.Background(), cfg)
		if !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("err = %v", err)
		}
		if n := srv.conns.Load() - before; n != 1 {
			t.Errorf("%d connections, want 1", n)
		}
	})
	t.Run("host key failure is not retried", func(t *testing.T) {
		before := srv.conns.Load()
		_, err := DialSSH(context.Background(), srv.baseConfig(key, writeKnownHosts(t)))
		if !errors.Is(err, ErrUnknownHostKey) {
			t.Fatalf("err = %v", err)
		}
		if n := srv.conns.Load() - before; n != 1 {
			t.Errorf("%d connections, want 1", n)
		}
	})
}

func TestSSHSharedJumpHost(t *testing.T) {
	key, pub := clientKey(t)
	auth := []gossh.PublicKey{pub}
	jump := newTestServer(t, auth, asJumpHost())
	target := newTestServer(t, auth)
	known := writeKnownHosts(t, jump.knownHostsLine(keyEd25519), target.knownHostsLine(keyEd25519))
	cfg := target.baseConfig(key, known)
	cfg.ProxyJump = "127.0.0.1:" + itoa(jump.Port)

	const n = 12
	conns := make([]*SSH, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := DialSSH(context.Background(), cfg)
			if err != nil {
				t.Error(err)
				return
			}
			conns[i] = c
		}()
	}
	wg.Wait()
	if t.Failed() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
		t.FailNow()
	}
	if j, f, tc := jump.conns.Load(), jump.forwards.Load(), target.conns.Load(); j != 1 || f != n || tc != n {
		t.Errorf("jump connections %d, forwards %d, target connections %d; want 1, %d, %d", j, f, tc, n, n)
	}
	// Closing all but one keeps the shared jump connection for the rest.
	for _, c := range conns[1:] {
		c.Close()
	}
	runEcho(t, conns[0])
	late := dial(t, cfg)
	runEcho(t, late)
	if j := jump.conns.Load(); j != 1 {
		t.Errorf("jump connections %d after a late dial, want 1", j)
	}
	late.Close()
	conns[0].Close()

	// The last Close closed it: nothing left in the pool, and the next
	// target opens a new jump connection.
	jumpHosts.mu.Lock()
	left := len(jumpHosts.entries)
	jumpHosts.mu.Unlock()
	if left != 0 {
		t.Errorf("%d jump connections still pooled after every target closed", left)
	}
	again := dial(t, cfg)
	runEcho(t, again)
	again.Close()
	if j := jump.conns.Load(); j != 2 {
		t.Errorf("jump connections %d, want 2 (a new one after the last close)", j)
	}
}

// A target waiting for another target's jump dial is not failed by that
// target giving up: it dials the jump host itself.
func TestSSHSharedJumpHostDiallerGivesUp(t *testing.T) {
	key, pub := clientKey(t)
	auth := []gossh.PublicKey{pub}
	jump := newTestServer(t, auth, asJumpHost())
	target := newTestServer(t, auth)

	// The first connection to the jump address stalls (no banner); later
	// ones reach the jump server.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stalled := make(chan net.Conn, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		first := true
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if first {
				first = false
				stalled <- c
				continue
			}
			b, err := net.Dial("tcp", jump.Addr)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(b, c); b.Close() }()
			go func() { defer wg.Done(); io.Copy(c, b); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	jumpPort := ln.Addr().(*net.TCPAddr).Port
	known := writeKnownHosts(t, knownhosts.Line([]string{ln.Addr().String()}, jump.hostKey(keyEd25519)), target.knownHostsLine(keyEd25519))
	cfg := target.baseConfig(key, known)
	cfg.ProxyJump = "127.0.0.1:" + itoa(jumpPort)

	ctxA, cancelA := context.WithCancel(context.Background())
	errA := make(chan error, 1)
	go func() {
		c, err := DialSSH(ctxA, cfg)
		if c != nil {
			c.Close()
		}
		errA <- err
	}()
	held := <-stalled
	defer held.Close()

	type result struct {
		c   *SSH
		err error
	}
	resB := make(chan result, 1)
	go func() {
		c, err := DialSSH(context.Background(), cfg)
		resB <- result{c, err}
	}()
	// B is waiting once it holds a reference on A's entry.
	for deadline := time.Now().Add(hangGuard); ; {
		jumpHosts.mu.Lock()
		refs := 0
		for _, e := range jumpHosts.entries {
			refs = e.refs
		}
		jumpHosts.mu.Unlock()
		if refs == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second target never waited on the first one's jump dial")
		}
		time.Sleep(time.Millisecond)
	}
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Fatalf("A: err = %v, want canceled", err)
	}
	b := <-resB
	if b.err != nil {
		t.Fatalf("B: %v", b.err)
	}
	runEcho(t, b.c)
	b.c.Close()
	if n := jump.conns.Load(); n != 1 {
		t.Errorf("jump server connections %d, want 1 (B's own)", n)
	}
}
