package testhost

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Fake PostgreSQL programs are copies of the running test binary: FakeMain,
// called first thing in a package's TestMain, makes the copy act as the
// program it is named after. Started with the single argument "serve", a
// fake waits for SIGTERM (a process named postgres for discovery to find);
// run any other way, it first appends who ran it and with what to
// "executed" beside itself, then answers like the real program (postgres
// --version prints a PostgreSQL 15 version, pg_isready says ready).
//
// Every process of this machine is visible to every test package running
// meanwhile, including builds of pgtune other than this one: each line
// says through which sshd port (SSH_CONNECTION) the run came, so that a
// test counts the runs its own sshd session made.

// FakeNames are the program names FakeMain answers to.
var FakeNames = []string{"postgres", "pg_isready", "pg_ctl", "psql", "pg_config"}

// FakeVersion is what a fake postgres --version prints.
const FakeVersion = "postgres (PostgreSQL) 15.99"

// FakeMain acts as a fake program and exits when the test binary runs under
// one of FakeNames; otherwise it returns at once.
func FakeMain() {
	name := filepath.Base(os.Args[0])
	known := false
	for _, n := range FakeNames {
		known = known || n == name
	}
	if !known {
		return
	}
	if len(os.Args) == 2 && os.Args[1] == "serve" {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		os.Exit(0)
	}
	if exe, err := os.Executable(); err == nil {
		port := "-"
		if f := strings.Fields(os.Getenv("SSH_CONNECTION")); len(f) == 4 {
			port = f[3]
		}
		line := fmt.Sprintf("ssh=%s uid=%d euid=%d name=%s args=%q\n", port, os.Getuid(), os.Geteuid(), name, os.Args[1:])
		if f, err := os.OpenFile(filepath.Join(filepath.Dir(exe), "executed"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o666); err == nil {
			f.WriteString(line)
			f.Close()
		}
	}
	if name == "postgres" && len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println(FakeVersion)
	}
	os.Exit(0)
}

// FakeBinDir makes a directory under /tmp owned by owner (so writable by
// it, as a bin directory an unprivileged user controls) holding fake
// programs of the given names. It is removed in Cleanup.
func FakeBinDir(t testing.TB, owner string, names ...string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := OwnedDir(t, owner)
	// Made now, writable by all: a fake run by whoever must be recorded.
	writeFile(t, filepath.Join(dir, "executed"), "", 0o666)
	for _, n := range names {
		copyFile(t, self, filepath.Join(dir, n), 0o755)
		chown(t, owner, filepath.Join(dir, n))
	}
	return dir
}

// UID is the user ID of name on this machine, in decimal, as the kernel
// and /proc report it: tests compare with it, never with the number a
// user has on the machine they were written on.
func UID(t testing.TB, name string) string {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("testhost: user %s: %v", name, err)
	}
	return u.Uid
}

// OwnedDir makes a directory under /tmp, mode 0755, owned by owner; it is
// removed in Cleanup.
func OwnedDir(t testing.TB, owner string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "pgtune-fake-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	chown(t, owner, dir)
	return dir
}

// Executions returns the lines a fake appended to dir/executed for runs
// that came through the sshd on sshPort, without their "ssh=PORT " prefix:
// one per time a fake of dir ran, other than to serve. Other runs are
// logged.
func Executions(t testing.TB, dir string, sshPort int) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "executed"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l, ok := strings.CutPrefix(sc.Text(), "ssh="+strconv.Itoa(sshPort)+" "); ok {
			out = append(out, l)
		} else {
			t.Logf("%s was run by something other than this test: %s", dir, sc.Text())
		}
	}
	return out
}

// StartFake starts bin (a fake from FakeBinDir) with "serve", as user, in
// the working directory cwd, and returns its PID. The process is killed
// and reaped in Cleanup.
func StartFake(t testing.TB, bin, as, cwd string) int {
	t.Helper()
	return StartAs(t, as, cwd, bin, "serve")
}

// StartAs starts a command as user in the working directory cwd, its
// stdio on /dev/null, and returns its PID. The process is killed and
// reaped in Cleanup.
func StartAs(t testing.TB, as, cwd string, args ...string) int {
	t.Helper()
	bin := args[0]
	u, err := user.Lookup(as)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cmd := exec.Command(bin, args[1:]...)
	cmd.Dir = cwd // stdio: /dev/null
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
		Setpgid:    true,
	}
	if err := startDying(cmd); err != nil {
		t.Fatalf("testhost: start %s as %s: %v", bin, as, err)
	}
	pid := cmd.Process.Pid
	forget := registerProcess(t, cmd)
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		_ = cmd.Wait()
		forget()
	})
	return pid
}

// WriteOwned writes a file owned by owner.
func WriteOwned(t testing.TB, owner, path, data string, mode os.FileMode) {
	t.Helper()
	writeFile(t, path, data, mode)
	chown(t, owner, path)
}

// PIDFile is the content of a postmaster.pid naming pid for dataDir, with
// the port and socket directory a client would use.
func PIDFile(pid int, dataDir string, port int, socketDir string) string {
	return strings.Join([]string{strconv.Itoa(pid), dataDir, "1700000000", strconv.Itoa(port), socketDir,
		"127.0.0.1", "  5432001         0", "ready   ", ""}, "\n")
}

func copyFile(t testing.TB, from, to string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(to, mode); err != nil {
		t.Fatal(err)
	}
}
