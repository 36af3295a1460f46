package testhost

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Cluster is a throwaway PostgreSQL cluster made by plain initdb (no
// conf.d, commented include_dir), run with pg_ctl by the `postgres` OS user
// on 127.0.0.1 and a unix socket inside its own temporary directory.
type Cluster struct {
	Root      string // temporary directory holding everything below
	DataDir   string
	BinDir    string
	SocketDir string
	LogFile   string // pg_ctl -l: the postmaster's stderr
	Owner     string
	Port      int
	// inNamespace: started by StartIn. Its postmaster.pid holds a PID of
	// the namespace, which names another process here: Stop and Running
	// refuse, and StartIn's clean-up stops it.
	inNamespace bool
}

// PGOption tunes Postgres.
type PGOption func(*pgOptions)

type pgOptions struct {
	binDir  string
	conf    []string
	noStart bool
}

// WithBinDir uses another PostgreSQL installation.
func WithBinDir(dir string) PGOption { return func(o *pgOptions) { o.binDir = dir } }

// WithConf appends lines to postgresql.conf before the first start.
func WithConf(lines ...string) PGOption {
	return func(o *pgOptions) { o.conf = append(o.conf, lines...) }
}

// Stopped leaves the cluster initialised but not running.
func Stopped() PGOption { return func(o *pgOptions) { o.noStart = true } }

// DefaultPGBin is where Debian's postgresql-15 package puts the binaries.
const DefaultPGBin = "/usr/lib/postgresql/15/bin"

// Postgres creates and starts a fresh cluster; it is stopped and removed in
// t.Cleanup. It needs root (it runs the server as `postgres`, creating that
// user when missing) and skips the test otherwise.
func Postgres(t testing.TB, opts ...PGOption) *Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs PostgreSQL as the postgres OS user")
	}
	o := pgOptions{binDir: DefaultPGBin}
	for _, f := range opts {
		f(&o)
	}
	if _, err := os.Stat(filepath.Join(o.binDir, "postgres")); err != nil {
		t.Fatalf("testhost: no PostgreSQL at %s: %v", o.binDir, err)
	}
	ensurePostgresUser(t)

	// t.TempDir lives under a 0700 root-only directory that postgres cannot
	// traverse, so make our own world-traversable root under /tmp.
	c := emptyCluster(t, o.binDir)

	PoolStill(t, func() {
		c.AsOwner(t, filepath.Join(c.BinDir, "initdb"), "-D", c.DataDir, "-A", "trust", "-E", "UTF8",
			"--locale=C", "--no-sync", "--no-instructions")
	})
	// Test clusters stay off huge pages unless pgtune puts them there (its
	// drop-in comes later and wins): with the stock huge_pages = try, a
	// cluster started by a test that does not hold the kernel lock would
	// take pages another package's test reserved under it.
	c.AppendConf(t, append([]string{"huge_pages = off	# testhost: see Postgres"}, o.conf...)...)
	if !o.noStart {
		c.Start(t)
	}
	return c
}

func ensurePostgresUser(t testing.TB) {
	if _, err := user.Lookup("postgres"); err == nil {
		return
	}
	out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home",
		"--home-dir", "/var/lib/postgresql", "--shell", "/bin/sh", "postgres").CombinedOutput()
	if err != nil {
		// A concurrent test may have created it in the meantime.
		if _, lerr := user.Lookup("postgres"); lerr == nil {
			return
		}
		t.Fatalf("testhost: useradd postgres: %v: %s", err, out)
	}
}

func chown(t testing.TB, owner string, paths ...string) {
	u, err := user.Lookup(owner)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	for _, p := range paths {
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
}

// ConfigFile is the cluster's postgresql.conf.
func (c *Cluster) ConfigFile() string { return filepath.Join(c.DataDir, "postgresql.conf") }

// AppendConf appends lines to postgresql.conf.
func (c *Cluster) AppendConf(t testing.TB, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(c.ConfigFile(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
}

// AsOwner runs a command as the cluster owner and returns its stdout; a
// failure fails the test with the command's output.
func (c *Cluster) AsOwner(t testing.TB, args ...string) string {
	t.Helper()
	out, err := c.TryAsOwner(args...)
	if err != nil {
		t.Fatalf("testhost: %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// TryAsOwner is AsOwner returning the error (with stderr) instead.
func (c *Cluster) TryAsOwner(args ...string) (string, error) {
	cmd := exec.Command("runuser", append([]string{"-u", c.Owner, "--"}, args...)...)
	cmd.Dir = "/"
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s%s", err, stderr.String(), stdout.String())
	}
	return stdout.String(), nil
}

// Start starts the server with pg_ctl on a free port and waits until it
// accepts connections. Port and socket go on the postmaster command line,
// so pg_ctl restart (which reuses postmaster.opts) keeps them.
func (c *Cluster) Start(t testing.TB) {
	t.Helper()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		if c.Port == 0 || attempt > 0 {
			c.Port = freePort(t)
		}
		_, lastErr = c.TryAsOwner(filepath.Join(c.BinDir, "pg_ctl"), "-D", c.DataDir, "-l", c.LogFile,
			"-w", "-t", "60", "-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", c.Port, c.SocketDir),
			"start")
		if lastErr == nil {
			c.WaitReady(t)
			return
		}
		if !strings.Contains(c.Log(t), "could not bind") {
			break
		}
	}
	t.Fatalf("testhost: start postgres: %v\nlog:\n%s", lastErr, c.Log(t))
}

// Stop stops the server (fast mode).
func (c *Cluster) Stop(t testing.TB) {
	t.Helper()
	if c.inNamespace {
		t.Fatalf("testhost: %s runs in a PID namespace: Stop would signal a process of this machine", c.DataDir)
	}
	c.AsOwner(t, filepath.Join(c.BinDir, "pg_ctl"), "-D", c.DataDir, "-w", "-t", "60", "-m", "fast", "stop")
}

func (c *Cluster) stopForCleanup(t testing.TB) {
	if c.inNamespace || !c.Running() {
		return
	}
	pgctl := filepath.Join(c.BinDir, "pg_ctl")
	if _, err := c.TryAsOwner(pgctl, "-D", c.DataDir, "-w", "-t", "30", "-m", "fast", "stop"); err != nil {
		t.Logf("testhost: pg_ctl stop: %v; trying immediate", err)
		if _, err := c.TryAsOwner(pgctl, "-D", c.DataDir, "-w", "-t", "30", "-m", "immediate", "stop"); err != nil {
			t.Errorf("testhost: postgres at %s could not be stopped: %v", c.DataDir, err)
		}
	}
}

// StopOnCleanup stops the clusters, last given first, in a cleanup of t
// (fast, then immediate, as their own clean-up does); their own clean-up
// still removes them. Cleanups run last registered first, so a test that
// builds its clusters before taking the kernel lock and calls this after
// LockKernel has them stopped, and the huge pages pgtune put them on
// given back, while it still holds the lock: initdb, pg_basebackup and
// the first starts then cost the other packages' kernel tests no wait on
// the lock.
func StopOnCleanup(t testing.TB, clusters ...*Cluster) {
	t.Helper()
	t.Cleanup(func() {
		for i := len(clusters) - 1; i >= 0; i-- {
			clusters[i].stopForCleanup(t)
		}
	})
}

// Running reports whether the postmaster of postmaster.pid is alive (not
// known, and false, for a cluster started in a PID namespace).
func (c *Cluster) Running() bool {
	if c.inNamespace {
		return false
	}
	pid, err := c.readPID()
	if err != nil {
		return false
	}
	_, err = os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// PID is the postmaster's PID from postmaster.pid.
func (c *Cluster) PID(t testing.TB) int {
	t.Helper()
	pid, err := c.readPID()
	if err != nil {
		t.Fatalf("testhost: %v", err)
	}
	return pid
}

func (c *Cluster) readPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(c.DataDir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid: %w", err)
	}
	return pid, nil
}

// WaitReady waits until the postmaster says in postmaster.pid that it
// accepts connections (as pg_ctl -w does; on inotify events, no polling),
// then checks that it answers.
func (c *Cluster) WaitReady(t testing.TB) {
	t.Helper()
	AwaitFiles(t, "postgres to be ready", []string{c.DataDir}, nil, c.Ready)
	if _, err := c.TryAsOwner(filepath.Join(c.BinDir, "pg_isready"), "-q", "-h", c.SocketDir,
		"-p", strconv.Itoa(c.Port), "-d", "postgres"); err != nil {
		t.Fatalf("testhost: postgres says ready but pg_isready fails: %v\nlog:\n%s", err, c.Log(t))
	}
}

// Ready reports whether postmaster.pid names a live postmaster whose
// status line (the 8th) says it accepts connections.
func (c *Cluster) Ready() bool {
	b, err := os.ReadFile(filepath.Join(c.DataDir, "postmaster.pid"))
	if err != nil || !c.Running() {
		return false
	}
	lines := strings.Split(string(b), "\n")
	return len(lines) > 7 && strings.TrimSpace(lines[7]) == "ready"
}

// Query runs sql with psql as the owner and returns the unaligned,
// tuples-only output without the trailing newline.
func (c *Cluster) Query(t testing.TB, sql string) string {
	t.Helper()
	out, err := c.TryQuery(sql)
	if err != nil {
		t.Fatalf("testhost: psql %q: %v", sql, err)
	}
	return out
}

// TryQuery is Query returning the error instead.
func (c *Cluster) TryQuery(sql string) (string, error) {
	out, err := c.TryAsOwner(filepath.Join(c.BinDir, "psql"), "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1",
		"-h", c.SocketDir, "-p", strconv.Itoa(c.Port), "-d", "postgres", "-c", sql)
	return strings.TrimRight(out, "\n"), err
}

// Log returns the server log written so far.
func (c *Cluster) Log(t testing.TB) string {
	b, _ := os.ReadFile(c.LogFile)
	return string(b)
}

// HugetlbPages returns HugetlbPages (kB) from the postmaster's
// /proc/PID/status.
func (c *Cluster) HugetlbPages(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.PID(t)))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "HugetlbPages:"); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("testhost: no HugetlbPages in /proc/PID/status")
	return 0
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
