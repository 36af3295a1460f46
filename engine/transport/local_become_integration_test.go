package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgtune/pgtune/internal/testhost"
)

// localBecomeHelperArg makes the test binary run privileged steps over
// the local connection as whoever runs it (TestMain): it reads the become
// password from its first stdin line (empty: none) and prints a
// localBecomeResult as JSON.
const localBecomeHelperArg = "-pgtune-local-become-helper"

// localBecomeStdin is what the helper's cat gets through sudo: more than
// a pipe holds, so it must keep flowing after the password.
var localBecomeStdin = strings.Repeat("stdin after the password\n", 4096)

type localBecomeResult struct {
	ID       string // id -u under become
	IDStderr string
	IDErr    string
	Become   bool // IDErr is a *BecomeError
	CatOK    bool // cat under become returned its stdin whole
	CatErr   string
}

func runLocalBecomeHelper() int {
	pw, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	l := NewLocalBecome(strings.TrimSuffix(pw, "\n"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out localBecomeResult
	res, err := l.Run(ctx, Command{Args: []string{"id", "-u"}, Become: true})
	out.ID, out.IDStderr = string(res.Stdout), string(res.Stderr)
	if err != nil {
		var be *BecomeError
		out.IDErr, out.Become = err.Error(), errors.As(err, &be)
	} else {
		res, err = l.Run(ctx, Command{Args: []string{"cat"}, Stdin: []byte(localBecomeStdin), Become: true})
		out.CatOK = err == nil && string(res.Stdout) == localBecomeStdin
		if err != nil {
			out.CatErr = err.Error()
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
	return 0
}

// TestIntegrationLocalBecomePassword: pgtune running as a real
// unprivileged user over the local connection, with a sudo that asks for
// the password on every command: the right password gets root (and the
// command's stdin arrives whole after it), a wrong one fails at once with
// the reason, none fails as sudo -n does; the password is in no output.
func TestIntegrationLocalBecomePassword(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: creates a user and a sudoers drop-in")
	}
	const login = "pgtune-lpw"
	password := testhost.PasswordUser(t, login)
	u, err := user.Lookup(login)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	bin := helperBinary(t)

	run := func(t *testing.T, pw string) (localBecomeResult, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, localBecomeHelperArg)
		// No terminal: sudo can only read the password from stdin.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent", "LANG=C"}
		cmd.Dir = "/"
		cmd.Stdin = strings.NewReader(pw + "\n")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("helper as %s: %v\nstdout: %s\nstderr: %s", login, err, stdout.String(), stderr.String())
		}
		var res localBecomeResult
		if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
			t.Fatalf("helper output %q: %v (stderr %s)", stdout.String(), err, stderr.String())
		}
		all := stdout.String() + stderr.String()
		if strings.Contains(all, password) {
			t.Fatalf("the password appears in the output: %q", all)
		}
		return res, all
	}

	t.Run("right password", func(t *testing.T) {
		res, all := run(t, password)
		if res.IDErr != "" || res.ID != "0\n" {
			t.Fatalf("become: id -u = %q (stderr %q), err %s", res.ID, res.IDStderr, res.IDErr)
		}
		if !res.CatOK {
			t.Errorf("become: cat did not return its stdin whole: %s", res.CatErr)
		}
		if strings.Contains(all, "pgtune-sudo-") {
			t.Errorf("sudo's prompt left in the output: %q", all)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		res, _ := run(t, "not-"+password)
		if !res.Become || !strings.Contains(res.IDErr, "become password was refused for user "+login) {
			t.Fatalf("err = %q, want the refused become password", res.IDErr)
		}
	})
	t.Run("no password", func(t *testing.T) {
		res, _ := run(t, "")
		if !res.Become || !strings.Contains(res.IDErr, "sudo: a password is required (become needs passwordless sudo for user "+login+")") {
			t.Fatalf("err = %q, want sudo -n's refusal explained", res.IDErr)
		}
	})
}

// helperBinary copies the test binary where another user can run it.
func helperBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "pgtune-helper-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "transport.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}
