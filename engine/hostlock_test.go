package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// These tests run the lock and the state directory checks for real on this
// machine (local transport, flock(1), chown): they need root, as pgtune
// does on a host.
func needRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs flock, mkdir and chown as root on this machine")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the state directory must be root-owned")
	}
}

// nobodyUID is nobody's uid on this machine: the refusals name it.
func nobodyUID(t *testing.T) int {
	t.Helper()
	n, err := strconv.Atoi(testhost.UID(t, "nobody"))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCheckStateDir(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	nobody := nobodyUID(t)
	ownedByNobody := fmt.Sprintf("is owned by nobody (uid %d), not root", nobody)
	tests := []struct {
		name   string
		setup  func(t *testing.T, root string) string // returns the state dir
		create bool
		want   string // "" = accepted; "absent"; else a substring of the refusal
		// resolved, when set, is the path the check must hand back
		// (relative to root); else the state dir itself.
		resolved string
	}{
		{name: "created, every level 0700", create: true, setup: func(t *testing.T, root string) string {
			return filepath.Join(root, "var/lib/pgtune/runs")
		}},
		{name: "absent, read-only check", want: "absent", setup: func(t *testing.T, root string) string {
			return filepath.Join(root, "none/runs")
		}},
		{name: "root 0755 is tightened", create: true, setup: func(t *testing.T, root string) string {
			return mkdir(t, filepath.Join(root, "state"), 0o755, 0)
		}},
		{name: "owned by nobody", create: true, want: "/state " + ownedByNobody + ": refusing to use it", setup: func(t *testing.T, root string) string {
			return mkdir(t, filepath.Join(root, "state"), 0o700, nobody)
		}},
		{name: "owned by nobody, read-only check", want: "/state " + ownedByNobody, setup: func(t *testing.T, root string) string {
			return mkdir(t, filepath.Join(root, "state"), 0o700, nobody)
		}},
		{name: "mode 0777", create: true, want: "/state is writable by group or others (mode 777)", setup: func(t *testing.T, root string) string {
			return mkdir(t, filepath.Join(root, "state"), 0o777, 0)
		}},
		{name: "sticky 1777 state dir", create: true, want: "/state is writable by group or others (mode 1777)", setup: func(t *testing.T, root string) string {
			return mkdir(t, filepath.Join(root, "state"), os.ModeSticky|0o777, 0)
		}},
		{name: "symbolic link to a root directory", create: true, want: "/state is a symbolic link", setup: func(t *testing.T, root string) string {
			real := mkdir(t, filepath.Join(root, "real"), 0o700, 0)
			if err := os.Symlink(real, filepath.Join(root, "state")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(root, "state")
		}},
		{name: "a file", create: true, want: "/state is not a directory (regular", setup: func(t *testing.T, root string) string {
			p := filepath.Join(root, "state")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{name: "parent owned by nobody", create: true, want: "/parent " + ownedByNobody, setup: func(t *testing.T, root string) string {
			return filepath.Join(mkdir(t, filepath.Join(root, "parent"), 0o755, nobody), "state")
		}},
		{name: "parent writable by others", create: true, want: "/parent is writable by group or others (mode 777)", setup: func(t *testing.T, root string) string {
			return filepath.Join(mkdir(t, filepath.Join(root, "parent"), 0o777, 0), "state")
		}},
		{name: "sticky parent, like /tmp", create: true, setup: func(t *testing.T, root string) string {
			return filepath.Join(mkdir(t, filepath.Join(root, "tmp"), os.ModeSticky|0o777, 0), "state")
		}},
		// The audit's attack: nobody's link in a sticky directory points
		// at a root directory now, and at nobody's own one mid-run.
		{name: "nobody's link above, in a sticky dir", create: true, want: fmt.Sprintf("/tmp/pgtune is a symbolic link owned by nobody (uid %d), not root", nobody), setup: func(t *testing.T, root string) string {
			return filepath.Join(symlink(t, mkdir(t, filepath.Join(root, "var"), 0o755, 0), filepath.Join(mkdir(t, filepath.Join(root, "tmp"), os.ModeSticky|0o777, 0), "pgtune"), nobody), "runs")
		}},
		{name: "nobody's link above, read-only check", want: fmt.Sprintf("/tmp/pgtune is a symbolic link owned by nobody (uid %d), not root", nobody), setup: func(t *testing.T, root string) string {
			mkdir(t, filepath.Join(root, "var/runs"), 0o700, 0)
			return filepath.Join(symlink(t, filepath.Join(root, "var"), filepath.Join(mkdir(t, filepath.Join(root, "tmp"), os.ModeSticky|0o777, 0), "pgtune"), nobody), "runs")
		}},
		{name: "root's link above is resolved", create: true, resolved: "var/runs", setup: func(t *testing.T, root string) string {
			return filepath.Join(symlink(t, mkdir(t, filepath.Join(root, "var"), 0o755, 0), filepath.Join(mkdir(t, filepath.Join(root, "tmp"), os.ModeSticky|0o777, 0), "pgtune"), 0), "runs")
		}},
		// The link's target is root's, a level above it is not: nobody
		// can rename what the link goes through.
		{name: "root's link through nobody's directory", create: true, want: "/home " + ownedByNobody, setup: func(t *testing.T, root string) string {
			target := mkdir(t, filepath.Join(mkdir(t, filepath.Join(root, "home"), 0o755, nobody), "state"), 0o755, 0)
			return filepath.Join(symlink(t, target, filepath.Join(root, "pgtune"), 0), "runs")
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := tc.setup(t, root)
			got, err := checkStateDir(ctx, transport.NewLocal(), dir, false, tc.create)
			switch {
			case tc.want == "absent":
				if !errors.Is(err, errStateDirAbsent) {
					t.Fatalf("err = %v, want absent", err)
				}
				if _, err := os.Lstat(filepath.Dir(dir)); !os.IsNotExist(err) {
					t.Fatalf("a read-only check created %s", filepath.Dir(dir))
				}
				return
			case tc.want != "":
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "state directory "+dir) {
					t.Fatalf("err = %v\nwant it to name %s and say %q", err, dir, tc.want)
				}
				if _, err := os.Lstat(filepath.Join(dir, "lock")); err == nil {
					t.Fatal("something was created in a refused state directory")
				}
				return
			case err != nil:
				t.Fatalf("refused: %v", err)
			}
			if tc.resolved != "" {
				dir = filepath.Join(root, tc.resolved)
			}
			if got != dir {
				t.Fatalf("resolved to %s, want %s", got, dir)
			}
			// Every level pgtune made, and the state directory itself,
			// is root's and 0700.
			for p := dir; p != root; p = filepath.Dir(p) {
				fi, err := os.Lstat(p)
				if err != nil {
					t.Fatal(err)
				}
				if p == dir || tc.name == "created, every level 0700" {
					if fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != 0 {
						t.Errorf("%s: mode %v uid %d, want 0700 root", p, fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Uid)
					}
				}
			}
		})
	}
}

// symlink makes link, owned by uid, point at target; it returns link.
func symlink(t *testing.T, target, link string, uid int) string {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, uid, uid); err != nil {
		t.Fatal(err)
	}
	return link
}

func mkdir(t *testing.T, p string, mode os.FileMode, uid int) string {
	t.Helper()
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
	return p
}

// stateDirFor makes a checked state directory for a lock test.
func stateDirFor(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "state")
	if _, err := checkStateDir(context.Background(), transport.NewLocal(), dir, false, true); err != nil {
		t.Fatal(err)
	}
	return dir
}

var holderLine = regexp.MustCompile(`(?m)^holder=([0-9]+)$`)

// holderPID is the PID of the shell holding the lock in dir.
func holderPID(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "lock"))
	if err != nil {
		t.Fatal(err)
	}
	m := holderLine.FindSubmatch(b)
	if m == nil {
		t.Fatalf("lock file without holder: %q", b)
	}
	pid, _ := strconv.Atoi(string(m[1]))
	return pid
}

func TestHostLockSecondRunRefused(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	dir := stateDirFor(t)
	local := transport.NewLocal()
	first, err := acquireHostLock(ctx, local, dir, "20261130T190000Z-aaaaaa", false)
	if err != nil {
		t.Fatal(err)
	}
	_, err = acquireHostLock(ctx, local, dir, "20261130T190001Z-bbbbbb", false)
	var locked *LockedError
	if !errors.As(err, &locked) {
		first.release()
		t.Fatalf("second lock: %v, want locked", err)
	}
	host, _ := os.Hostname()
	want := "locked by run 20261130T190000Z-aaaaaa (pid " + strconv.Itoa(os.Getpid()) + " on controller " + host + ") since "
	if !strings.HasPrefix(err.Error(), want) || locked.Holder != strconv.Itoa(holderPID(t, dir)) {
		t.Errorf("second lock: %v\nwant it to start %q and name holder %d", err, want, holderPID(t, dir))
	}
	if fi, err := os.Stat(filepath.Join(dir, "lock")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("lock file: %v %v, want 0600", fi.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*.fifo")); len(left) != 0 {
		t.Errorf("answer FIFOs left behind: %v", left)
	}
	first.release()
	if err := first.lost(); err != nil {
		t.Errorf("a released lock reports lost: %v", err)
	}
	// Released: the next run gets it at once.
	second, err := acquireHostLock(ctx, local, dir, "20261130T190002Z-cccccc", false)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	second.release()
}

func TestHostLockHolderKilled(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	dir := stateDirFor(t)
	local := transport.NewLocal()
	l, err := acquireHostLock(ctx, local, dir, "20261130T190000Z-aaaaaa", false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	if err := syscall.Kill(holderPID(t, dir), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-l.done
	if l.lost() == nil {
		t.Error("a killed holder is not reported as a lost lock")
	}
	next, err := acquireHostLock(ctx, local, dir, "20261130T190100Z-bbbbbb", false)
	if err != nil {
		t.Fatalf("stale lock not taken over: %v", err)
	}
	next.release()
}

// dyingController runs the lock holder with its output read by a process
// that goes away after a few heartbeats ("locked\n" and five beats), as
// sshd does when the controller dies or the connection drops. Not after
// the first: on a loaded machine the holder would end before its answer
// is read, which is a lock never held rather than one held and lost.
type dyingController struct{ transport.Transport }

func (d dyingController) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	if len(cmd.Args) > 2 && cmd.Args[2] == lockHolderScript {
		cmd.Args = append([]string{"sh", "-c", `sh -c "$0" "$@" | head -c 12 >/dev/null`}, cmd.Args[2:]...)
	}
	return d.Transport.Run(ctx, cmd)
}

func TestHostLockControllerGone(t *testing.T) {
	needRoot(t)
	ctx := context.Background()
	dir := stateDirFor(t)
	l, err := acquireHostLock(ctx, dyingController{transport.NewLocal()}, dir, "20261130T190000Z-aaaaaa", false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	// The holder notices at its next heartbeat and exits: the lock is free.
	<-l.done
	next, err := acquireHostLock(ctx, transport.NewLocal(), dir, "20261130T190100Z-bbbbbb", false)
	if err != nil {
		t.Fatalf("lock of a dead controller not taken over: %v", err)
	}
	next.release()
}

// TestLockHostLostCancelsWork: when the holder goes away mid-run, the
// host's work context ends and the host's error says the lock was lost.
func TestLockHostLostCancelsWork(t *testing.T) {
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "state")
	s := &Session{runner: &Runner{RunID: "20261130T190000Z-aaaaaa"}}
	hr := &hostRun{host: &inventory.Host{Name: "db1", Vars: map[string]any{StateDirVar: dir}}, tr: transport.NewLocal()}
	ctx, unlock, err := s.lockHost(context.Background(), hr)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(holderPID(t, dir), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done()
	if cause := context.Cause(ctx); cause == nil || !strings.Contains(cause.Error(), "lost the host lock") {
		t.Errorf("cause = %v", cause)
	}
	hr.err = ctx.Err()
	unlock()
	if hr.err == nil || !strings.Contains(hr.err.Error(), "the host lock was lost") {
		t.Errorf("host error = %v", hr.err)
	}
}

func TestLockHostRefusesBadStateDir(t *testing.T) {
	needRoot(t)
	dir := mkdir(t, filepath.Join(t.TempDir(), "state"), 0o777, 0)
	s := &Session{runner: &Runner{RunID: "20261130T190000Z-aaaaaa"}}
	hr := &hostRun{host: &inventory.Host{Name: "db1", Vars: map[string]any{StateDirVar: dir}}, tr: transport.NewLocal()}
	_, _, err := s.lockHost(context.Background(), hr)
	want := "db1: state directory " + dir + ": " + dir + " is writable by group or others (mode 777): refusing to use it"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

// TestStateDirMustBeAbsolute: a pgtune_state_dir that is not a clean
// absolute path is refused by name, never swapped for the default.
func TestStateDirMustBeAbsolute(t *testing.T) {
	for _, v := range []any{"relative/state", "/var/lib/../tmp/x", "/", "", 42} {
		h := &inventory.Host{Name: "db1", Vars: map[string]any{StateDirVar: v}}
		_, err := checkStateDir(context.Background(), nil, stateDir(h), false, true)
		if err == nil || !strings.Contains(err.Error(), "must be a clean absolute path other than /") {
			t.Errorf("pgtune_state_dir %#v: %v", v, err)
		}
	}
	if got := stateDir(&inventory.Host{Name: "db1", Vars: map[string]any{}}); got != StateDir {
		t.Errorf("default state dir %q, want %q", got, StateDir)
	}
}

// TestLockHostSameRunSharedStateDir: two inventory hosts that are one
// machine with one state directory are told so, not "locked by" their
// own run without a word.
func TestLockHostSameRunSharedStateDir(t *testing.T) {
	needRoot(t)
	dir := filepath.Join(t.TempDir(), "state")
	s := &Session{runner: &Runner{RunID: "20261130T190000Z-aaaaaa"}}
	run := func(name string) *hostRun {
		return &hostRun{host: &inventory.Host{Name: name, Vars: map[string]any{StateDirVar: dir}}, tr: transport.NewLocal()}
	}
	_, unlock, err := s.lockHost(context.Background(), run("db1"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	_, _, err = s.lockHost(context.Background(), run("db1-alias"))
	if err == nil || !strings.HasPrefix(err.Error(), "db1-alias: locked by run 20261130T190000Z-aaaaaa") ||
		!strings.Contains(err.Error(), "another host of this inventory is the same machine with the same state directory "+dir+"; give each its own pgtune_state_dir") {
		t.Fatalf("err = %v", err)
	}
}

// TestCheckStateDirMadeMeanwhile: a level another session to the same
// machine creates between the check that it is missing and this session's
// mkdir (two inventory names for one host, planned at once) is checked as
// found, not an error. The race is made certain by a mkdir on PATH that
// makes the directory and then fails, as mkdir does when it lost.
func TestCheckStateDirMadeMeanwhile(t *testing.T) {
	needRoot(t)
	real, err := exec.LookPath("mkdir")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	shim := "#!/bin/sh\n" + real + " \"$@\" || exit 1\necho \"mkdir: cannot create directory: File exists\" >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "mkdir"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	dir := filepath.Join(t.TempDir(), "var/lib/pgtune")
	if _, err := checkStateDir(context.Background(), transport.NewLocal(), dir, false, true); err != nil {
		t.Fatalf("a state directory made meanwhile by another session: %v", err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state directory %v, %v; want it there, 0700", fi, err)
	}
}

// TestLockHostUsesResolvedStateDir: a state directory reached through
// root's link is used by its resolved path from the check on, so what the
// link points at later is never written through.
func TestLockHostUsesResolvedStateDir(t *testing.T) {
	needRoot(t)
	root := t.TempDir()
	real := mkdir(t, filepath.Join(root, "var"), 0o755, 0)
	tmp := mkdir(t, filepath.Join(root, "tmp"), os.ModeSticky|0o777, 0)
	link := symlink(t, real, filepath.Join(tmp, "pgtune"), 0)
	s := &Session{runner: &Runner{RunID: "20261130T190000Z-aaaaaa", Log: slog.New(slog.DiscardHandler)}}
	hr := &hostRun{host: &inventory.Host{Name: "db1", Vars: map[string]any{StateDirVar: filepath.Join(link, "runs")}}, tr: transport.NewLocal()}
	_, unlock, err := s.lockHost(context.Background(), hr)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	want := filepath.Join(real, "runs")
	if got := hr.stateDirPath(); got != want {
		t.Fatalf("state dir in use %s, want the resolved %s", got, want)
	}
	if got := s.target(hr, nil).StateDir; got != want {
		t.Fatalf("target's state dir %s, want the resolved %s", got, want)
	}
	if _, err := os.Lstat(filepath.Join(want, "lock")); err != nil {
		t.Fatalf("lock not in the resolved state dir: %v", err)
	}
}
