package testhost

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// reapHelperEnv makes TestReapHelper run: the file it reports to.
const reapHelperEnv = "PGTUNE_TESTHOST_REAP_HELPER"

// helperReport is what a helper test binary started.
type helperReport struct {
	Owner    string // its registry directory
	PGRoot   string
	DataDir  string
	BinDir   string
	PGPID    int
	PGPort   int
	SSHDir   string
	SSHPID   int
	SSHStart string
	SSHPort  int
	// Home is the temporary HOME testenv gave the copy: its own clean-up
	// removes it, which a killed copy never runs.
	Home string
}

// TestReapHelper is run by TestReapKilledTest in a copy of this test
// binary: it starts a cluster and sshd, reports them, and holds them until
// its stdin ends (or it is killed).
func TestReapHelper(t *testing.T) {
	out := os.Getenv(reapHelperEnv)
	if out == "" {
		t.Skip("run by TestReapKilledTest")
	}
	c := Postgres(t)
	s := SSHD(t)
	own, err := ownDir()
	if err != nil {
		t.Fatal(err)
	}
	start, err := procStart(s.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	r := helperReport{Owner: own, PGRoot: c.Root, DataDir: c.DataDir, BinDir: c.BinDir, PGPID: c.PID(t), PGPort: c.Port,
		SSHDir: s.Dir, SSHPID: s.cmd.Process.Pid, SSHStart: start, SSHPort: s.Port, Home: os.Getenv("HOME")}
	b, _ := json.Marshal(r)
	if err := os.WriteFile(out+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// helper is a running TestReapHelper.
type helper struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    bytes.Buffer
	done   chan struct{}
	report helperReport
}

func startHelper(t *testing.T, name string) *helper {
	t.Helper()
	report := filepath.Join(t.TempDir(), name+".json")
	h := &helper{done: make(chan struct{})}
	h.cmd = exec.Command(os.Args[0], "-test.run=^TestReapHelper$", "-test.count=1", "-test.v")
	h.cmd.Env = append(os.Environ(), reapHelperEnv+"="+report)
	h.cmd.Stdout, h.cmd.Stderr = &h.out, &h.out
	var err error
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = h.cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		_ = h.cmd.Process.Kill()
		<-h.done
		if t.Failed() {
			t.Logf("helper %s:\n%s", name, h.out.String())
		}
		// A copy killed before its clean-up leaves testenv's HOME.
		if home := h.report.Home; filepath.IsAbs(home) && strings.HasPrefix(filepath.Base(home), "pgtune-test-home-") {
			_ = os.RemoveAll(home)
		}
	})
	return h
}

func (h *helper) await(t *testing.T, name string) {
	t.Helper()
	path := h.cmd.Env[len(h.cmd.Env)-1][len(reapHelperEnv)+1:]
	read := func() bool {
		b, err := os.ReadFile(path)
		return err == nil && json.Unmarshal(b, &h.report) == nil
	}
	if !AwaitFiles(t, name+" to start its cluster and sshd", []string{filepath.Dir(path)}, h.done, read) {
		t.Fatalf("helper %s ended before it reported:\n%s", name, h.out.String())
	}
}

// alive says whether pid is still the process that started at start.
func alive(pid int, start string) bool {
	now, err := procStart(pid)
	return err == nil && now == start
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// TestReapKilledTest: a test binary killed with a cluster and sshd up
// leaves sshd to die with it (Pdeathsig) and its postmaster, port and
// directories to the next testhost call, which stops and removes them;
// what a test binary still running started (another one's, this one's)
// is left alone.
func TestReapKilledTest(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and sshd in helper test binaries")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	mine := Postgres(t)
	minePID := mine.PID(t)

	var helpers []*helper
	// Registered first, so run last: no copy's temporary HOME is left.
	t.Cleanup(func() {
		for _, h := range helpers {
			if h.report.Home != "" && exists(h.report.Home) {
				t.Errorf("a helper's temporary HOME %s was left behind", h.report.Home)
			}
		}
	})
	killed, live := startHelper(t, "killed"), startHelper(t, "live")
	helpers = append(helpers, killed, live)
	var wg sync.WaitGroup
	for _, x := range []struct {
		h    *helper
		name string
	}{{killed, "killed"}, {live, "live"}} {
		wg.Add(1)
		go func() { defer wg.Done(); x.h.await(t, x.name) }()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	k, l := killed.report, live.report
	// Whatever happens below, nothing of the killed helper's stays.
	t.Cleanup(func() { Reap(t) })

	if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-killed.done

	// sshd ends with the binary that started it.
	if fd, err := unix.PidfdOpen(k.SSHPID, 0); err == nil {
		if alive(k.SSHPID, k.SSHStart) && !exited(fd, 10*time.Second) {
			t.Errorf("sshd %d outlived the test binary that started it", k.SSHPID)
		}
		unix.Close(fd)
	}
	// pg_ctl's postmaster does not: it is the reaper's.
	if !isPostmaster(k.PGPID, k.DataDir, k.BinDir) {
		t.Fatalf("the killed helper's postmaster %d is gone before any reap: the test proves nothing", k.PGPID)
	}

	Postgres(t, Stopped()) // the next testhost call

	if isPostmaster(k.PGPID, k.DataDir, k.BinDir) {
		t.Errorf("the killed helper's postmaster %d still runs", k.PGPID)
	}
	for _, port := range []int{k.PGPort, k.SSHPort} {
		if !portFree(port) {
			t.Errorf("port %d of the killed helper still taken", port)
		}
	}
	for _, d := range []string{k.PGRoot, k.SSHDir, k.Owner} {
		if exists(d) {
			t.Errorf("%s of the killed helper not removed", d)
		}
	}

	// The live helper's and this binary's are untouched.
	if !isPostmaster(l.PGPID, l.DataDir, l.BinDir) {
		t.Errorf("the live helper's postmaster %d was stopped", l.PGPID)
	}
	if !alive(l.SSHPID, l.SSHStart) {
		t.Errorf("the live helper's sshd %d was stopped", l.SSHPID)
	}
	for _, d := range []string{l.PGRoot, l.SSHDir, l.Owner} {
		if !exists(d) {
			t.Errorf("%s of the live helper was removed", d)
		}
	}
	if !mine.Running() || mine.PID(t) != minePID {
		t.Errorf("this test's own postmaster %d was stopped", minePID)
	}
	if got := mine.Query(t, "SELECT 1"); got != "1" {
		t.Errorf("this test's cluster answers %q", got)
	}

	// The live helper ends as tests do and cleans up after itself.
	live.stdin.Close()
	<-live.done
	if live.cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("live helper failed:\n%s", live.out.String())
	}
	if isPostmaster(l.PGPID, l.DataDir, l.BinDir) || exists(l.PGRoot) || exists(l.SSHDir) || exists(l.Owner) {
		t.Errorf("the live helper's clean-up left its cluster, directories or registry entry")
	}
}
