package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/pgtune/pgtune/internal/testhost"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"pgtune": func() { os.Exit(newApp().Run(os.Args[1:])) },
	})
}

// TestAcceptance runs the CLI scripts in acceptance/: exit codes, JSON
// shape, refusals. Scripts that need a host get a real sshd on 127.0.0.1:
// $WORK/ssh.yml points at it with its key recorded, $WORK/ssh-unknown.yml
// with an empty known_hosts. $SYSCTL_DIR is where test playbooks keep
// their sysctl files instead of /etc/sysctl.d.
func TestAcceptance(t *testing.T) {
	var sshd *testhost.SSHServer
	if !testing.Short() && os.Geteuid() == 0 {
		// The scripts read the kernel and must see it hold still; apply
		// refusals must also find nothing changed.
		testhost.LockKernel(t)
		sshd = testhost.SSHD(t)
	}
	testscript.Run(t, testscript.Params{
		Dir: "../../acceptance",
		Setup: func(env *testscript.Env) error {
			env.Setenv("SYSCTL_DIR", filepath.Join(env.WorkDir, "sysctl.d"))
			if sshd == nil {
				env.Setenv("HAVE_SSHD", "")
				return nil
			}
			env.Setenv("HAVE_SSHD", "1")
			empty := filepath.Join(env.WorkDir, "empty_known_hosts")
			if err := os.WriteFile(empty, nil, 0o600); err != nil {
				return err
			}
			for name, known := range map[string]string{"ssh.yml": sshd.KnownHostsFile, "ssh-unknown.yml": empty} {
				inv := fmt.Sprintf(`all:
  children:
    postgres:
      hosts:
        db1:
          ssh_host: 127.0.0.1
          ssh_port: %d
          ssh_user: root
          ssh_private_key_file: %s
          ssh_known_hosts_file: %s
  vars:
    sysctl_dir: %s
`, sshd.Port, sshd.KeyFile, known, filepath.Join(env.WorkDir, "sysctl.d"))
				if err := os.WriteFile(filepath.Join(env.WorkDir, name), []byte(inv), 0o644); err != nil {
					return err
				}
			}
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "sshd":
				return sshd != nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	})
}
