package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgtune/pgtune/internal/testhost"
)

// shellConfig is sshdConfig with the privileged shell, logged in as login.
func shellConfig(srv *testhost.SSHServer, login string) SSHConfig {
	cfg := sshdConfig(srv)
	cfg.User = login
	cfg.PrivilegedShell = true
	return cfg
}

// shellPID is the process group of a privileged command's program: the
// shell's, the same for every command when they share one shell.
func shellPID(t *testing.T, c *SSH) string {
	t.Helper()
	res, err := c.Run(context.Background(), Command{Args: []string{"sh", "-c", `ps -o pgid= -p "$$"`}, Become: true})
	if err != nil {
		t.Fatalf("echo $PPID: %v", err)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// TestIntegrationPrivilegedShell runs privileged commands through one
// shell on a real sshd, as a sudo user and as root: argument vectors,
// stdin (binary, none), exit statuses and the two streams arrive as a
// command of its own would give them, and every command runs as root in
// the same shell (one sudo).
func TestIntegrationPrivilegedShell(t *testing.T) {
	srv := testhost.SSHD(t)
	testhost.EnsureUser(t, "pgtune-sudo", true)
	ctx := context.Background()
	for _, login := range []string{"pgtune-sudo", "root"} {
		t.Run(login, func(t *testing.T) {
			c := dial(t, shellConfig(srv, login))
			first := shellPID(t, c)

			args := []string{"", "it's", "two\nlines", `$(id) "q" \`, "trailing\n\n", "-n"}
			res, err := c.Run(ctx, Command{Args: append([]string{"sh", "-c", `printf '%s\0' "$@"`, "sh"}, args...), Become: true})
			if want := strings.Join(args, "\x00") + "\x00"; err != nil || string(res.Stdout) != want {
				t.Fatalf("argument vector: %q, %v; want %q", res.Stdout, err, want)
			}
			in := append(bytes.Repeat([]byte("bin\x00ary\n"), 20000), "no newline at the end"...)
			res, err = c.Run(ctx, Command{Args: []string{"cat"}, Stdin: in, Become: true})
			if err != nil || !bytes.Equal(res.Stdout, in) {
				t.Fatalf("cat of %d stdin bytes: %d bytes back, %v", len(in), len(res.Stdout), err)
			}
			res, err = c.Run(ctx, Command{Args: []string{"cat"}, Become: true})
			if err != nil || len(res.Stdout) != 0 {
				t.Fatalf("cat without stdin: %q, %v", res.Stdout, err)
			}
			res, err = c.Run(ctx, Command{Args: []string{"sh", "-c", "printf out; printf err >&2; id -u >&2; exit 3"}, Become: true})
			var xe *ExitError
			if !errors.As(err, &xe) || xe.ExitCode != 3 || string(res.Stdout) != "out" || string(res.Stderr) != "err0\n" {
				t.Fatalf("exit 3: stdout %q stderr %q, %v", res.Stdout, res.Stderr, err)
			}
			if _, err = c.Run(ctx, Command{Args: []string{"/nonexistent/pgtune-cmd"}, Become: true}); !errors.As(err, &xe) || xe.ExitCode != 127 {
				t.Fatalf("missing program: %v, want exit 127", err)
			}
			// A builtin's name runs the program, never in the shell itself.
			if _, err = c.Run(ctx, Command{Args: []string{"exit", "0"}, Become: true}); !errors.As(err, &xe) || xe.ExitCode != 127 {
				t.Fatalf("exit as a program: %v, want exit 127", err)
			}
			// A command holds none of the shell's own descriptors, so a
			// process it leaves behind cannot write into a later command's
			// output; its stdin is a file already unlinked.
			res, err = c.Run(ctx, Command{Args: []string{"sh", "-c", `ls /proc/$$/fd; for f in 0 1 2; do readlink /proc/$$/fd/$f; done; readlink /proc/$1/fd/1`, "sh", first},
				Stdin: []byte("secret"), Become: true})
			lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
			if err != nil || len(lines) != 7 || strings.Join(lines[:3], " ") != "0 1 2" || !strings.HasSuffix(lines[3], "/in (deleted)") ||
				!strings.HasPrefix(lines[4], "pipe:") || lines[4] == lines[6] || lines[5] == lines[6] {
				t.Fatalf("a command's descriptors: %q, %v; want 0 1 2, stdin unlinked, stdout and stderr pipes other than the shell's", lines, err)
			}
			if again := shellPID(t, c); again != first {
				t.Fatalf("commands ran in shells %s and %s, want one", first, again)
			}
		})
	}
}

// TestIntegrationPrivilegedShellStops: a cancelled command and one over
// the output cap are stopped with the shell that ran them; the next
// command gets a new shell. Concurrent commands all run (the ones that
// find the shell busy in sessions of their own), and Close ends the shell.
func TestIntegrationPrivilegedShellStops(t *testing.T) {
	srv := testhost.SSHD(t)
	testhost.EnsureUser(t, "pgtune-sudo", true)
	c := dial(t, shellConfig(srv, "pgtune-sudo"))
	first := shellPID(t, c)

	t.Run("cancel", func(t *testing.T) {
		shell := shellPID(t, c)
		marker := fmt.Sprintf("/nonexistent/pgtune-shell-sleep-%d-%d", os.Getpid(), time.Now().UnixNano())
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := c.Run(ctx, Command{Args: []string{"sh", "-c", "sleep 600; : \"$0\"", marker}, Become: true})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the deadline", err)
		}
		waitGone(t, marker)
		waitPIDGone(t, shell) // the shell was stopped with it
	})
	t.Run("output cap", func(t *testing.T) {
		const limit = 256 << 10
		lowerOutputCap(t, limit)
		for _, stream := range []string{"stdout", "stderr"} {
			marker := fmt.Sprintf("/nonexistent/pgtune-shell-zeros-%d-%d", os.Getpid(), time.Now().UnixNano())
			script := `exec "$@"`
			if stream == "stderr" {
				script = `exec "$@" >&2`
			}
			res, err := c.Run(context.Background(), Command{Args: []string{"sh", "-c", script, "sh", "cat", "/dev/zero", marker}, Become: true})
			assertTooLarge(t, res, err, stream, limit, "cat")
			waitGone(t, marker)
		}
	})
	if again := shellPID(t, c); again == first {
		t.Fatalf("still shell %s after the stopped commands", again)
	}

	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := c.Run(context.Background(), Command{Args: []string{"sh", "-c", "sleep 0.2; id -u"}, Become: true})
				if err == nil && string(res.Stdout) != "0\n" {
					err = fmt.Errorf("id -u = %q", res.Stdout)
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("run %d: %v", i, err)
			}
		}
	})

	last := shellPID(t, c)
	c.Close()
	waitPIDGone(t, last)
}

// waitPIDGone waits, bounded by the hang guard, until process pid has
// exited.
func waitPIDGone(t *testing.T, pid string) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for {
		if _, err := os.Stat("/proc/" + pid); err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %s still running", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestIntegrationPrivilegedShellBecomePassword: the shell gets through a
// sudo that asks for the password (answered once, on stdin), and a wrong
// password fails as it does without the shell.
func TestIntegrationPrivilegedShellBecomePassword(t *testing.T) {
	srv := testhost.SSHD(t, "PasswordAuthentication yes")
	const login = "pgtune-pw"
	password := testhost.PasswordUser(t, login)
	cfg := SSHConfig{Name: "pwhost", Address: "127.0.0.1", Port: srv.Port, User: login, Password: password,
		BecomePassword: password, KnownHostsFile: srv.KnownHostsFile, ConnectTimeout: 10 * time.Second, PrivilegedShell: true}
	ctx := context.Background()
	c := dial(t, cfg)
	first := shellPID(t, c)
	in := strings.Repeat("stdin after the password\n", 4096)
	res, err := c.Run(ctx, Command{Args: []string{"cat"}, Stdin: []byte(in), Become: true})
	if err != nil || string(res.Stdout) != in {
		t.Fatalf("cat: %d bytes back (want %d), %v", len(res.Stdout), len(in), err)
	}
	if again := shellPID(t, c); again != first {
		t.Fatalf("commands ran in shells %s and %s, want one", first, again)
	}

	wrong := cfg
	wrong.BecomePassword = "not-" + password
	cw := dial(t, wrong)
	for range 2 {
		res, err = cw.Run(ctx, Command{Args: []string{"id", "-u"}, Become: true})
		var be *BecomeError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), "become password was refused for user "+login) {
			t.Fatalf("wrong become password: %v", err)
		}
		if strings.Contains(string(res.Stdout)+string(res.Stderr)+err.Error()+srv.Log(), password) {
			t.Fatal("the password appears in output")
		}
	}
}

// TestIntegrationPrivilegedShellFloodAtStart: a host whose sudo runs an
// sh that streams forever (found first on its secure_path) fails the
// command with the output cap, as a session of its own would, instead of
// waiting for the shell's start for ever.
func TestIntegrationPrivilegedShellFloodAtStart(t *testing.T) {
	srv := testhost.SSHD(t)
	const login = "pgtune-zeros"
	testhost.EnsureUser(t, login, true)
	bins, err := os.MkdirTemp("", "pgtune-flood-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bins) })
	if err := os.Chmod(bins, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bins, "sh"), []byte("#!/bin/sh\nexec cat /dev/zero\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	drop := filepath.Join("/etc/sudoers.d", "pgtune-test-flood-"+login)
	line := fmt.Sprintf("Defaults:%s secure_path=\"%s:/usr/sbin:/usr/bin:/sbin:/bin\"\n", login, bins)
	if err := os.WriteFile(drop, []byte(line), 0o440); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(drop) })
	lowerOutputCap(t, 256<<10)

	c := dial(t, shellConfig(srv, login))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err = c.Run(ctx, Command{Args: []string{"id", "-u"}, Become: true})
	var tooLarge *OutputTooLargeError
	if !errors.As(err, &tooLarge) {
		t.Fatalf("err = %v, want the output cap", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the start waited for the test's own deadline")
	}
}
