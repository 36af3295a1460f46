// Package testenv keeps pgtune's test binaries from the configuration of
// the machine and the person that run them. pgtune honours the user's
// ~/.ssh/config and known_hosts, the system's ssh_config, ansible.cfg
// (wherever Ansible finds one), the ssh agent and $XDG_STATE_HOME; a
// developer's `Host *` with a ProxyJump, an /etc/ansible/ansible.cfg with
// a remote_user, or a loaded agent would otherwise change what the tests
// see. Each test binary's TestMain calls Run (or Isolate), after any
// helper role the binary plays (a copy of it run as a fake program or as
// pgtune) has been dispatched: the processes the tests start, the pgtune
// binary, ansible and patroni included, inherit the environment made here.
//
// Tests about those files make their own (t.Setenv("HOME", …),
// $ANSIBLE_CONFIG, syspaths.SSHConfig) as before.
package testenv

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/pgtune/pgtune/internal/safedir"
	"github.com/pgtune/pgtune/internal/syspaths"
)

// Run runs m's tests isolated from the machine (Isolate) and returns their
// exit code, the scratch directory removed: TestMain is
//
//	func TestMain(m *testing.M) { os.Exit(testenv.Run(m)) }
func Run(m interface{ Run() int }) int {
	done, err := Isolate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	defer done()
	return m.Run()
}

// Isolate makes this process, and every process it starts, see none of
// the machine's ssh and Ansible configuration, agent or run state:
//
//   - HOME is a new empty directory (no ~/.ssh/config, known_hosts,
//     default keys or ~/.ansible.cfg);
//   - ANSIBLE_CONFIG is an empty file in it (Ansible's first choice,
//     so ./ansible.cfg and /etc/ansible/ansible.cfg are not read either,
//     by pgtune or by ansible);
//   - XDG_STATE_HOME is a directory in it (run states);
//   - TMPDIR, when the machine's is one others may write (safeTempDir),
//     is a directory of this run's, so that t.TempDir and the home are
//     trusted as a run state directory is;
//   - SSH_AUTH_SOCK is unset;
//   - the system's ssh_config and ansible.cfg are not read by this
//     process (IgnoreSystemFiles);
//   - as root, the machine's sysctl configuration is hidden
//     (MaskSysctlConfig: the binary runs again in a mount namespace of
//     its own, and this call returns there).
//
// Go's own directories (GOCACHE, GOMODCACHE, GOPATH, GOENV) keep the
// values they had under the real HOME, so a test that builds pgtune
// reuses the build cache. done removes the directory; the environment is
// not put back (the process is about to exit).
func Isolate() (done func(), err error) {
	if err := MaskSysctlConfig(); err != nil {
		return nil, err
	}
	IgnoreSystemFiles()
	pinGoDirs()
	tmp, err := safeTempDir()
	if err != nil {
		return nil, err
	}
	home, err := os.MkdirTemp("", "pgtune-test-home-")
	if err != nil {
		return nil, err
	}
	done = func() {
		_ = os.RemoveAll(home)
		if tmp != "" {
			_ = os.RemoveAll(tmp)
		}
	}
	cfg := filepath.Join(home, "ansible.cfg")
	state := filepath.Join(home, "state")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		done()
		return nil, err
	}
	if err := os.Mkdir(state, 0o700); err != nil {
		done()
		return nil, err
	}
	for k, v := range map[string]string{"HOME": home, "ANSIBLE_CONFIG": cfg, "XDG_STATE_HOME": state} {
		if err := os.Setenv(k, v); err != nil {
			done()
			return nil, err
		}
	}
	// Nor the agent, nor Ansible's variables pgtune reads beside
	// ansible.cfg (inventory.WithAnsibleEnv).
	for _, k := range AnsibleEnv {
		if err := os.Unsetenv(k); err != nil {
			done()
			return nil, err
		}
	}
	return done, nil
}

// safeTempDir points TMPDIR at a scratch directory of its own when the
// machine's fails the rule run state directories are checked by (safedir:
// a TMPDIR that is 0777 and not sticky): the tests keep run states under
// t.TempDir, and what they expect must not depend on the machine. The
// directory is made in the first of /tmp, /var/tmp and /dev/shm whose
// levels pass, 0755 so that tests handing files to another user (the
// cluster owner) can still reach theirs; it is returned for removal ("" when
// TMPDIR was kept). With no such place, TMPDIR is kept, with a warning.
func safeTempDir() (string, error) {
	level, why, err := safedir.Above(os.TempDir())
	if err == nil && why == "" {
		return "", nil
	}
	for _, base := range []string{"/tmp", "/var/tmp", "/dev/shm"} {
		if _, why, err := safedir.Above(base); err != nil || why != "" {
			continue
		}
		d, err := os.MkdirTemp(base, "pgtune-test-tmp-")
		if err != nil {
			continue
		}
		if err := os.Chmod(d, 0o755); err != nil {
			_ = os.RemoveAll(d)
			return "", err
		}
		return d, os.Setenv("TMPDIR", d)
	}
	fmt.Fprintf(os.Stderr, "testenv: warning: TMPDIR %s: %s %s, and no other place for test files passes: tests of the run state may fail\n", os.TempDir(), level, why)
	return "", nil
}

// AnsibleEnv are the variables Isolate unsets: the agent, and Ansible's
// that pgtune reads beside ansible.cfg.
var AnsibleEnv = []string{"SSH_AUTH_SOCK", "ANSIBLE_INVENTORY", "ANSIBLE_REMOTE_USER", "ANSIBLE_PRIVATE_KEY_FILE", "ANSIBLE_HOST_KEY_CHECKING"}

// IgnoreSystemFiles stops this process from reading /etc/ssh/ssh_config
// and /etc/ansible/ansible.cfg (syspaths). Isolate calls it; a copy of a
// test binary that runs as pgtune in an environment a test made (the
// acceptance scripts') calls it alone.
func IgnoreSystemFiles() {
	syspaths.SSHConfig = ""
	syspaths.AnsibleConfig = ""
}

// LDFlags are the go build -ldflags for a pgtune binary a test runs: it
// reads neither system file, as IgnoreSystemFiles does in process.
const LDFlags = "-X github.com/pgtune/pgtune/internal/syspaths.SSHConfig= -X github.com/pgtune/pgtune/internal/syspaths.AnsibleConfig="

// goDirs are the go command's settings whose defaults follow HOME.
var goDirs = []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOENV"}

// pinGoDirs sets goDirs in the environment to what the go command
// resolves them to now, under the real HOME; where there is no go command
// no test runs one either.
func pinGoDirs() {
	missing := false
	for _, k := range goDirs {
		if os.Getenv(k) == "" {
			missing = true
		}
	}
	if !missing {
		return
	}
	out, err := exec.Command("go", append([]string{"env", "-json"}, goDirs...)...).Output()
	if err != nil {
		return
	}
	var env map[string]string
	if json.Unmarshal(out, &env) != nil {
		return
	}
	for _, k := range goDirs {
		if v := env[k]; v != "" && os.Getenv(k) == "" {
			_ = os.Setenv(k, v)
		}
	}
}
