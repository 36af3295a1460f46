package transport

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

func dial(t *testing.T, cfg SSHConfig) *SSH {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := DialSSH(ctx, cfg)
	if err != nil {
		t.Fatalf("DialSSH: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestSSHRun(t *testing.T) {
	key, pub := clientKey(t)
	srv := newTestServer(t, []gossh.PublicKey{pub})
	c := dial(t, srv.baseConfig(key, writeKnownHosts(t, srv.knownHostsLine(keyEd25519))))

	big := make([]byte, 3<<20) // larger than the SSH window: exercises flow control
	rand.Read(big)
	tests := []struct {
		name       string
		cmd        Command
		wantOut    string
		wantErr    string
		wantCode   int
		wantStderr string
	}{
		{name: "stdout", cmd: Command{Args: []string{"echo", "hello"}}, wantOut: "hello\n"},
		{name: "stderr kept apart", cmd: Command{Args: []string{"sh", "-c", "echo out; echo err >&2"}}, wantOut: "out\n", wantStderr: "err\n"},
		{name: "exit status", cmd: Command{Args: []string{"sh", "-c", "echo failing >&2; exit 3"}}, wantCode: 3, wantErr: "exit status 3: failing", wantStderr: "failing\n"},
		{name: "hostile argument stays one word", cmd: Command{Args: []string{"printf", "%s|", "a b", "$(touch /tmp/pgtune-owned)", "`id`", "x'y\"z", "new\nline", "; rm -rf /"}},
			wantOut: "a b|$(touch /tmp/pgtune-owned)|`id`|x'y\"z|new\nline|; rm -rf /|"},
		{name: "positional script args", cmd: Command{Args: []string{"sh", "-c", `printf '%s' "$1"`, "sh", "it's $HOME"}}, wantOut: "it's $HOME"},
		{name: "stdin", cmd: Command{Args: []string{"cat"}, Stdin: []byte("line1\nline2\x00bin")}, wantOut: "line1\nline2\x00bin"},
		{name: "big stdin", cmd: Command{Args: []string{"cat"}, Stdin: big}, wantOut: string(big)},
		{name: "nil stdin reads EOF, no hang", cmd: Command{Args: []string{"cat"}}, wantOut: ""},
		{name: "killed by signal", cmd: Command{Args: []string{"sh", "-c", "kill -9 $$"}}, wantCode: 137, wantErr: "exit status 137"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res, err := c.Run(ctx, tc.cmd)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("Run: %v", err)
			}
			if tc.wantErr != "" {
				var xe *ExitError
				if !errors.As(err, &xe) {
					t.Fatalf("err = %v, want *ExitError", err)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %q, want it to contain %q", err, tc.wantErr)
				}
			}
			if res.ExitCode != tc.wantCode {
				t.Errorf("exit code = %d, want %d", res.ExitCode, tc.wantCode)
			}
			if string(res.Stdout) != tc.wantOut {
				t.Errorf("stdout = %.200q, want %.200q", res.Stdout, tc.wantOut)
			}
			if tc.wantStderr != "" && string(res.Stderr) != tc.wantStderr {
				t.Errorf("stderr = %q, want %q", res.Stderr, tc.wantStderr)
			}
		})
	}
	if _, err := os.Stat("/tmp/pgtune-owned"); err == nil {
		t.Fatal("an argument was executed as shell")
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("server saw %d connections, want 1 for the whole run", n)
	}
}

func TestSSHConcurrentRunsShareOneConnection(t *testing.T) {
	key, pub := clientKey(t)
	srv := newTestServer(t, []gossh.PublicKey{pub})
	c := dial(t, srv.baseConfig(key, writeKnownHosts(t, srv.knownHostsLine(keyEd25519))))

	const n = 12 // more than maxSessions: the rest queue, none fail
	var wg sync.WaitGroup
	errs := make([]error, n)
	outs := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Run(context.Background(), Command{Args: []string{"sh", "-c", "sleep 0.3; echo $1", "sh", itoa(i)}})
			errs[i], outs[i] = err, string(res.Stdout)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || outs[i] != itoa(i)+"\n" {
			t.Errorf("run %d: out %q err %v", i, outs[i], errs[i])
		}
	}
	if got := srv.conns.Load(); got != 1 {
		t.Errorf("server saw %d connections, want 1", got)
	}
	if p := srv.peak.Load(); p < 2 || p > maxSessions {
		t.Errorf("peak concurrent sessions = %d, want between 2 and %d", p, maxSessions)
	}
}

func TestSSHHostKeyPolicy(t *testing.T) {
	key, pub := clientKey(t)
	srv := newTestServer(t, []gossh.PublicKey{pub}, withHostKeys(keyEd25519, keyECDSA, keyRSA))
	_, other := newKey(t, keyEd25519)
	_, otherEC := newKey(t, keyECDSA)
	changedLine := fmt.Sprintf("[127.0.0.1]:%d %s", srv.Port, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(other.PublicKey()))))
	changedECLine := fmt.Sprintf("[127.0.0.1]:%d %s", srv.Port, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(otherEC.PublicKey()))))
	unrelated := "[127.0.0.1]:1 " + strings.TrimSpace(string(gossh.MarshalAuthorizedKey(other.PublicKey())))

	tests := []struct {
		name     string
		lines    []string // nil: known_hosts file does not exist
		policy   string
		wantErr  error
		wantMsg  []string
		appended bool
	}{
		{name: "recorded ed25519 among three server keys", lines: []string{srv.knownHostsLine(keyEd25519)}},
		{name: "recorded rsa only", lines: []string{srv.knownHostsLine(keyRSA)}},
		{name: "recorded ecdsa only", lines: []string{unrelated, srv.knownHostsLine(keyECDSA)}},
		{name: "unknown host refused", lines: []string{unrelated}, wantErr: ErrUnknownHostKey,
			wantMsg: []string{"host key for 127.0.0.1:" + itoa(srv.Port) + " is not in ", "known_hosts (unknown host; add it with ssh-keyscan or set ssh_host_key_checking: accept-new)"}},
		{name: "missing known_hosts refused", lines: nil, wantErr: ErrUnknownHostKey, wantMsg: []string{"unknown host"}},
		{name: "changed key refused", lines: []string{changedLine}, wantErr: ErrChangedHostKey,
			wantMsg: []string{"host key for 127.0.0.1:" + itoa(srv.Port) + " CHANGED", "possible man-in-the-middle", "ssh-keygen -R"}},
		{name: "changed key refused under accept-new", lines: []string{changedLine}, policy: "accept-new", wantErr: ErrChangedHostKey},
		{name: "changed ecdsa key refused though server also has others", lines: []string{changedECLine}, wantErr: ErrChangedHostKey},
		{name: "accept-new appends unknown", lines: []string{unrelated}, policy: "accept-new", appended: true},
		{name: "accept-new creates missing file", lines: nil, policy: "accept-new", appended: true},
		{name: "bad policy", lines: []string{srv.knownHostsLine(keyEd25519)}, policy: "yolo", wantMsg: []string{`host key policy "yolo"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			known := filepath.Join(t.TempDir(), "sub", "known_hosts")
			if tc.lines != nil {
				known = writeKnownHosts(t, tc.lines...)
			}
			cfg := srv.baseConfig(key, known)
			cfg.HostKeyPolicy = tc.policy
			c, err := DialSSH(context.Background(), cfg)
			if tc.wantErr == nil && len(tc.wantMsg) == 0 {
				if err != nil {
					t.Fatalf("DialSSH: %v", err)
				}
				defer c.Close()
				if _, err := c.Run(context.Background(), Command{Args: []string{"true"}}); err != nil {
					t.Fatal(err)
				}
			} else {
				if err == nil {
					c.Close()
					t.Fatal("DialSSH succeeded, want refusal")
				}
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Errorf("err = %v, want errors.Is %v", err, tc.wantErr)
				}
				for _, m := range tc.wantMsg {
					if !strings.Contains(err.Error(), m) {
						t.Errorf("err = %q\nwant it to contain %q", err, m)
					}
				}
			}
			if tc.appended {
				data, err := os.ReadFile(known)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(data), fmt.Sprintf("[127.0.0.1]:%d ", srv.Port)) {
					t.Fatalf("known_hosts after accept-new:\n%s", data)
				}
				// The recorded key now passes strict checking.
				cfg.HostKeyPolicy = "strict"
				c2 := dial(t, cfg)
				c2.Close()
			}
		})
	}
}

// TestSSHHostCertificateFirstContact: a server that presents a host
// certificate (sshd's HostCertificate), reached with no @cert-authority
// for it, is an unknown host like any other, as ssh(1) makes it: refused
// with the usual advice under strict, its plain key recorded under
// accept-new. Before, the client offered certificate types first, got the
// certificate and failed with "ssh: no authorities for hostname", also
// under accept-new.
func TestSSHHostCertificateFirstContact(t *testing.T) {
	key, pub := clientKey(t)
	srv := newTestServer(t, []gossh.PublicKey{pub}, withHostCert())
	t.Run("strict", func(t *testing.T) {
		cfg := srv.baseConfig(key, writeKnownHosts(t, "[127.0.0.1]:1 "+strings.TrimSpace(string(gossh.MarshalAuthorizedKey(pub)))))
		_, err := DialSSH(context.Background(), cfg)
		if !errors.Is(err, ErrUnknownHostKey) || !strings.Contains(err.Error(), "ssh_host_key_checking: accept-new") {
			t.Fatalf("err = %v, want the unknown-host refusal", err)
		}
	})
	t.Run("accept-new", func(t *testing.T) {
		known := filepath.Join(t.TempDir(), "known_hosts")
		cfg := srv.baseConfig(key, known)
		cfg.HostKeyPolicy = "accept-new"
		c := dial(t, cfg)
		c.Close()
		data, err := os.ReadFile(known)
		if err != nil || !strings.Contains(string(data), fmt.Sprintf("[127.0.0.1]:%d ssh-ed25519 ", srv.Port)) {
			t.Fatalf("known_hosts after accept-new: %q, %v; want the plain ed25519 key", data, err)
		}
		cfg.HostKeyPolicy = "strict"
		c = dial(t, cfg)
		c.Close()
	})
}

func TestSSHAuthenticationFailed(t *testing.T) {
	_, pub := clientKey(t)
	wrongKey, _ := clientKey(t)
	srv := newTestServer(t, []gossh.PublicKey{pub})
	cfg := srv.baseConfig(wrongKey, writeKnownHosts(t, srv.knownHostsLine(keyEd25519)))
	_, err := DialSSH(context.Background(), cfg)
	if !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("err = %v, want ErrAuthFailed", err)
	}
	if !strings.Contains(err.Error(), "authentication failed for user tester") || !strings.Contains(err.Error(), wrongKey) {
		t.Errorf("err = %q", err)
	}

	cfg.PrivateKeyFile = filepath.Join(t.TempDir(), "nope")
	_, err = DialSSH(context.Background(), cfg)
	if !errors.Is(err, ErrAuthFailed) || !strings.Contains(err.Error(), "(missing)") {
		t.Errorf("missing key: err = %v", err)
	}
}

func TestSSHConnectErrors(t *testing.T) {
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	// A listener that accepts and never speaks: the handshake must time out.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	var heldMu sync.Mutex
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			heldMu.Lock()
			held = append(held, c)
			heldMu.Unlock()
		}
	}()
	t.Cleanup(func() {
		silent.Close()
		<-acceptDone
		for _, c := range held {
			c.Close()
		}
	})
	silentPort := silent.Addr().(*net.TCPAddr).Port

	key, _ := clientKey(t)
	known := writeKnownHosts(t, "# empty")
	tests := []struct {
		name    string
		port    int
		timeout time.Duration
		cancel  time.Duration
		want    string
		wantIs  error
	}{
		{name: "refused", port: closedPort, timeout: 2 * time.Second, want: fmt.Sprintf("connect to 127.0.0.1:%d: connection refused", closedPort)},
		{name: "handshake timeout", port: silentPort, timeout: 300 * time.Millisecond, want: fmt.Sprintf("connect to 127.0.0.1:%d: timed out after 300ms", silentPort)},
		{name: "caller cancels", port: silentPort, timeout: 10 * time.Second, cancel: 200 * time.Millisecond, wantIs: context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel > 0 {
				time.AfterFunc(tc.cancel, cancel)
			}
			// Which error comes back tells which path ended the dial:
			// the refusal, the handshake timeout or the caller.
			var err error
			returns(t, "DialSSH", func() {
				_, err = DialSSH(ctx, SSHConfig{Name: "db1", Address: "127.0.0.1", Port: tc.port, User: "u",
					PrivateKeyFile: key, KnownHostsFile: known, ConnectTimeout: tc.timeout})
			})
			if err == nil {
				t.Fatal("DialSSH succeeded")
			}
			if tc.want != "" && err.Error() != tc.want {
				t.Errorf("err = %q, want %q", err, tc.want)
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("err = %v, want %v", err, tc.wantIs)
			}
		})
	}
}

func TestSSHRunCancel(t *testing.T) {
	key, pub := clientKey(t)
	srv := newTestServer(t, []gossh.PublicKey{pub})
	c := dial(t, srv.baseConfig(key, writeKnownHosts(t, srv.knownHostsLine(keyEd25519))))

	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{name: "cancel", want: context.Canceled, ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			return ctx, cancel
		}},
		{name: "deadline", want: context.DeadlineExceeded, ctx: func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			// The command never ends by itself: Run returning is the
			// cancel working.
			var err error
			returns(t, "Run after cancel", func() {
				_, err = c.Run(ctx, Command{Args: []string{"sleep", "infinity"}, Stdin: []byte("unread")})
			})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// The remote command got the signal, and the connection stays usable.
	srv.await(t, "two signals", func() bool { return len(srv.Signals()) >= 2 })
	if got := srv.Signals(); len(got) != 2 || got[0] != "TERM" {
		t.Errorf("server received signals %v, want TERM twice", got)
	}
	if res, err := c.Run(context.Background(), Command{Args: []string{"echo", "ok"}}); err != nil || string(res.Stdout) != "ok\n" {
		t.Errorf("after cancel: %q %v", res.Stdout, err)
	}
	// An already-cancelled context runs nothing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	before := len(srv.Commands())
	if _, err := c.Run(ctx, Command{Args: []string{"true"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
	if len(srv.Commands()) != before {
		t.Error("command ran under a cancelled context")
	}
}

// Without the SSH signal (OpenSSH ignores it for root), a cancelled Run
// still stops the remote command, through a kill from a second session.
func TestSSHRunCancelWithoutSignals(t *testing.T) {
	key, pub := clientKey(t)
	srv := newTestServer(t, []gossh.PublicKey{pub}, ignoringSignals())
	c := dial(t, srv.baseConfig(key, writeKnownHosts(t, srv.knownHostsLine(keyEd25519))))

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	var err error
	returns(t, "Run after its deadline", func() {
		_, err = c.Run(ctx, Command{Args: []string{"sh", "-c", "sleep infinity; echo survived"}})
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	// Only the kill can end the command.
	srv.await(t, "the remote command to end", func() bool { return srv.running.Load() == 0 })
	cmds := srv.Commands()
	if len(cmds) != 2 || !strings.Contains(cmds[1], "kill -s") {
		t.Errorf("commands = %q, want the command then the kill", cmds)
	}
	if res, err := c.Run(context.Background(), Command{Args: []string{"echo", "ok"}}); err != nil || string(res.Stdout) != "ok\n" {
		t.Errorf("after cancel: %q %v", res.Stdout, err)
	}
}

func TestSSHBecome(t *testing.T) {
	key, pub := clientKey(t)
	srv := newTestServer(t, []gossh.PublicKey{pub})
	known := writeKnownHosts(t, srv.knownHostsLine(keyEd25519))

	// A stand-in sudo that wants a password, exactly as `sudo -n` says it.
	bin := t.TempDir()
	fake := "#!/bin/sh\necho 'sudo: a password is required' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "sudo"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	srv.env = []string{"PATH=" + bin + ":" + os.Getenv("PATH")}

	tests := []struct {
		user     string
		become   bool
		wantLine string
		wantErr  string
	}{
		{user: "root", become: true, wantLine: "exec sh -c "},
		{user: "tester", become: false, wantLine: "exec sh -c "},
		{user: "tester", become: true, wantLine: "exec sudo -n -- sh -c ",
			wantErr: "sudo: a password is required (become needs passwordless sudo for user tester)"},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/become=%v", tc.user, tc.become), func(t *testing.T) {
			cfg := srv.baseConfig(key, known)
			cfg.User = tc.user
			c := dial(t, cfg)
			_, err := c.Run(context.Background(), Command{Args: []string{"id", "-u"}, Become: tc.become})
			cmds := srv.Commands()
			// The argument vector runs under the PID-reporting wrapper,
			// behind sudo only for a non-root become.
			if got := cmds[len(cmds)-1]; !strings.HasPrefix(got, tc.wantLine) || !strings.HasSuffix(got, " sh id -u") {
				t.Errorf("server ran %q, want %q… sh id -u", got, tc.wantLine)
			}
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			var xe *ExitError
			if !errors.Is(err, ErrBecomePassword) || !errors.As(err, &xe) || xe.ExitCode != 1 {
				t.Errorf("err %v does not match ErrBecomePassword and *ExitError", err)
			}
		})
	}
}

func TestSSHProxyJump(t *testing.T) {
	key, pub := clientKey(t)
	auth := []gossh.PublicKey{pub}
	jump1 := newTestServer(t, auth, asJumpHost())
	jump2 := newTestServer(t, auth, asJumpHost())
	target := newTestServer(t, auth)
	known := writeKnownHosts(t, jump1.knownHostsLine(keyEd25519), jump2.knownHostsLine(keyEd25519), target.knownHostsLine(keyEd25519))

	conf := filepath.Join(t.TempDir(), "ssh_config")
	writeConf := func(s string) {
		if err := os.WriteFile(conf, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := func(t *testing.T, cfg SSHConfig) {
		t.Helper()
		c := dial(t, cfg)
		res, err := c.Run(context.Background(), Command{Args: []string{"echo", "through"}})
		if err != nil || string(res.Stdout) != "through\n" {
			t.Fatalf("Run: %q %v", res.Stdout, err)
		}
		// Concurrent runs still share the one tunnelled connection.
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Run(context.Background(), Command{Args: []string{"true"}}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		c.Close()
	}

	t.Run("field, two hops", func(t *testing.T) {
		cfg := target.baseConfig(key, known)
		cfg.ProxyJump = "jumper@127.0.0.1:" + itoa(jump1.Port) + ",127.0.0.1:" + itoa(jump2.Port)
		run(t, cfg)
		if jump1.forwards.Load() != 1 || jump2.forwards.Load() != 1 || target.conns.Load() != 1 {
			t.Errorf("forwards %d,%d target conns %d; want 1,1,1", jump1.forwards.Load(), jump2.forwards.Load(), target.conns.Load())
		}
	})
	t.Run("ssh_config", func(t *testing.T) {
		writeConf(fmt.Sprintf(`Host db1
  HostName 127.0.0.1
  Port %d
  User tester
  ProxyJump bastion
Host bastion
  HostName 127.0.0.1
  Port %d
  User jumper
  IdentityFile %s
`, target.Port, jump1.Port, key))
		run(t, SSHConfig{Name: "db1", ConfigFile: conf, PrivateKeyFile: key, KnownHostsFile: known})
		if jump1.forwards.Load() != 2 || target.conns.Load() != 2 {
			t.Errorf("forwards %d, target conns %d; want 2, 2", jump1.forwards.Load(), target.conns.Load())
		}
	})
	t.Run("unknown jump host key", func(t *testing.T) {
		cfg := target.baseConfig(key, writeKnownHosts(t, target.knownHostsLine(keyEd25519)))
		cfg.ProxyJump = "127.0.0.1:" + itoa(jump2.Port)
		_, err := DialSSH(context.Background(), cfg)
		if !errors.Is(err, ErrUnknownHostKey) || !strings.HasPrefix(err.Error(), "jump host 127.0.0.1 (on the way to db1): host key for 127.0.0.1:"+itoa(jump2.Port)) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("target unreachable behind jump", func(t *testing.T) {
		cfg := target.baseConfig(key, known)
		cfg.Port = 1
		cfg.ProxyJump = "127.0.0.1:" + itoa(jump1.Port)
		_, err := DialSSH(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), "connect to 127.0.0.1:1") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestSSHAgentAuth(t *testing.T) {
	priv, signer := newKey(t, keyEd25519)
	srv := newTestServer(t, []gossh.PublicKey{signer.PublicKey()})
	known := writeKnownHosts(t, srv.knownHostsLine(keyEd25519))

	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				agent.ServeAgent(keyring, c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	t.Setenv("SSH_AUTH_SOCK", sock)

	c := dial(t, srv.baseConfig("", known))
	if res, err := c.Run(context.Background(), Command{Args: []string{"echo", "agent"}}); err != nil || string(res.Stdout) != "agent\n" {
		t.Fatalf("Run: %q %v", res.Stdout, err)
	}
	c.Close()

	// IdentitiesOnly in ssh_config keeps the agent out. db1's address is
	// set, so its block is the address's, as for `ssh 127.0.0.1`.
	conf := filepath.Join(t.TempDir(), "ssh_config")
	os.WriteFile(conf, []byte("Host 127.0.0.1\n  IdentitiesOnly yes\n"), 0o600)
	cfg := srv.baseConfig("", known)
	cfg.ConfigFile = conf
	if _, err := DialSSH(context.Background(), cfg); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("IdentitiesOnly: err = %v, want ErrAuthFailed", err)
	}
}

func TestSSHCloseAndLostConnection(t *testing.T) {
	key, pub := clientKey(t)
	srv := newTestServer(t, []gossh.PublicKey{pub})

	// A proxy that can freeze, as a host that stops answering mid-run.
	px := newFreezeProxy(t, srv.Addr)
	old := keepaliveInterval
	keepaliveInterval = 100 * time.Millisecond
	t.Cleanup(func() { keepaliveInterval = old })

	// known_hosts records the key under the proxy's address, the one dialled.
	cfg := srv.baseConfig(key, writeKnownHosts(t, strings.Replace(srv.knownHostsLine(keyEd25519), itoa(srv.Port), itoa(px.port), 1)))
	cfg.Port = px.port
	c := dial(t, cfg)
	if _, err := c.Run(context.Background(), Command{Args: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	px.freeze()
	// Nothing but the keepalive can end this Run: the frozen proxy
	// never answers and the context never expires.
	var err error
	returns(t, "Run over a frozen connection", func() {
		_, err = c.Run(context.Background(), Command{Args: []string{"echo", "never"}})
	})
	if !errors.Is(err, ErrConnectionLost) {
		t.Fatalf("err = %v, want ErrConnectionLost", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Run(context.Background(), Command{Args: []string{"true"}}); err == nil {
		t.Error("Run after Close succeeded")
	}
}

type freezeProxy struct {
	port   int
	mu     sync.Mutex
	frozen bool
	conns  []net.Conn
}

func newFreezeProxy(t *testing.T, backend string) *freezeProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{port: ln.Addr().(*net.TCPAddr).Port}
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			p.mu.Lock()
			frozen := p.frozen
			p.mu.Unlock()
			if frozen {
				// Swallow everything: the peer looks alive to TCP but
				// never answers.
				if err != nil {
					return
				}
				continue
			}
			if n > 0 {
				dst.Write(buf[:n])
			}
			if err != nil {
				dst.Close()
				return
			}
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", backend)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, b)
			p.mu.Unlock()
			wg.Add(2)
			go pipe(b, c)
			go pipe(c, b)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	return p
}

func (p *freezeProxy) freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

func TestPIDCapture(t *testing.T) {
	tests := []struct {
		name    string
		chunks  []string
		wantPID int
		wantErr string
	}{
		{name: "pid then output", chunks: []string{"pgtune-pid:42\nwarn\n"}, wantPID: 42, wantErr: "warn\n"},
		{name: "split across writes", chunks: []string{"pgtune-", "pid:4", "2", "\nw", "arn\n"}, wantPID: 42, wantErr: "warn\n"},
		{name: "sudo warning first", chunks: []string{"sudo: unable to resolve host x\n", "pgtune-pid:7\n", "err\n"}, wantPID: 7, wantErr: "sudo: unable to resolve host x\nerr\n"},
		{name: "sudo refuses, no pid", chunks: []string{"sudo: a password is required\n"}, wantErr: "sudo: a password is required\n"},
		{name: "only the first pid line is ours", chunks: []string{"pgtune-pid:1\npgtune-pid:2\n"}, wantPID: 1, wantErr: "pgtune-pid:2\n"},
		{name: "not a full line", chunks: []string{"xpgtune-pid:3\npgtune-pid:3x\n"}, wantErr: "xpgtune-pid:3\npgtune-pid:3x\n"},
		{name: "no newline yet", chunks: []string{"pgtune-pid:9"}, wantErr: "pgtune-pid:9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newPIDCapture()
			for _, c := range tc.chunks {
				w.Write([]byte(c))
			}
			if w.PID() != tc.wantPID || string(w.Bytes()) != tc.wantErr {
				t.Errorf("pid %d stderr %q, want %d %q", w.PID(), w.Bytes(), tc.wantPID, tc.wantErr)
			}
			select {
			case <-w.parsed:
				if tc.wantPID == 0 {
					t.Error("parsed closed without a PID")
				}
			default:
				if tc.wantPID != 0 {
					t.Error("parsed not closed")
				}
			}
		})
	}
}

// TestAcceptNewRecordsOnce: hosts first seen together under one address
// (inventory names behind one bastion port, dialled at once, each checker
// having read known_hosts before any wrote) record one line, not one per
// host.
func TestAcceptNewRecordsOnce(t *testing.T) {
	known := filepath.Join(t.TempDir(), "known_hosts")
	e := &endpoint{host: "127.0.0.1", port: 22201, knownHosts: []string{known}, policy: HostKeyAcceptNew}
	_, host := newKey(t, keyEd25519)
	var checkers []*hostKeyChecker
	for range 3 {
		hk, err := newHostKeyChecker(e)
		if err != nil {
			t.Fatal(err)
		}
		checkers = append(checkers, hk)
	}
	for _, hk := range checkers {
		if err := hk.callback(e.knownHostsName(), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22201}, host.PublicKey()); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(known)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 1 {
		t.Errorf("known_hosts has %d lines, want 1:\n%s", n, data)
	}
}

// TestFirstContactAlgorithms: a host not recorded yet is offered the
// library's default key types without the certificate ones, ssh-rsa
// included (an old bastion may offer nothing else), in its preference
// order.
func TestFirstContactAlgorithms(t *testing.T) {
	hk, err := newHostKeyChecker(&endpoint{host: "127.0.0.1", port: 22, knownHosts: []string{filepath.Join(t.TempDir(), "none")}})
	if err != nil {
		t.Fatal(err)
	}
	algos, recorded := hk.algorithms()
	if recorded || len(algos) == 0 || algos[0] != gossh.KeyAlgoECDSA256 || !slices.Contains(algos, gossh.KeyAlgoRSA) {
		t.Errorf("algorithms %v (recorded %v): want the default order, ecdsa first, ssh-rsa included", algos, recorded)
	}
	for _, a := range algos {
		if strings.Contains(a, "-cert-") {
			t.Errorf("certificate type %s offered to an unrecorded host", a)
		}
	}
}

// TestAcceptNewRefusesAnotherKeyRecordedMeanwhile: when another
// connection of the run recorded a different key for the same name, the
// second is a changed key, not a second line (strict checking would then
// take either).
func TestAcceptNewRefusesAnotherKeyRecordedMeanwhile(t *testing.T) {
	known := filepath.Join(t.TempDir(), "known_hosts")
	e := &endpoint{host: "127.0.0.1", port: 22201, knownHosts: []string{known}, policy: HostKeyAcceptNew}
	_, first := newKey(t, keyEd25519)
	_, other := newKey(t, keyEd25519)
	a, err := newHostKeyChecker(e)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newHostKeyChecker(e)
	if err != nil {
		t.Fatal(err)
	}
	remote := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22201}
	if err := a.callback(e.knownHostsName(), remote, first.PublicKey()); err != nil {
		t.Fatal(err)
	}
	if err := b.callback(e.knownHostsName(), remote, other.PublicKey()); !errors.Is(err, ErrChangedHostKey) {
		t.Errorf("another key recorded meanwhile: %v, want a changed key", err)
	}
	if data, _ := os.ReadFile(known); strings.Count(string(data), "\n") != 1 {
		t.Errorf("known_hosts:\n%s\nwant the first key alone", data)
	}
}
