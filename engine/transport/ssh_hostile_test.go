package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gliderssh "github.com/gliderlabs/ssh"
	"go.uber.org/goleak"

	"github.com/pgtune/pgtune/internal/testhost"
	gossh "golang.org/x/crypto/ssh"
)

// These tests put the transport in front of SSH servers that misbehave
// (in process, gliderlabs/ssh): a hostile or broken host must fail only
// itself, within a bound, naming the host and the step, and leave no
// goroutine behind once the connection is closed.

// hostileTimeout is the connect timeout of these tests: the bound on
// every wait for the host's SSH server itself.
const hostileTimeout = time.Second

// leakCheck fails t if goroutines started during it outlive its cleanups
// (the connection's Close, the server's shutdown). Call it first: cleanups
// run last registered first.
func leakCheck(t *testing.T) {
	t.Helper()
	opts := append(testhost.LeakOptions(), goleak.IgnoreCurrent())
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
}

// hostileConfig reaches srv with the short connect timeout.
func hostileConfig(t *testing.T, srv *testServer, key string) SSHConfig {
	cfg := srv.baseConfig(key, writeKnownHosts(t, srv.knownHostsLine(keyEd25519)))
	cfg.ConnectTimeout = hostileTimeout
	return cfg
}

// runBounded runs cmd on c under a context far longer than the bound under
// test, and fails if the Run needed that context to return.
func runBounded(t *testing.T, c *SSH, cmd Command) (Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var res Result
	var err error
	start := time.Now()
	returns(t, cmd.String(), func() { res, err = c.Run(ctx, cmd) })
	if ctx.Err() != nil {
		t.Fatalf("%s: returned only at the caller's deadline (%v): %v", cmd, time.Since(start), err)
	}
	return res, err
}

// TestSSHSessionNeverAnswered: a server that takes the session request or
// the exec request and never answers fails the Run after the connect
// timeout, in exec mode and in the privileged shell's, with an error that
// names the host, the command and the step.
func TestSSHSessionNeverAnswered(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler func(gossh.NewChannel, gliderssh.Context)
		step    string
	}{
		{"session never confirmed", neverConfirmed, "did not answer the request for a session"},
		{"exec request never answered", execNeverAnswered, "did not answer the exec request"},
	} {
		for _, shell := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/shell=%v", tc.name, shell), func(t *testing.T) {
				leakCheck(t)
				key, pub := clientKey(t)
				srv := newTestServer(t, []gossh.PublicKey{pub}, withSessionChannels(tc.handler))
				cfg := hostileConfig(t, srv, key)
				cmd := Command{Args: []string{"echo", "hi"}}
				if shell {
					cfg.User, cfg.PrivilegedShell, cmd.Become = "root", true, true
				}
				c := dial(t, cfg)
				for range 2 { // and again: the first failure left nothing stuck
					_, err := runBounded(t, c, cmd)
					if !errors.Is(err, ErrNoResponse) {
						t.Fatalf("err = %v, want ErrNoResponse", err)
					}
					for _, want := range []string{"echo hi", srv.Addr, tc.step, "within " + hostileTimeout.String()} {
						if !strings.Contains(err.Error(), want) {
							t.Errorf("err = %q, want it to name %q", err, want)
						}
					}
				}
				returns(t, "Close", func() { c.Close() })
			})
		}
	}
}

// TestSSHSessionHeldOpenAfterExit: the exit status and the end of both
// streams end a command, whether or not the server ever closes the
// channel; without the end of its streams the channel is given up after
// the connect timeout without output, instead of holding the Run until
// --timeout.
func TestSSHSessionHeldOpenAfterExit(t *testing.T) {
	t.Run("exit status and EOF, never closed", func(t *testing.T) {
		leakCheck(t)
		key, pub := clientKey(t)
		srv := newTestServer(t, []gossh.PublicKey{pub}, withSessionChannels(exitNeverClosed(true, 0)))
		// A connect timeout past runBounded's deadline: a Run that waited
		// for the close would be ended by that deadline (and fail there),
		// whatever the machine's load, instead of being timed.
		cfg := hostileConfig(t, srv, key)
		cfg.ConnectTimeout = 2 * time.Minute
		c := dial(t, cfg)
		res, err := runBounded(t, c, Command{Args: []string{"true"}})
		var xe *ExitError
		if !errors.As(err, &xe) || res.ExitCode != 3 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
			t.Fatalf("res %+v, err %v; want exit 3 with its output", res, err)
		}
	})
	t.Run("exit status, output never ended", func(t *testing.T) {
		leakCheck(t)
		key, pub := clientKey(t)
		srv := newTestServer(t, []gossh.PublicKey{pub}, withSessionChannels(exitNeverClosed(false, 0)))
		c := dial(t, hostileConfig(t, srv, key))
		_, err := runBounded(t, c, Command{Args: []string{"true"}})
		if !errors.Is(err, ErrNoResponse) || !strings.Contains(err.Error(), "kept the session open") ||
			!strings.Contains(err.Error(), srv.Addr) || !strings.Contains(err.Error(), "true") {
			t.Fatalf("err = %v, want the session held open, naming host and command", err)
		}
	})
	t.Run("output keeps coming after the exit status", func(t *testing.T) {
		leakCheck(t)
		key, pub := clientKey(t)
		srv := newTestServer(t, []gossh.PublicKey{pub}, withSessionChannels(exitNeverClosed(true, 12)))
		// 12 lines 300 ms apart: 3.6 s in all, over a 3 s connect
		// timeout, but never near that long without output, even on a
		// loaded machine (a 1 s timeout left a gap only 0.7 s of slack).
		cfg := hostileConfig(t, srv, key)
		cfg.ConnectTimeout = 3 * time.Second
		c := dial(t, cfg)
		res, err := runBounded(t, c, Command{Args: []string{"true"}})
		want := "out\n"
		for i := range 12 {
			want += fmt.Sprintf("late %d\n", i)
		}
		if res.ExitCode != 3 || string(res.Stdout) != want {
			t.Fatalf("stdout %q, exit %d, %v; want %q, exit 3", res.Stdout, res.ExitCode, err, want)
		}
	})
}

// TestSSHBannerTrickle: a "server" that trickles banner lines and never
// sends its version (or a tarpit) fails the dial at the connect timeout.
func TestSSHBannerTrickle(t *testing.T) {
	leakCheck(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				for i := 0; ; i++ {
					if _, err := fmt.Fprintf(conn, "Welcome, line %d of the banner\r\n", i); err != nil {
						return
					}
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond):
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		close(stop)
		wg.Wait()
	})
	key, _ := clientKey(t)
	port := ln.Addr().(*net.TCPAddr).Port
	cfg := SSHConfig{Name: "db1", Address: "127.0.0.1", Port: port, User: "tester", PrivateKeyFile: key,
		KnownHostsFile: writeKnownHosts(t), ConnectTimeout: hostileTimeout}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	returns(t, "DialSSH", func() {
		var c *SSH
		c, err = DialSSH(ctx, cfg)
		if c != nil {
			c.Close()
		}
	})
	if err == nil || !strings.Contains(err.Error(), "timed out after "+hostileTimeout.String()) || ctx.Err() != nil {
		t.Fatalf("err = %v, want the connect timeout", err)
	}
}

// fakeSudo makes the server's sudo a script: a kill session (killScript)
// always passes through it, so that stopping a shell works; what else it
// does is body's. Logins are "tester" and need become.
//
// Its mktemp logs what it makes (madeTemps), and the test removes it all:
// a shell killed with SIGKILL never runs the EXIT trap that removes its
// scratch directory (/run/pgtune-sh.*, or /tmp/tmp.* where /run is not
// writable), and each run would leave one behind.
func fakeSudo(t *testing.T, srv *testServer, body string) string {
	t.Helper()
	bin := t.TempDir()
	script := "#!/bin/sh\ncase \"$*\" in *'kill -s'*) shift 2; exec \"$@\";; esac\n" + body
	if err := os.WriteFile(filepath.Join(bin, "sudo"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// Resolved now: once bin leads PATH, "mktemp" is the wrapper itself.
	mktemp, err := exec.LookPath("mktemp")
	if err != nil {
		t.Fatal(err)
	}
	wrapper := "#!/bin/sh\np=$(" + Quote(mktemp) + " \"$@\") || exit\n" +
		"printf '%s\\n' \"$p\" >> " + Quote(filepath.Join(bin, madeTempsLog)) + " || exit\n" +
		"printf '%s\\n' \"$p\"\n"
	if err := os.WriteFile(filepath.Join(bin, "mktemp"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	// Registered after bin's own cleanup, so it runs first, while the log
	// is still there.
	t.Cleanup(func() {
		for _, p := range madeTemps(t, bin) {
			if err := os.RemoveAll(p); err != nil {
				t.Errorf("removing %s: %v", p, err)
			}
		}
	})
	srv.env = []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "FAKE_SUDO_DIR=" + bin}
	return bin
}

// madeTempsLog is the file, in fakeSudo's directory, where its mktemp logs
// each path it made.
const madeTempsLog = "mktemp.log"

// madeTemps returns the paths the mktemp of fakeSudo's dir made so far.
func madeTemps(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, madeTempsLog))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // no mktemp yet
	}
	if err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, p := range strings.Split(string(b), "\n") {
		if p != "" {
			made = append(made, p)
		}
	}
	return made
}

// passThrough is a sudo -n that lets everything run.
const passThrough = `shift 2; exec "$@"` + "\n"

// shellStarts counts the privileged shells the server was asked to start.
func shellStarts(srv *testServer) int {
	n := 0
	for _, c := range srv.Commands() {
		if strings.Contains(c, "IFS= read -r m") {
			n++
		}
	}
	return n
}

func shellCfg(t *testing.T, srv *testServer, key string) SSHConfig {
	cfg := hostileConfig(t, srv, key)
	cfg.PrivilegedShell = true
	return cfg
}

// TestSSHShellStartHostile: the privileged shell's start on a host whose
// sudo misbehaves ends within the connect timeout or the output cap, and
// never buffers more than the cap.
func TestSSHShellStartHostile(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sudo     string
		password string
		check    func(t *testing.T, err error)
	}{
		{name: "stderr flood", sudo: "exec cat /dev/zero >&2\n", check: func(t *testing.T, err error) {
			var tl *OutputTooLargeError
			if !errors.As(err, &tl) || tl.Stream != "stderr" {
				t.Fatalf("err = %v, want stderr over the cap", err)
			}
		}},
		{name: "stderr flood of lines", sudo: "yes 'sudo: unable to resolve host' >&2\n", check: func(t *testing.T, err error) {
			var tl *OutputTooLargeError
			if !errors.As(err, &tl) || tl.Stream != "stderr" {
				t.Fatalf("err = %v, want stderr over the cap", err)
			}
		}},
		{name: "MOTD trickle", sudo: "while :; do echo 'Welcome to db1' >&2; sleep 0.05; done\n", check: func(t *testing.T, err error) {
			if !errors.Is(err, ErrNoResponse) || !strings.Contains(err.Error(), "did not get through sudo within") {
				t.Fatalf("err = %v, want the start's bound", err)
			}
		}},
		{name: "never ready", sudo: `echo "pgtune-pid:$$" >&2; exec sleep 60` + "\n", check: func(t *testing.T, err error) {
			if !errors.Is(err, ErrNoResponse) || !strings.Contains(err.Error(), "was not ready within") {
				t.Fatalf("err = %v, want the start's bound", err)
			}
		}},
		// A password larger than the SSH window (2 MiB) to a sudo that
		// prompts and never reads: the write blocks, the start does not.
		{name: "password never read", sudo: `printf '%s' "$3" >&2; exec sleep 60` + "\n",
			password: strings.Repeat("p", 3<<20), check: func(t *testing.T, err error) {
				if !errors.Is(err, ErrNoResponse) || !strings.Contains(err.Error(), "did not get through sudo within") {
					t.Fatalf("err = %v, want the start's bound", err)
				}
				if strings.Contains(err.Error(), "ppppp") {
					t.Fatal("the password is in the error")
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			lowerOutputCap(t, 256<<10)
			key, pub := clientKey(t)
			srv := newTestServer(t, []gossh.PublicKey{pub})
			fakeSudo(t, srv, tc.sudo)
			cfg := shellCfg(t, srv, key)
			cfg.BecomePassword = tc.password
			c := dial(t, cfg)
			_, err := runBounded(t, c, Command{Args: []string{"id", "-u"}, Become: true})
			tc.check(t, err)
			if err != nil && !strings.Contains(err.Error(), "id -u") {
				t.Errorf("err = %q, want it to name the command", err)
			}
			returns(t, "Close", func() { c.Close() })
		})
	}
}

// TestSSHShellKilledMidCommand: a shell killed while it runs a command
// fails that command, and the next command runs in a new shell.
func TestSSHShellKilledMidCommand(t *testing.T) {
	leakCheck(t)
	key, pub := clientKey(t)
	srv := newTestServer(t, []gossh.PublicKey{pub})
	dir := fakeSudo(t, srv, passThrough)
	c := dial(t, shellCfg(t, srv, key))
	if res, err := runBounded(t, c, Command{Args: []string{"echo", "first"}, Become: true}); err != nil || string(res.Stdout) != "first\n" {
		t.Fatalf("first: %q, %v", res.Stdout, err)
	}
	c.shellMu.Lock()
	pid := c.shell.pid
	c.shellMu.Unlock()

	started := filepath.Join(dir, "started")
	done := make(chan error, 1)
	go func() {
		_, err := c.Run(context.Background(), Command{Args: []string{"sh", "-c", `touch "$1"; exec sleep 60`, "sh", started}, Become: true})
		done <- err
	}()
	waitFile(t, started)
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		var xe *ExitError
		if err == nil || errors.As(err, &xe) || !strings.Contains(err.Error(), "privileged shell ended") {
			t.Fatalf("killed mid-command: err = %v, want the shell's end", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("the command outlived its shell")
	}
	res, err := runBounded(t, c, Command{Args: []string{"echo", "next"}, Become: true})
	if err != nil || string(res.Stdout) != "next\n" {
		t.Fatalf("next: %q, %v", res.Stdout, err)
	}
	if n := shellStarts(srv); n != 2 {
		t.Errorf("%d shells started, want 2 (the killed one never reused)", n)
	}
	// The killed shell's scratch directory outlives it: fakeSudo's cleanup
	// removes it only if its mktemp saw it made.
	if made := madeTemps(t, dir); len(made) == 0 {
		t.Error("fakeSudo's mktemp logged no directory: the killed shell's would be left behind")
	}
}

// waitFile waits, bounded, for path to exist.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSSHShellCancelledStart: a start cancelled by the caller (while sudo
// runs, or while the shell gets ready) fails that command only; the next
// command starts the shell again instead of finding it turned off.
func TestSSHShellCancelledStart(t *testing.T) {
	for _, tc := range []struct{ name, slow string }{
		{"in sudo", `sleep 5`},
		{"getting ready", `echo "pgtune-pid:$$" >&2; sleep 5`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leakCheck(t)
			key, pub := clientKey(t)
			srv := newTestServer(t, []gossh.PublicKey{pub})
			// Slow once: the first start only.
			dir := fakeSudo(t, srv, `if [ -e "$FAKE_SUDO_DIR/slow" ]; then rm -f "$FAKE_SUDO_DIR/slow"; `+tc.slow+`; fi`+"\n"+passThrough)
			if err := os.WriteFile(filepath.Join(dir, "slow"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			c := dial(t, shellCfg(t, srv, key))
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			var err error
			returns(t, "cancelled start", func() { _, err = c.Run(ctx, Command{Args: []string{"echo", "cancelled"}, Become: true}) })
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want the caller's deadline", err)
			}
			res, err := runBounded(t, c, Command{Args: []string{"echo", "ok"}, Become: true})
			if err != nil || string(res.Stdout) != "ok\n" {
				t.Fatalf("after the cancelled start: %q, %v", res.Stdout, err)
			}
			if n := shellStarts(srv); n != 2 {
				t.Errorf("%d shell starts, want 2: the cancelled start turned the shell off", n)
			}
			for _, cmd := range srv.Commands() {
				if strings.HasSuffix(cmd, " echo ok") || strings.HasSuffix(cmd, " echo cancelled") {
					t.Errorf("a command ran in a session of its own: %q", cmd)
				}
			}
		})
	}
}

// TestSSHShellStoppedNeverReused: a shell whose teardown could not end its
// session (a host that ignores the signal, the kill and the close; here
// simulated by stopping it without ending it) is never given another
// command: the next command starts a new shell.
func TestSSHShellStoppedNeverReused(t *testing.T) {
	leakCheck(t)
	key, pub := clientKey(t)
	srv := newTestServer(t, []gossh.PublicKey{pub})
	fakeSudo(t, srv, passThrough)
	c := dial(t, shellCfg(t, srv, key))
	if _, err := runBounded(t, c, Command{Args: []string{"true"}, Become: true}); err != nil {
		t.Fatal(err)
	}
	c.shellMu.Lock()
	old := c.shell
	c.shellMu.Unlock()
	old.stopOnce.Do(func() { close(old.stop) }) // as a teardown that ran out of time
	res, err := runBounded(t, c, Command{Args: []string{"echo", "next"}, Become: true})
	if err != nil || string(res.Stdout) != "next\n" {
		t.Fatalf("next: %q, %v", res.Stdout, err)
	}
	c.shellMu.Lock()
	now := c.shell
	c.shellMu.Unlock()
	if now == old || shellStarts(srv) != 2 {
		t.Fatalf("the stopped shell was reused (%d shell starts)", shellStarts(srv))
	}
}

// stallProxy forwards TCP to backend until the client has sent after
// bytes, then stops reading from the client (the connection stays open):
// a host whose kernel stopped taking data, so that the client's writes
// block once the socket buffers are full.
type stallProxy struct {
	port int
}

func newStallProxy(t *testing.T, backend string, after int64) *stallProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{port: ln.Addr().(*net.TCPAddr).Port}
	release := make(chan struct{})
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// A small receive buffer: the stall shows at once.
			c.(*net.TCPConn).SetReadBuffer(4096)
			b, err := net.Dial("tcp", backend)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, b)
			mu.Unlock()
			wg.Add(2)
			go func() { // client → backend, until after bytes
				defer wg.Done()
				buf := make([]byte, 4096)
				var n int64
				for n < after {
					m, err := c.Read(buf[:min(int64(len(buf)), after-n)])
					if m > 0 {
						b.Write(buf[:m])
						n += int64(m)
					}
					if err != nil {
						b.Close()
						return
					}
				}
				<-release
			}()
			go func() { // backend → client
				defer wg.Done()
				io.Copy(c, b)
				c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		close(release)
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return p
}

// TestSSHStalledConnection: once the host stops reading (its TCP window
// shut while commands still send their stdin), cancelled Runs return
// within the kill grace and the connect timeout, not when the keepalive
// gives the connection up. The keepalive's probes are spaced past the
// hang guard here, so Runs that waited for it would fail on the guard:
// no clock is read to tell.
func TestSSHStalledConnection(t *testing.T) {
	leakCheck(t)
	old := killGrace
	killGrace = time.Second
	t.Cleanup(func() { killGrace = old })
	oldKeepalive := keepaliveInterval
	keepaliveInterval = hangGuard
	t.Cleanup(func() { keepaliveInterval = oldKeepalive })
	key, pub := clientKey(t)
	srv := newTestServer(t, []gossh.PublicKey{pub})
	px := newStallProxy(t, srv.Addr, 4<<20)
	cfg := hostileConfig(t, srv, key)
	cfg.KnownHostsFile = writeKnownHosts(t, strings.Replace(srv.knownHostsLine(keyEd25519), itoa(srv.Port), itoa(px.port), 1))
	cfg.Port = px.port
	c := dial(t, cfg)

	// Five sessions, each with up to 2 MiB in flight (its window): more
	// than the socket buffers hold once the proxy stops reading.
	in := make([]byte, 32<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, maxSessions)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = c.Run(ctx, Command{Args: []string{"sh", "-c", "cat >/dev/null"}, Stdin: in})
		}()
	}
	returns(t, "Runs over a stalled connection", wg.Wait)
	for i, err := range errs {
		if err == nil {
			t.Errorf("run %d: succeeded over a stalled connection", i)
		}
	}
	returns(t, "Close", func() { c.Close() })
}
