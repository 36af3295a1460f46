package testhost

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// PIDNamespace is a PID namespace with its own /proc: a host on which the
// only processes are the ones a test starts there. Discovery without
// pg_data reads every process of /proc, and a machine running other
// tests' clusters never has one postmaster alone; and PIDs there are
// handed out one after the other from 1, so the next PID tells how many
// processes a piece of work started.
type PIDNamespace struct {
	init int // the namespace's init (a sleep), as this machine sees it
}

// NewPIDNamespace starts one (root); it ends, with every process in it,
// when the test does.
func NewPIDNamespace(t testing.TB) *PIDNamespace {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace needs root")
	}
	// --kill-child: when unshare ends, its child (the namespace's init)
	// is killed, and with it every process of the namespace. Pdeathsig
	// ends unshare when the thread that started it ends, which for a
	// test is its process dying without its clean-up (a panic, a
	// timeout): the lock keeps the start on one thread. The child says
	// when it runs, after unshare mounted the namespace's /proc, and then
	// becomes the sleep.
	holder := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
		"sh", "-c", "echo ready; exec sleep infinity")
	holder.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatalf("testhost: unshare: %v", err)
	}
	runtime.LockOSThread()
	err = holder.Start()
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatalf("testhost: unshare: %v", err)
	}
	t.Cleanup(func() {
		_ = holder.Process.Kill()
		_ = holder.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("testhost: unshare started no namespace: %q, %v", line, err)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", holder.Process.Pid, holder.Process.Pid))
	f := strings.Fields(string(b))
	if err != nil || len(f) != 1 {
		t.Fatalf("testhost: the namespace's init: %q, %v", b, err)
	}
	ns := &PIDNamespace{}
	if ns.init, err = strconv.Atoi(f[0]); err != nil {
		t.Fatalf("testhost: the namespace's init: %q", b)
	}
	return ns
}

// Args is args run inside the namespace (its PIDs and its /proc).
func (ns *PIDNamespace) Args(args ...string) []string {
	return append([]string{"nsenter", "-t", strconv.Itoa(ns.init), "-p", "-m", "--"}, args...)
}

// Command is an exec.Cmd of args inside the namespace.
func (ns *PIDNamespace) Command(args ...string) *exec.Cmd {
	a := ns.Args(args...)
	return exec.Command(a[0], a[1:]...)
}

// NextPID is the PID the namespace's next process will get: a process
// run to ask it takes the one before.
func (ns *PIDNamespace) NextPID(t testing.TB) int {
	t.Helper()
	out, err := ns.Command("sh", "-c", "echo $$").Output()
	if err != nil {
		t.Fatalf("testhost: the namespace's next PID: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("testhost: the namespace's next PID: %q", out)
	}
	return pid + 1
}

// StartIn starts the stopped cluster c inside ns, on its unix socket only
// (the namespace shares the network), with more postmaster options. Its
// clean-up, registered before the start so that it runs even when the
// start fails half-way, stops it there and removes postmaster.pid before
// the cluster's own clean-up runs: that one reads postmaster.pid, whose
// PID names another process outside the namespace.
func (c *Cluster) StartIn(t testing.TB, ns *PIDNamespace, options ...string) {
	t.Helper()
	if c.Port == 0 {
		c.Port = 5432 // its own socket directory: any port
	}
	c.inNamespace = true
	pgctl := filepath.Join(c.BinDir, "pg_ctl")
	t.Cleanup(func() {
		stop := ns.Command("runuser", "-u", c.Owner, "--", pgctl, "-D", c.DataDir, "-w", "-t", "30", "-m", "fast", "stop")
		stop.Dir = "/"
		if out, err := stop.CombinedOutput(); err != nil {
			t.Logf("testhost: pg_ctl stop in the namespace: %v: %s (the namespace's end kills it)", err, out)
		}
		_ = os.Remove(filepath.Join(c.DataDir, "postmaster.pid"))
	})
	start := ns.Command("runuser", "-u", c.Owner, "--", pgctl, "-D", c.DataDir, "-l", c.LogFile, "-w", "-t", "60",
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses='' %s", c.Port, c.SocketDir, strings.Join(options, " ")), "start")
	start.Dir = "/"
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("testhost: pg_ctl start in the namespace: %v\n%s\n%s", err, out, c.Log(t))
	}
}
