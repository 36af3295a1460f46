package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
)

// TestPasswordLoginAndSudoLive: a real unprivileged user whose sshd login
// and sudo both need its password. pgtune facts (which reads root-only
// values through sudo) works with the passwords from the inventory and
// from -k/-K; a wrong sudo password fails the host with the reason; and
// no password ever appears in stdout or stderr, debug logs included.
func TestPasswordLoginAndSudoLive(t *testing.T) {
	if testing.Short() {
		t.Skip("real sshd, sudo and a password user")
	}
	testhost.WatchKernel(t) // facts over sudo read this machine's kernel
	srv := testhost.SSHD(t, "PasswordAuthentication yes")
	const login = "pgtune-pw"
	password := testhost.PasswordUser(t, login)
	work := t.TempDir()
	inventory := func(name string, vars ...string) string {
		p := filepath.Join(work, name)
		writeFile(t, p, fmt.Sprintf("[postgres]\npw1 ansible_host=127.0.0.1 ansible_port=%d ansible_user=%s ansible_become=yes ssh_known_hosts_file=%s %s\n",
			srv.Port, login, srv.KnownHostsFile, strings.Join(vars, " ")))
		return p
	}
	var all bytes.Buffer
	run := func(read func(string) (string, error), args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		a := newApp()
		a.Stdout, a.Stderr = &out, &errOut
		a.ReadPassword = read
		code := a.Run(args)
		all.WriteString(out.String() + errOut.String())
		return out.String(), errOut.String(), code
	}

	withVars := inventory("vars", "ansible_password="+password, "ansible_become_password="+password)
	out, errOut, code := run(nil, "facts", "-v", "-i", withVars, "--format", "json")
	if code != 0 || !strings.Contains(out, `"mem_total"`) {
		t.Fatalf("facts with inventory passwords: exit %d\n%s\n%s", code, out, errOut)
	}
	typed := 0
	out, errOut, code = run(func(string) (string, error) { typed++; return password, nil },
		"facts", "-k", "-K", "-v", "-i", inventory("bare"), "--format", "json")
	if code != 0 || typed != 2 || !strings.Contains(out, `"mem_total"`) {
		t.Fatalf("facts with -k -K: exit %d, %d prompts\n%s\n%s", code, typed, out, errOut)
	}
	if n := strings.Count(srv.Log(), "Accepted password for "+login); n < 2 {
		t.Errorf("sshd saw %d password logins, want 2 or more", n)
	}
	out, errOut, code = run(nil, "facts", "-v", "-i",
		inventory("wrong", "ansible_password="+password, "ansible_become_password=not-"+password), "--format", "json")
	if code != 1 || !strings.Contains(out+errOut, "become password was refused for user "+login) {
		t.Fatalf("wrong sudo password: exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(all.String(), password) {
		t.Fatalf("a password appears in pgtune's output:\n%s", all.String())
	}
}
