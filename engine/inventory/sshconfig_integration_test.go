package inventory_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// TestIntegrationUserSSHConfig: the inventory names only pg1; where it is,
// which user logs in and with which key is said by ~/.ssh/config alone,
// as for `ssh pg1`. A real sshd on 127.0.0.1 must see that user log in
// with that key. pg2 gets its port, user and key only through a Match
// block (host tests the HostName, exec runs a command), as ssh(1) would:
// were the block ignored, pg2 would be dialled at port 1.
func TestIntegrationUserSSHConfig(t *testing.T) {
	srv := testhost.SSHD(t)
	const login = "pgtune-sshcfg"
	testhost.EnsureUser(t, login, false)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("USER", "root")
	t.Setenv("SSH_AUTH_SOCK", "")
	settings := fmt.Sprintf("  Port %d\n  User %s\n  IdentityFile %s\n  UserKnownHostsFile %s\n", srv.Port, login, srv.KeyFile, srv.KnownHostsFile)
	conf := "Host pg1\n  HostName 127.0.0.1\n" + settings +
		"Host pg2\n  HostName 127.0.0.1\n" +
		"Match originalhost pg2 host 127.0.0.1 exec \"test %n = pg2 && test %h = 127.0.0.1\"\n" + settings +
		"Host *\n  Port 1\n"
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(src, []byte("[postgres]\npg1\npg2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Open(src, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pg1", "pg2"} {
		h, _ := inv.Host(name)
		tr, err := engine.Dial(context.Background(), h)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		res, err := tr.Run(context.Background(), transport.Command{Args: []string{"id", "-un"}})
		tr.Close()
		if err != nil || strings.TrimSpace(string(res.Stdout)) != login {
			t.Fatalf("%s: id -un = %q, %v; want %s", name, res.Stdout, err, login)
		}
	}
	if n := strings.Count(srv.Log(), "Accepted publickey for "+login); n != 2 {
		t.Errorf("sshd logged %d key logins for %s, want 2:\n%s", n, login, srv.Log())
	}
}

// TestIntegrationSSHConfigForAddress: db1 sets ansible_host, so Ansible
// runs `ssh 127.0.0.1` and the ssh_config's `Host 127.0.0.1` block sends it
// through the bastion, while the `Host db1` block (a ProxyCommand that
// fails) is not applied. Real sshd servers on 127.0.0.1: the bastion must
// see the login, or pgtune connected directly where Ansible would not.
func TestIntegrationSSHConfigForAddress(t *testing.T) {
	target, bastion := testhost.SSHD(t), testhost.SSHD(t)
	pub, err := os.ReadFile(target.KeyFile + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(bastion.Dir, "authorized_keys"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(pub)
	f.Close()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("USER", "root")
	t.Setenv("SSH_AUTH_SOCK", "")
	known := filepath.Join(home, "known_hosts")
	if err := os.WriteFile(known, []byte(target.HostKeyLine+"\n"+bastion.HostKeyLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("Host db1\n  ProxyCommand false\n"+
		"Host 127.0.0.1\n  ProxyJump bastion\n"+
		"Host bastion\n  HostName 127.0.0.1\n  Port %d\n"+
		"Host *\n  User root\n  IdentityFile %s\n  UserKnownHostsFile %s\n", bastion.Port, target.KeyFile, known)
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(src, []byte(fmt.Sprintf("[postgres]\ndb1 ansible_host=127.0.0.1 ansible_port=%d\n", target.Port)), 0o600); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Open(src, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := inv.Host("db1")
	tr, err := engine.Dial(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.Run(context.Background(), transport.Command{Args: []string{"echo", "through the bastion"}})
	tr.Close()
	if err != nil || string(res.Stdout) != "through the bastion\n" {
		t.Fatalf("echo = %q, %v", res.Stdout, err)
	}
	if n, nb := acceptedLogins(target), acceptedLogins(bastion); n != 1 || nb != 1 {
		t.Errorf("logins: target %d, bastion %d; want 1, 1", n, nb)
	}
}
