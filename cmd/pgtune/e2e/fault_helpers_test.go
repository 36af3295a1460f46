package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/pgtune/pgtune/internal/mask"
	"github.com/pgtune/pgtune/internal/testhost"
)

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a pgtune process under test.
type proc struct {
	cmd    *exec.Cmd
	out    syncBuffer
	done   chan struct{}
	code   int
	signal syscall.Signal
}

func startPgtune(t *testing.T, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		if ee, ok := err.(*exec.ExitError); ok {
			p.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.signal = ws.Signal()
			}
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// waitFor blocks until cond holds, re-checking it on every change in dir
// (no polling); the process p, when given, must not end first (that would
// mean the kill point was never reached).
func waitFor(t *testing.T, what string, p *proc, dir string, cond func() bool) {
	t.Helper()
	var stop chan struct{}
	if p != nil {
		stop = p.done
	}
	if !testhost.AwaitFiles(t, what, []string{dir}, stop, cond) {
		t.Fatalf("pgtune ended (exit %d) before %s:\n%s", p.code, what, p.out.String())
	}
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// restartTemps lists the restart's files in /tmp (restartScript's
// mktemp), by name.
func restartTemps() map[string]bool {
	m, _ := filepath.Glob("/tmp/pgtune-restart.*")
	names := map[string]bool{}
	for _, p := range m {
		names[p] = true
	}
	return names
}

// newNames is the names in now that were not in before.
func newNames(now, before map[string]bool) []string {
	var out []string
	for n := range now {
		if !before[n] {
			out = append(out, n)
		}
	}
	return out
}

// strayTemps lists pgtune's temporary files (.pgtune-*) under dirs.
func strayTemps(dirs ...string) []string {
	var out []string
	for _, d := range dirs {
		_ = filepath.Walk(d, func(p string, info os.FileInfo, err error) error {
			if err == nil && strings.HasPrefix(info.Name(), ".pgtune-") {
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}

// fileStates is what a managed file may hold: its content before the run
// ("" with existed false: absent) or the content the plan writes.
type fileState struct {
	before, after string
	existed       bool
}

// managedFiles takes the file changes of a check report.
func managedFiles(r jsonReport) map[string]fileState {
	m := map[string]fileState{}
	for _, h := range r.Hosts {
		for _, c := range h.Changes {
			if strings.HasPrefix(c.Target, "/") {
				m[c.Target] = fileState{before: c.Before, after: c.After, existed: c.Before != ""}
			}
		}
	}
	return m
}

// checkWhole fails the test for any managed file that holds neither its
// old nor its new content (a half-written file), and for stray temps.
func checkWhole(t *testing.T, files map[string]fileState, dirs ...string) {
	t.Helper()
	for p, s := range files {
		b, err := os.ReadFile(p)
		switch {
		case os.IsNotExist(err) && !s.existed:
		case err != nil:
			t.Errorf("%s: %v", p, err)
		// The plan came from the JSON report, whose before and after
		// are masked (a commented #password_encryption line included).
		case !sameContent(string(b), s.before) && !sameContent(string(b), s.after):
			t.Errorf("%s is neither the old nor the new content:\n%s", p, b)
		}
	}
	// A remote write that was under way when the controller died still
	// finishes on its own (and renames or removes its temporary): wait
	// for that, watching every directory a temporary can be in.
	watch := append([]string(nil), dirs...)
	for p := range files {
		watch = append(watch, filepath.Dir(p))
	}
	for _, p := range strayTemps(dirs...) {
		watch = append(watch, filepath.Dir(p))
	}
	testhost.AwaitFiles(t, "the temporary files to go", watch, nil, func() bool { return len(strayTemps(dirs...)) == 0 })
}

// sameContent says whether a file's content is what a report showed,
// the report's masking applied.
func sameContent(disk, shown string) bool {
	return disk == shown || mask.Config(disk) == shown
}

// waitPostgresUp waits until the cluster accepts connections again (a
// restart begun by a killed run completes on its own) and returns the
// postmaster's PID. It waits on postmaster.pid, where the postmaster
// writes "ready" once it accepts connections (as pg_ctl -w does).
func waitPostgresUp(t *testing.T, pg *testhost.Cluster) int {
	t.Helper()
	testhost.AwaitFiles(t, "postgres to be up (pgtune left it stopped?)", []string{pg.DataDir}, nil, pg.Ready)
	if _, err := pg.TryQuery("SELECT 1"); err != nil {
		t.Fatalf("postgres says ready but refuses a query: %v\nserver log:\n%s", err, pg.Log(t))
	}
	return pg.PID(t)
}

// restartHook writes a pg_restart script for the cluster that stops the
// server, touches flag (the test's kill point: postgres is down), lingers
// for linger seconds, and starts it again on its port and socket.
func restartHook(t *testing.T, dir string, pg *testhost.Cluster, flag string, linger int) string {
	t.Helper()
	hook := filepath.Join(dir, "restart.sh")
	pgctl := filepath.Join(pg.BinDir, "pg_ctl")
	writeFile(t, hook, fmt.Sprintf(`#!/bin/sh
runuser -u %[1]s -- %[2]s -D %[3]s -w -t 60 -m fast stop
touch %[4]s
sleep %[5]d
exec runuser -u %[1]s -- %[2]s -D %[3]s -l %[6]s -w -t 60 -o "-p %[7]d -k %[8]s -c listen_addresses=127.0.0.1" start
`, pg.Owner, pgctl, pg.DataDir, flag, linger, pg.LogFile, pg.Port, pg.SocketDir))
	return hook
}

// killSSHD kills the sshd fixture and every connection it serves, as a
// host dropping off the network would look from the controller: the
// listener and all its sshd descendants (per-connection processes call
// setsid, so they are not in the listener's process group). The commands
// the sessions run are left alone, as they would be on a real host.
func killSSHD(t *testing.T, s *testhost.SSHServer) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Dir, "sshd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		t.Fatalf("sshd.pid: %q", b)
	}
	for _, p := range append(sshdDescendants(pid), pid) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// sshdDescendants lists the sshd processes below pid.
func sshdDescendants(pid int) []int {
	children := map[int][]int{}
	comm := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		st := string(b)
		open, close := strings.IndexByte(st, '('), strings.LastIndexByte(st, ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(st[close+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], p)
		comm[p] = st[open+1 : close]
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			if strings.HasPrefix(comm[c], "sshd") {
				out = append(out, c)
				walk(c)
			}
		}
	}
	walk(pid)
	return out
}

// closedPort returns a local port with nothing listening on it.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

// blackhole listens on a local port and accepts connections without ever
// answering, like a host whose sshd hangs: the SSH handshake times out.
func blackhole(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().(*net.TCPAddr).Port
}
