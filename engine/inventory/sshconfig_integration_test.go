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
// with that key.
func TestIntegrationUserSSHConfig(t *testing.T) {
	srv := testhost.SSHD(t)
	const login = "pgtune-sshcfg"
	testhost.EnsureUser(t, login, false)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("USER", "root")
	t.Setenv("SSH_AUTH_SOCK", "")
	conf := fmt.Sprintf("Host pg1\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n  UserKnownHostsFile %s\n",
		srv.Port, login, srv.KeyFile, srv.KnownHostsFile)
	if err := os.MkdirAll(filepath.Join(home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(src, []byte("[postgres]\npg1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Open(src, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := inv.Host("pg1")
	tr, err := engine.Dial(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	res, err := tr.Run(context.Background(), transport.Command{Args: []string{"id", "-un"}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != login {
		t.Fatalf("id -un = %q, %v; want %s", res.Stdout, err, login)
	}
	if !strings.Contains(srv.Log(), "Accepted publickey for "+login) {
		t.Errorf("sshd did not log a key login for %s:\n%s", login, srv.Log())
	}
}
