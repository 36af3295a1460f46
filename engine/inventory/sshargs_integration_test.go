package inventory_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

func acceptedLogins(s *testhost.SSHServer) int {
	return strings.Count(s.Log(), "Accepted publickey for ")
}

// TestIntegrationAnsibleSSHArgs dials real sshd servers on 127.0.0.1 the
// way an INI inventory's ansible_ssh_common_args says: through a bastion
// with -o ProxyJump=, and with -o ProxyCommand="ssh -W %h:%p …" (the real
// ssh client). The bastion must see the login each time: a direct
// connection would be a silent bypass.
func TestIntegrationAnsibleSSHArgs(t *testing.T) {
	if testing.Short() {
		t.Skip("real sshd: runs without -short")
	}
	ssh, err := exec.LookPath("ssh")
	if err != nil {
		t.Fatal("ssh client not installed: run scripts/deps.sh")
	}
	target, bastion := testhost.SSHD(t), testhost.SSHD(t)
	// One key for both, as a fleet usually has.
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
	dir := t.TempDir()
	known := filepath.Join(dir, "known_hosts")
	lines := target.HostKeyLine + "\n" + bastion.HostKeyLine + "\n"
	if err := os.WriteFile(known, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	ini := fmt.Sprintf(`# Both reach the same database host, each through the bastion.
[postgres]
viajump   ansible_ssh_common_args='-o ProxyJump=root@127.0.0.1:%d -o ControlMaster=auto -o ControlPersist=60s'
viaproxy  ansible_ssh_common_args='-o ProxyCommand="%s -F /dev/null -o BatchMode=yes -o UserKnownHostsFile=%s -i %s -p %d -W %%h:%%p root@127.0.0.1"'

[postgres:vars]
ansible_host=127.0.0.1
ansible_port=%d
ansible_user=root
ansible_ssh_private_key_file=%s
ssh_known_hosts_file=%s
`, bastion.Port, ssh, bastion.KnownHostsFile, target.KeyFile, bastion.Port, target.Port, target.KeyFile, known)
	src := filepath.Join(dir, "hosts")
	if err := os.WriteFile(src, []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	inv, err := inventory.Open(src, inventory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"viajump", "viaproxy"} {
		t.Run(name, func(t *testing.T) {
			h, _ := inv.Host(name)
			before, beforeB := acceptedLogins(target), acceptedLogins(bastion)
			tr, err := engine.Dial(context.Background(), h)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			res, err := tr.Run(context.Background(), transport.Command{Args: []string{"echo", "through the bastion"}})
			if err != nil || string(res.Stdout) != "through the bastion\n" {
				t.Fatalf("echo = %q, %v", res.Stdout, err)
			}
			if n, nb := acceptedLogins(target)-before, acceptedLogins(bastion)-beforeB; n != 1 || nb != 1 {
				t.Errorf("logins: target %d, bastion %d; want 1, 1", n, nb)
			}
		})
	}
}
