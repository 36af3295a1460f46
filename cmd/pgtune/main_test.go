package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/pgtune/pgtune/internal/testenv"
	"github.com/pgtune/pgtune/internal/testhost"
)

// TestMain runs the tests away from this machine's ssh and Ansible
// configuration, agent and run state (testenv): the in-process CLI and
// the processes the tests start inherit that environment. Every copy of
// this binary, the scripts' pgtune among them (whose environment is the
// script's, HOME=/no-home), reads neither system file. The machine's
// sysctl configuration is masked (testenv.MaskSysctlConfig) before
// testscript.Main sets up its command directory, which the copy run in the
// mount namespace makes again (the first one would be left behind).
func TestMain(m *testing.M) {
	testenv.IgnoreSystemFiles()
	if inv := os.Getenv(stuckReadEnv); inv != "" {
		os.Exit(runStuckRead(inv))
	}
	if err := testenv.MaskSysctlConfig(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	testscript.Main(isolated{m}, map[string]func(){
		"pgtune": func() {
			a := newApp()
			dial, err := testDial()
			if err != nil {
				fmt.Fprintln(os.Stderr, "pgtune (test binary):", err)
				os.Exit(1)
			}
			a.Dial = dial
			os.Exit(a.Run(os.Args[1:]))
		},
	})
}

// isolated runs the tests under testenv.
type isolated struct{ m *testing.M }

func (i isolated) Run() int { return testenv.Run(i.m) }

// TestAcceptance runs the CLI scripts in acceptance/: exit codes, JSON
// shape, refusals. Scripts that need a host get a real sshd on 127.0.0.1:
// $WORK/ssh.yml points at it with its key recorded, $WORK/ssh-unknown.yml
// with an empty known_hosts. $SYSCTL_DIR is where test playbooks keep
// their sysctl files instead of /etc/sysctl.d. Scripts that plan from
// facts set PGTUNE_TEST_HOST=$FAKE_HOST: every host is then a fake host
// with the first of profiles' facts (see TestAcceptanceProfiles for the
// others), and $FAKE_HOST.log lists what reached it.
func TestAcceptance(t *testing.T) {
	var sshd *testhost.SSHServer
	kernel := false
	if !testing.Short() && os.Geteuid() == 0 {
		// The sshd scripts read the kernel and must see it hold still.
		testhost.WatchKernel(t)
		kernel = true
		sshd = testhost.SSHD(t)
	}
	runScripts(t, testscript.Params{Dir: "../../acceptance"}, profiles[0], sshd, kernel)
}

// TestAcceptanceProfiles runs the scripts that use the fake host once per
// made-up machine: their expectations must hold whatever MemTotal, huge
// page size or hugetlb support the host has.
func TestAcceptanceProfiles(t *testing.T) {
	files, err := filepath.Glob("../../acceptance/*.txtar")
	if err != nil {
		t.Fatal(err)
	}
	var faked []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), TestHostEnv+"=") {
			faked = append(faked, f)
		}
	}
	if len(faked) == 0 {
		t.Fatalf("no acceptance script sets %s", TestHostEnv)
	}
	for _, p := range profiles[1:] {
		t.Run(p.name, func(t *testing.T) {
			runScripts(t, testscript.Params{Files: faked}, p, nil, false)
		})
	}
}

// runScripts runs acceptance scripts with the fake host's transcript for
// profile written to $FAKE_HOST, and sshd (nil: none) behind $WORK/ssh.yml.
// kernel says the kernel lock is held.
func runScripts(t *testing.T, params testscript.Params, profile hostProfile, sshd *testhost.SSHServer, kernel bool) {
	testscript.Run(t, scriptParams(t, params, profile, sshd, kernel))
}

// scriptParams are runScripts' parameters. The scripts' work directories
// go in a directory the test removes (and the next testhost call, when
// the binary is killed first): testscript's own root
// ($GOTMPDIR/go-test-script*) is removed only by the last of its scripts
// to finish, so a run that skips some of them (-run naming one script,
// -failfast) left it behind in /tmp, one per run.
func scriptParams(t testing.TB, params testscript.Params, profile hostProfile, sshd *testhost.SSHServer, kernel bool) testscript.Params {
	return testscript.Params{
		Dir:         params.Dir,
		Files:       params.Files,
		WorkdirRoot: testhost.TempDir(t, "scripts"),
		Setup: func(env *testscript.Env) error {
			env.Setenv("SYSCTL_DIR", filepath.Join(env.WorkDir, "sysctl.d"))
			env.Setenv("XDG_STATE_HOME", filepath.Join(env.WorkDir, ".state")) // apply keeps its run state here (fleet.go)
			fake := filepath.Join(env.WorkDir, "fakehost.facts")
			if err := os.WriteFile(fake, []byte(profile.transcript()), 0o644); err != nil {
				return err
			}
			env.Setenv("FAKE_HOST", fake)
			for k, v := range profile.env() {
				env.Setenv(k, v)
			}
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
			case "kernel":
				return kernel, nil
			case "hugetlb":
				// This machine's kernel, for scripts on the real host.
				_, err := os.Stat("/proc/sys/vm/nr_hugepages")
				return err == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
	}
}
