package testhost

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// A test binary killed before its clean-up (go test -timeout, SIGKILL,
// Ctrl-C) leaves behind what it started: postmasters daemonised by pg_ctl,
// sshd, Patroni and etcd, and their directories, holding ports, memory and
// huge pages. So everything testhost starts is recorded in a machine-wide
// registry, one directory per test binary named by its PID and start time
// (a PID used again is another owner), and whatever testhost starts next,
// or the kernel lock taken, first reaps what owners no longer running left
// there. Owners still running are never touched: their tests may run in
// parallel in another package. Nothing is signalled before it is proved to
// be the process recorded (pidfd, then /proc), and only directories named
// like testhost's are removed.

// RegistryDir holds one directory per test binary that started something.
const RegistryDir = "/run/pgtune-test"

// record is one thing an owner started, as its file in the owner's
// directory says.
type record struct {
	Kind string `json:"kind"` // "postgres", "process" or "dir"
	// postgres: the cluster's data directory and binaries; its postmaster
	// is the process of postmaster.pid whose cwd is the data directory
	// and whose executable is BinDir/postgres.
	DataDir string `json:"data_dir,omitempty"`
	BinDir  string `json:"bin_dir,omitempty"`
	// process: a process testhost started in its own process group, by
	// PID and start time (/proc/PID/stat field 22).
	PID   int    `json:"pid,omitempty"`
	Start string `json:"start,omitempty"`
	Name  string `json:"name,omitempty"` // for the log
	// dir: removed once the processes are gone.
	Path string `json:"path,omitempty"`
}

var (
	// regMu orders register and forget: the last forget removes the
	// owner's directory, the next register makes it again.
	regMu     sync.Mutex
	recordSeq atomic.Int64
)

// ownDir is this test binary's directory in the registry.
func ownDir() (string, error) {
	start, err := procStart(os.Getpid())
	if err != nil {
		return "", err
	}
	return filepath.Join(RegistryDir, fmt.Sprintf("%d-%s", os.Getpid(), start)), nil
}

// register records r for this test binary and returns the function that
// forgets it, for the clean-up that stopped or removed it. Without root
// (no registry, and testhost starts nothing) it records nothing.
func register(t testing.TB, r record) (forget func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		return func() {}
	}
	regMu.Lock()
	defer regMu.Unlock()
	dir, err := ownDir()
	if err == nil {
		err = os.MkdirAll(dir, 0o700)
	}
	if err != nil {
		t.Fatalf("testhost: registry: %v", err)
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("testhost: registry: %v", err)
	}
	p := filepath.Join(dir, fmt.Sprintf("%06d.json", recordSeq.Add(1)))
	if err := os.WriteFile(p+".tmp", data, 0o600); err != nil {
		t.Fatalf("testhost: registry: %v", err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		t.Fatalf("testhost: registry: %v", err)
	}
	return func() {
		regMu.Lock()
		defer regMu.Unlock()
		_ = os.Remove(p)
		_ = os.Remove(dir) // when it was the last: nothing for a reaper to look at
	}
}

// registerProcess records cmd, just started in its own process group.
func registerProcess(t testing.TB, cmd *exec.Cmd) (forget func()) {
	t.Helper()
	start, err := procStart(cmd.Process.Pid)
	if err != nil {
		// Gone already: its starter sees it exit.
		return func() {}
	}
	return register(t, record{Kind: "process", PID: cmd.Process.Pid, Start: start, Name: filepath.Base(cmd.Path)})
}

// Reap stops what test binaries that are no longer running left behind
// (see RegistryDir) and removes their directories. testhost calls it
// before it starts anything and when it takes the kernel lock.
func Reap(t testing.TB) {
	t.Helper()
	if err := reapFor(t); err != nil {
		t.Fatalf("testhost: %v", err)
	}
}

// reapFor is Reap returning the error, for a caller with a lock to let go.
func reapFor(t testing.TB) error {
	if os.Geteuid() != 0 {
		return nil
	}
	if err := reap(t.Logf); err != nil {
		return fmt.Errorf("reap what killed tests left: %w", err)
	}
	return nil
}

func reap(logf func(string, ...any)) error {
	if err := os.MkdirAll(RegistryDir, 0o700); err != nil {
		return err
	}
	// One reaper at a time: two would stop the same processes.
	lock, err := os.OpenFile(filepath.Join(RegistryDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := flock(lock, syscall.LOCK_EX); err != nil {
		return err
	}
	entries, err := os.ReadDir(RegistryDir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		pid, start, ok := strings.Cut(e.Name(), "-")
		n, err := strconv.Atoi(pid)
		if !ok || err != nil {
			continue
		}
		if now, err := procStart(n); err == nil && now == start {
			continue // its owner runs: not ours to touch
		}
		if err := reapOwner(filepath.Join(RegistryDir, e.Name()), logf); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// reapOwner undoes what a dead owner recorded: processes first, then
// clusters (Patroni's among them), then directories.
func reapOwner(dir string, logf func(string, ...any)) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	recs := map[string]record{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			logf("testhost: reap: %v (ignored)", err)
			continue
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil {
			logf("testhost: reap: %s: %v (ignored)", f, err)
			_ = os.Remove(f)
			continue
		}
		recs[f] = r
	}
	// In this order: processes first, then clusters, then directories.
	kinds := []string{"process", "postgres", "dir"}
	for f, r := range recs {
		if !slices.Contains(kinds, r.Kind) {
			// Written by another version of this package (a branch on
			// a shared machine): left for a reaper that knows it.
			logf("testhost: reap: %s: unknown kind %q (left)", f, r.Kind)
		}
	}
	for _, kind := range kinds {
		for f, r := range recs {
			if r.Kind != kind {
				continue
			}
			var err error
			switch kind {
			case "process":
				err = reapProcess(r, logf)
			case "postgres":
				err = reapPostgres(r, logf)
			case "dir":
				err = reapDir(r, logf)
			}
			// What resists even SIGKILL (a process stuck in the
			// kernel) is reported and given up on: tried at every
			// reap, it would stall and fail every test after it.
			if err != nil {
				logf("testhost: reap: %v (given up)", err)
			}
			_ = os.Remove(f)
		}
	}
	// Leftover temporary files of a record being written when it died.
	tmps, _ := filepath.Glob(filepath.Join(dir, "*.tmp"))
	for _, f := range tmps {
		_ = os.Remove(f)
	}
	// What cannot be removed (a record left above, an unreadable one) is
	// reported, not fatal: an error here would fail every test after it
	// until someone cleaned the registry by hand.
	if err := os.Remove(dir); err != nil {
		logf("testhost: reap: %v (left)", err)
	}
	return nil
}

// reapProcess ends a recorded process and its process group, if the
// process is still the one recorded.
func reapProcess(r record, logf func(string, ...any)) error {
	fd, err := unix.PidfdOpen(r.PID, 0)
	if err != nil {
		return nil // gone (ESRCH)
	}
	defer unix.Close(fd)
	// The pidfd pins the process: checked now, it stays the one checked.
	f, err := procStat(r.PID)
	if err != nil || f[19] != r.Start || f[0] == "Z" {
		return nil // the PID names another process now, or a dead one
	}
	logf("testhost: reap: %s (pid %d) left by a killed test", r.Name, r.PID)
	group := procGroup(r.PID) == r.PID
	signal := func(sig unix.Signal) {
		_ = unix.PidfdSendSignal(fd, sig, nil, 0)
		// While the leader lives its PID is its group's, so the group
		// is its own: its children (sshd's sessions) go with it.
		if group && !exited(fd, 0) {
			_ = unix.Kill(-r.PID, sig)
		}
	}
	signal(unix.SIGTERM)
	if exited(fd, 30*time.Second) {
		return nil
	}
	signal(unix.SIGKILL)
	if !exited(fd, 10*time.Second) {
		return fmt.Errorf("%s (pid %d) survived SIGKILL", r.Name, r.PID)
	}
	return nil
}

// reapPostgres stops a recorded cluster's postmaster (immediate shutdown:
// the cluster is thrown away) if postmaster.pid names a process that is
// that cluster's postmaster.
func reapPostgres(r record, logf func(string, ...any)) error {
	b, err := os.ReadFile(filepath.Join(r.DataDir, "postmaster.pid"))
	if err != nil {
		return nil // not running (or never started)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	if !isPostmaster(pid, r.DataDir, r.BinDir) {
		return nil // a stale postmaster.pid; the PID is someone else's
	}
	logf("testhost: reap: postmaster %d of %s left by a killed test", pid, r.DataDir)
	_ = unix.PidfdSendSignal(fd, unix.SIGQUIT, nil, 0) // immediate shutdown
	if exited(fd, 30*time.Second) {
		return nil
	}
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	if !exited(fd, 10*time.Second) {
		return fmt.Errorf("postmaster %d of %s survived SIGKILL", pid, r.DataDir)
	}
	return nil
}

// isPostmaster says whether pid runs binDir/postgres in dataDir (the
// postmaster works in its data directory).
func isPostmaster(pid int, dataDir, binDir string) bool {
	proc := "/proc/" + strconv.Itoa(pid)
	cwd, err := os.Readlink(proc + "/cwd")
	if err != nil || !samePath(cwd, dataDir) {
		return false
	}
	exe, err := os.Readlink(proc + "/exe")
	return err == nil && samePath(exe, filepath.Join(binDir, "postgres"))
}

func samePath(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return ra == rb
}

// reapDir removes a recorded directory: only one testhost makes (tmpDir).
func reapDir(r record, logf func(string, ...any)) error {
	p := filepath.Clean(r.Path)
	if !tmpDir(p) {
		logf("testhost: reap: not removing %q: not a directory testhost makes", r.Path)
		return nil
	}
	if _, err := os.Lstat(p); err != nil {
		return nil
	}
	logf("testhost: reap: removing %s left by a killed test", p)
	return os.RemoveAll(p)
}

// tmpDir says whether p is named as testhost names its directories,
// pgtune-*, directly in a temporary directory: /tmp, /var/tmp, /dev/shm,
// this binary's $TMPDIR, or the pgtune-test-tmp-* one of these that
// testenv makes when the machine's is unsafe (another binary's $TMPDIR).
func tmpDir(p string) bool {
	if !filepath.IsAbs(p) || !strings.HasPrefix(filepath.Base(p), "pgtune-") {
		return false
	}
	root := func(d string) bool {
		return d == "/tmp" || d == "/var/tmp" || d == "/dev/shm"
	}
	parent := filepath.Dir(p)
	return root(parent) || parent == filepath.Clean(os.TempDir()) ||
		(strings.HasPrefix(filepath.Base(parent), "pgtune-test-tmp-") && root(filepath.Dir(parent)))
}

// TempDir is a directory like t.TempDir's, named pgtune-NAME-*, that a
// killed test binary does not leave behind either: removed in Cleanup,
// and recorded, so that the next Reap removes it when the binary was
// killed first.
func TempDir(t testing.TB, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgtune-"+name+"-")
	if err != nil {
		t.Fatalf("testhost: %v", err)
	}
	forget := register(t, record{Kind: "dir", Path: dir})
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("testhost: %v", err)
		}
		forget()
	})
	return dir
}

// exited waits up to d for the process of pidfd to end.
func exited(pidfd int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		ms := int(time.Until(deadline).Milliseconds())
		if ms < 0 {
			ms = 0
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, ms)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}

// procStat is /proc/PID/stat from field 3 on (after the command name,
// which may hold spaces).
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return nil, fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	return f, nil
}

// procStart is the process's start time in clock ticks since boot: with
// the PID, it names one process for the life of the machine.
func procStart(pid int) (string, error) {
	f, err := procStat(pid)
	if err != nil {
		return "", err
	}
	return f[19], nil
}

func procGroup(pid int) int {
	f, err := procStat(pid)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(f[2])
	return n
}

// startDying starts cmd so that it is killed when this test binary dies
// (Pdeathsig). The kernel sends that signal when the thread that forked
// the child exits, not the process: every such start runs on one thread
// kept for the purpose, which exits only with the process.
func startDying(cmd *exec.Cmd) error {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	done := make(chan error)
	spawnOnce.Do(func() { go spawner() })
	spawns <- spawnJob{cmd, done}
	return <-done
}

// spawner starts startDying's commands on its own thread, never let go:
// it lives as long as the process.
func spawner() {
	runtime.LockOSThread()
	for job := range spawns {
		job.done <- job.cmd.Start()
	}
}

// LeakOptions are the goleak options a package using testhost passes to
// goleak: spawner runs as long as the test binary, by design.
func LeakOptions() []goleak.Option {
	return []goleak.Option{goleak.IgnoreTopFunction("github.com/pgtune/pgtune/internal/testhost.spawner")}
}

type spawnJob struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnOnce sync.Once
	spawns    = make(chan spawnJob)
)
