package transport

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/internal/testhost"
)

// TestIntegrationPasswordLoginAndSudo: a real unprivileged user logs in to
// a real sshd with its password (no key offered), and sudo asks for that
// password on every command: pgtune answers sudo's prompt, the command's
// own stdin still arrives whole, and a wrong password fails at once with
// the reason instead of waiting.
func TestIntegrationPasswordLoginAndSudo(t *testing.T) {
	srv := testhost.SSHD(t, "PasswordAuthentication yes")
	const login = "pgtune-pw"
	password := testhost.PasswordUser(t, login)
	cfg := SSHConfig{Name: "pwhost", Address: "127.0.0.1", Port: srv.Port, User: login,
		KnownHostsFile: srv.KnownHostsFile, ConnectTimeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("wrong login password", func(t *testing.T) {
		bad := cfg
		bad.Password = password + "x"
		c, err := DialSSH(ctx, bad)
		if err == nil {
			c.Close()
		}
		if !errors.Is(err, ErrAuthFailed) || !strings.Contains(err.Error(), "a password") {
			t.Fatalf("err = %v, want an authentication failure naming the password", err)
		}
	})

	cfg.Password, cfg.BecomePassword = password, password
	c := dial(t, cfg)
	if !strings.Contains(srv.Log(), "Accepted password for "+login) {
		t.Fatalf("sshd did not log a password login:\n%s", srv.Log())
	}
	var outputs []string
	run := func(cmd Command) (Result, error) {
		res, err := c.Run(ctx, cmd)
		outputs = append(outputs, string(res.Stdout), string(res.Stderr))
		if err != nil {
			outputs = append(outputs, err.Error())
		}
		return res, err
	}
	res, err := run(Command{Args: []string{"id", "-un"}})
	if err != nil || string(res.Stdout) != login+"\n" {
		t.Fatalf("id -un = %q, %v", res.Stdout, err)
	}
	res, err = run(Command{Args: []string{"id", "-u"}, Become: true})
	if err != nil || string(res.Stdout) != "0\n" {
		t.Fatalf("become: id -u = %q (stderr %q), %v", res.Stdout, res.Stderr, err)
	}
	in := strings.Repeat("stdin after the password\n", 4096)
	res, err = run(Command{Args: []string{"cat"}, Stdin: []byte(in), Become: true})
	if err != nil || string(res.Stdout) != in {
		t.Fatalf("become: cat returned %d bytes (want %d), stderr %q, %v", len(res.Stdout), len(in), res.Stderr, err)
	}
	if strings.Contains(string(res.Stderr), "pgtune-sudo-") {
		t.Errorf("sudo's prompt left in stderr: %q", res.Stderr)
	}

	wrong := cfg
	wrong.BecomePassword = "not-" + password
	cw := dial(t, wrong)
	res, err = cw.Run(ctx, Command{Args: []string{"id", "-u"}, Become: true})
	outputs = append(outputs, string(res.Stdout), string(res.Stderr))
	var be *BecomeError
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "become password was refused for user "+login) || ctx.Err() != nil {
		t.Fatalf("wrong become password: err = %v (ctx %v)", err, ctx.Err())
	}
	// A sudo that allows one try fails instead of asking again.
	oneTry := "/etc/sudoers.d/pgtune-test-" + login + "-one-try"
	if err := os.WriteFile(oneTry, []byte("Defaults:"+login+" passwd_tries=1\n"), 0o440); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(oneTry) })
	if out, err := exec.Command("visudo", "-c").CombinedOutput(); err != nil {
		t.Fatalf("visudo -c: %v: %s", err, out)
	}
	res, err = cw.Run(ctx, Command{Args: []string{"id", "-u"}, Become: true})
	outputs = append(outputs, string(res.Stdout), string(res.Stderr))
	if !errors.As(err, &be) || !strings.Contains(err.Error(), "become password was refused for user "+login) || ctx.Err() != nil {
		t.Fatalf("wrong become password, one try: err = %v (stderr %q)", err, res.Stderr)
	}
	for _, out := range append(outputs, srv.Log()) {
		if strings.Contains(out, password) {
			t.Fatalf("the password appears in output: %q", out)
		}
	}
}
