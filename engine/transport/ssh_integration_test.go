package transport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgtune/pgtune/internal/testhost"
)

// These tests run against the real OpenSSH sshd on 127.0.0.1 (root; skipped
// only under -short). The "remote" host is this machine, so every effect is
// checked directly on the local filesystem and process table.

func sshdConfig(s *testhost.SSHServer) SSHConfig {
	return SSHConfig{
		Name: "testhost", Address: "127.0.0.1", Port: s.Port, User: s.User,
		PrivateKeyFile: s.KeyFile, KnownHostsFile: s.KnownHostsFile, ConnectTimeout: 10 * time.Second,
	}
}

func acceptedLogins(s *testhost.SSHServer) int {
	return strings.Count(s.Log(), "Accepted publickey for ")
}

func TestIntegrationSSHD(t *testing.T) {
	srv := testhost.SSHD(t)
	ctx := context.Background()

	t.Run("run, stdin, exit status, quoting", func(t *testing.T) {
		c := dial(t, sshdConfig(srv))
		res, err := c.Run(ctx, Command{Args: []string{"id", "-un"}})
		if err != nil || string(res.Stdout) != "root\n" {
			t.Fatalf("id -un = %q, %v", res.Stdout, err)
		}
		marker := filepath.Join(t.TempDir(), "owned")
		args := []string{"printf", "%s|", "a b", "$(touch " + marker + ")", "`touch " + marker + "`", "x'y\"z", "l1\nl2", "; touch " + marker}
		res, err = c.Run(ctx, Command{Args: args})
		if err != nil || string(res.Stdout) != strings.Join(args[2:], "|")+"|" {
			t.Fatalf("printf = %q, %v", res.Stdout, err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("an argument was executed by the remote shell")
		}
		in := []byte(strings.Repeat("0123456789abcdef", 1<<16) + "\x00end")
		res, err = c.Run(ctx, Command{Args: []string{"cat"}, Stdin: in})
		if err != nil || string(res.Stdout) != string(in) {
			t.Fatalf("cat: %d bytes back, %v", len(res.Stdout), err)
		}
		res, err = c.Run(ctx, Command{Args: []string{"sh", "-c", "echo nope >&2; exit 7"}})
		var xe *ExitError
		if !errors.As(err, &xe) || xe.ExitCode != 7 || res.ExitCode != 7 || !strings.Contains(err.Error(), "nope") {
			t.Fatalf("exit 7: res %+v err %v", res, err)
		}
	})

	t.Run("one connection for many concurrent runs", func(t *testing.T) {
		before := acceptedLogins(srv)
		c := dial(t, sshdConfig(srv))
		var wg sync.WaitGroup
		for i := range 8 { // more than maxSessions: some queue
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := c.Run(ctx, Command{Args: []string{"sh", "-c", "sleep 0.2; echo $1", "sh", strconv.Itoa(i)}})
				if err != nil || string(res.Stdout) != strconv.Itoa(i)+"\n" {
					t.Errorf("run %d: %q %v", i, res.Stdout, err)
				}
			}()
		}
		wg.Wait()
		if n := acceptedLogins(srv) - before; n != 1 {
			t.Errorf("sshd accepted %d logins, want 1", n)
		}
	})

	t.Run("ssh_config file alone", func(t *testing.T) {
		c := dial(t, SSHConfig{Name: "testhost", ConfigFile: srv.ConfigFile})
		res, err := c.Run(ctx, Command{Args: []string{"echo", "via config"}})
		if err != nil || string(res.Stdout) != "via config\n" {
			t.Fatalf("%q %v", res.Stdout, err)
		}
	})

	t.Run("files: atomic write keeps mode and owner, backup, remove", func(t *testing.T) {
		c := dial(t, sshdConfig(srv))
		testFileOps(t, c, t.TempDir(), false, true)

		// Owner and mode of a file owned by someone else survive a rewrite.
		nobody, err := user.Lookup("nobody")
		if err != nil {
			t.Skip("no nobody user")
		}
		uid, _ := strconv.Atoi(nobody.Uid)
		gid, _ := strconv.Atoi(nobody.Gid)
		dir := t.TempDir()
		path := filepath.Join(dir, "owned by nobody.conf")
		os.WriteFile(path, []byte("old\n"), 0o640)
		os.Chmod(path, 0o640)
		os.Chown(path, uid, gid)
		backup := filepath.Join(dir, "backup", "owned by nobody.conf")
		if err := WriteFile(ctx, c, path, []byte("new\n"), WriteOptions{Backup: backup}); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{path, backup} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			if fi.Mode().Perm() != 0o640 || int(st.Uid) != uid || int(st.Gid) != gid {
				t.Errorf("%s: mode %o owner %d:%d, want 640 %d:%d", p, fi.Mode().Perm(), st.Uid, st.Gid, uid, gid)
			}
		}
		if b, _ := os.ReadFile(backup); string(b) != "old\n" {
			t.Errorf("backup = %q", b)
		}
		if b, _ := os.ReadFile(path); string(b) != "new\n" {
			t.Errorf("file = %q", b)
		}
	})

	t.Run("become as root needs no sudo", func(t *testing.T) {
		c := dial(t, sshdConfig(srv))
		res, err := c.Run(ctx, Command{Args: []string{"id", "-u"}, Become: true})
		if err != nil || string(res.Stdout) != "0\n" {
			t.Fatalf("%q %v", res.Stdout, err)
		}
	})

	t.Run("become through passwordless sudo", func(t *testing.T) {
		testhost.EnsureUser(t, "pgtune-sudo", true)
		cfg := sshdConfig(srv)
		cfg.User = "pgtune-sudo"
		c := dial(t, cfg)
		res, err := c.Run(ctx, Command{Args: []string{"id", "-un"}})
		if err != nil || string(res.Stdout) != "pgtune-sudo\n" {
			t.Fatalf("without become: %q %v", res.Stdout, err)
		}
		res, err = c.Run(ctx, Command{Args: []string{"id", "-u"}, Become: true})
		if err != nil || string(res.Stdout) != "0\n" {
			t.Fatalf("with become: %q %v", res.Stdout, err)
		}
		// File helpers under become write where only root may.
		dir := t.TempDir() // 0700 root
		path := filepath.Join(dir, "root only.conf")
		if err := WriteFile(ctx, c, path, []byte("x=1\n"), WriteOptions{Become: true, Mode: "0600"}); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFile(ctx, c, path, true)
		if err != nil || string(got) != "x=1\n" {
			t.Fatalf("ReadFile = %q, %v", got, err)
		}
		if _, err := ReadFile(ctx, c, path, false); err == nil {
			t.Error("read without become succeeded in a root-only directory")
		}
	})

	t.Run("become without sudo rights fails with a clear message, never waits for a password", func(t *testing.T) {
		testhost.EnsureUser(t, "pgtune-nosudo", false)
		cfg := sshdConfig(srv)
		cfg.User = "pgtune-nosudo"
		c := dial(t, cfg)
		// A sudo waiting for a password would end on this deadline
		// instead of the error below.
		cctx, cancel := context.WithTimeout(ctx, hangGuard)
		defer cancel()
		_, err := c.Run(cctx, Command{Args: []string{"id", "-u"}, Become: true})
		want := "sudo: a password is required (become needs passwordless sudo for user pgtune-nosudo)"
		if err == nil || err.Error() != want || !errors.Is(err, ErrBecomePassword) {
			t.Fatalf("err = %v, want %q", err, want)
		}
	})

	t.Run("cancel kills the remote command", func(t *testing.T) {
		testhost.EnsureUser(t, "pgtune-sudo", true)
		for _, login := range []string{"root", "pgtune-sudo"} {
			t.Run(login, func(t *testing.T) {
				cfg := sshdConfig(srv)
				cfg.User = login
				c := dial(t, cfg)
				// The remote command tells its PID through a FIFO, then
				// sleeps forever: only the kill can end it.
				fifo := filepath.Join(t.TempDir(), "pid")
				if err := syscall.Mkfifo(fifo, 0o600); err != nil {
					t.Fatal(err)
				}
				cctx, cancel := context.WithCancel(ctx)
				defer cancel()
				errc := make(chan error, 1)
				go func() {
					_, err := c.Run(cctx, Command{Args: []string{"sh", "-c", `echo $$ > "$1"; exec sleep infinity`, "sh", fifo}, Become: true})
					errc <- err
				}()
				var pid int
				returns(t, "the remote command's PID", func() {
					b, err := os.ReadFile(fifo) // blocks until the command writes
					if err == nil {
						pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
					}
					if err != nil {
						t.Errorf("read PID: %v", err)
					}
				})
				cancel()
				var err error
				returns(t, "Run after cancel", func() { err = <-errc })
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("err = %v", err)
				}
				if pid > 0 {
					waitExit(t, pid)
				}
				// The connection survives a cancelled session.
				if _, err := c.Run(ctx, Command{Args: []string{"true"}}); err != nil {
					t.Errorf("after cancel: %v", err)
				}
			})
		}
	})

	t.Run("unknown host key refused", func(t *testing.T) {
		cfg := sshdConfig(srv)
		cfg.KnownHostsFile = writeKnownHosts(t, "# nothing recorded")
		_, err := DialSSH(ctx, cfg)
		want := fmt.Sprintf("host key for 127.0.0.1:%d is not in %s (unknown host; add it with ssh-keyscan or set ssh_host_key_checking: accept-new)", srv.Port, cfg.KnownHostsFile)
		if !errors.Is(err, ErrUnknownHostKey) || !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("err = %v\nwant prefix %s", err, want)
		}
	})

	t.Run("changed host key refused", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "k")
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", other).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		pub, _ := os.ReadFile(other + ".pub")
		f := strings.Fields(string(pub))
		cfg := sshdConfig(srv)
		cfg.KnownHostsFile = writeKnownHosts(t, fmt.Sprintf("[127.0.0.1]:%d %s %s", srv.Port, f[0], f[1]))
		cfg.HostKeyPolicy = HostKeyAcceptNew // never overrides a changed key
		_, err := DialSSH(ctx, cfg)
		if !errors.Is(err, ErrChangedHostKey) || !strings.Contains(err.Error(), "CHANGED") || !strings.Contains(err.Error(), "man-in-the-middle") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("accept-new records the key", func(t *testing.T) {
		cfg := sshdConfig(srv)
		cfg.KnownHostsFile = filepath.Join(t.TempDir(), "new", "known_hosts")
		cfg.HostKeyPolicy = HostKeyAcceptNew
		dial(t, cfg).Close()
		data, err := os.ReadFile(cfg.KnownHostsFile)
		if err != nil || !strings.HasPrefix(string(data), fmt.Sprintf("[127.0.0.1]:%d ", srv.Port)) {
			t.Fatalf("known_hosts = %q, %v", data, err)
		}
		cfg.HostKeyPolicy = HostKeyStrict
		dial(t, cfg).Close()
	})

	t.Run("wrong key refused", func(t *testing.T) {
		cfg := sshdConfig(srv)
		cfg.PrivateKeyFile, _ = clientKey(t)
		_, err := DialSSH(ctx, cfg)
		if !errors.Is(err, ErrAuthFailed) || !strings.Contains(err.Error(), "authentication failed for user root") {
			t.Fatalf("err = %v", err)
		}
	})
}
