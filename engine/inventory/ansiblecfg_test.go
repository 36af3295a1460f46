package inventory

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestLoadAnsibleConfig(t *testing.T) {
	dir := writeTree(t, map[string]string{"ansible.cfg": `# Ansible settings of a PostgreSQL deployment repository
[defaults]
inventory = ./inventory/hosts ; inline comment
Forks: 7
remote_user = deploy
private_key_file = keys/fleet
host_key_checking = False
ask_pass = True

[privilege_escalation]
become_ask_pass = yes

[DEFAULT]
directory = /tmp/cp

[ssh_connection]
ssh_args = -C -o ControlMaster=auto
  -o ControlPersist=60s -o ControlPath=%(directory)s/%%h-%%r
  -o ProxyJump=bastion.example.com
pipelining = True
`})
	c, err := LoadAnsibleConfig(filepath.Join(dir, "ansible.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	want := &AnsibleConfig{
		File:      filepath.Join(dir, "ansible.cfg"),
		Inventory: []string{filepath.Join(dir, "inventory/hosts")},
		Forks:     7,
		AskPass:   true, BecomeAskPass: true,
		Defaults: ConnDefaults{User: "deploy", PrivateKeyFile: filepath.Join(dir, "keys/fleet"), HostKeyChecking: "accept-new",
			SSHArgs: "-C -o ControlMaster=auto\n-o ControlPersist=60s -o ControlPath=/tmp/cp/%h-%r\n-o ProxyJump=bastion.example.com",
			File:    filepath.Join(dir, "ansible.cfg")},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("config\n got: %+v\nwant: %+v", c, want)
	}
}

func TestAnsibleConfigErrors(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"[defaults]\nforks = many\n", "ansible.cfg:2: forks: expected a positive number, got \"many\""},
		{"forks = 5\n", "ansible.cfg:1: a setting before any [section]: \"forks = 5\""},
		{"[defaults]\nhost_key_checking = maybe\n", "ansible.cfg:2: host_key_checking: expected a boolean (yes/no/true/false), got \"maybe\""},
		{"[privilege_escalation]\n\nbecome_ask_pass = perhaps\n", "ansible.cfg:3: become_ask_pass: expected a boolean (yes/no/true/false), got \"perhaps\""},
		{"[ssh_connection]\nssh_args = -o ControlPath=/tmp/%h\n", "ansible.cfg:2: ssh_args: a lone % in \"-o ControlPath=/tmp/%h\" (write %% for a percent sign)"},
		{"[ssh_connection]\nssh_args = -o 'Port=2\n", "ansible.cfg:2: ssh_args: no closing quotation"},
	} {
		dir := writeTree(t, map[string]string{"ansible.cfg": tc.src})
		_, err := LoadAnsibleConfig(filepath.Join(dir, "ansible.cfg"))
		if err == nil || strings.TrimPrefix(err.Error(), dir+"/") != tc.want {
			t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
		}
	}
}

// TestFindAnsibleConfig: $ANSIBLE_CONFIG, then ./ansible.cfg (not in a
// world-writable directory), then ~/.ansible.cfg.
func TestFindAnsibleConfig(t *testing.T) {
	home := writeTree(t, map[string]string{".ansible.cfg": "[defaults]\nremote_user = from-home\n"})
	work := writeTree(t, map[string]string{"ansible.cfg": "[defaults]\nremote_user = from-cwd\n"})
	env := writeTree(t, map[string]string{"ansible.cfg": "[defaults]\nremote_user = from-env\n"})
	t.Setenv("HOME", home)
	t.Chdir(work)
	user := func() string {
		t.Helper()
		c, err := FindAnsibleConfig()
		if err != nil || c == nil {
			t.Fatalf("%v %v", c, err)
		}
		return c.Defaults.User
	}
	t.Setenv("ANSIBLE_CONFIG", env) // a directory holding ansible.cfg
	if u := user(); u != "from-env" {
		t.Errorf("with ANSIBLE_CONFIG: %s", u)
	}
	os.Unsetenv("ANSIBLE_CONFIG")
	if u := user(); u != "from-cwd" {
		t.Errorf("in the working directory: %s", u)
	}
	if err := os.Chmod(work, 0o777); err != nil {
		t.Fatal(err)
	}
	c, err := FindAnsibleConfig()
	if err != nil || c.Defaults.User != "from-home" || len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "world-writable") {
		t.Errorf("world-writable working directory: %+v %v", c, err)
	}
}

// TestAnsibleConfigDefaults: ansible.cfg's settings come below every
// inventory var, and its ssh_args before ansible_ssh_common_args.
func TestAnsibleConfigDefaults(t *testing.T) {
	dir := writeTree(t, map[string]string{"hosts": "[db]\ndb1\ndb2 ansible_user=admin ansible_ssh_common_args='-o ProxyJump=other'\n"})
	d := ConnDefaults{User: "deploy", PrivateKeyFile: "/k", HostKeyChecking: "accept-new", SSHArgs: "-o ProxyJump=bastion -o Port=2222"}
	inv, err := Open(filepath.Join(dir, "hosts"), Options{Defaults: d})
	if err != nil {
		t.Fatal(err)
	}
	db1, _ := inv.Host("db1")
	db2, _ := inv.Host("db2")
	want1 := Conn{Connection: "ssh", Address: "db1", Port: 2222, User: "deploy", PrivateKeyFile: "/k", HostKeyChecking: "accept-new", ProxyJump: "bastion"}
	want2 := want1
	want2.Address, want2.User = "db2", "admin"
	if db1.Conn != want1 || db2.Conn != want2 {
		t.Errorf("conn\n got: %+v\n      %+v\nwant: %+v\n      %+v", db1.Conn, db2.Conn, want1, want2)
	}
}

// TestAnsibleConfigPathsExpanded: paths in ansible.cfg take $VAR, ${VAR}
// and a leading ~ as Ansible expands them (before: "stat ~/inv.ini: no
// such file", "/proj/$HOME/inv.ini"); an unset variable stays as written.
func TestAnsibleConfigPathsExpanded(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("PGTUNE_TEST_KEYS", "/keys")
	dir := writeTree(t, map[string]string{"ansible.cfg": "[defaults]\ninventory = ~/inv.ini\nprivate_key_file = ${PGTUNE_TEST_KEYS}/fleet\n"})
	c, err := LoadAnsibleConfig(filepath.Join(dir, "ansible.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Inventory, []string{filepath.Join(home, "inv.ini")}) || c.Defaults.PrivateKeyFile != "/keys/fleet" {
		t.Errorf("inventory %v, key %q; want %s/inv.ini and /keys/fleet", c.Inventory, c.Defaults.PrivateKeyFile, home)
	}
	for in, want := range map[string]string{"$PGTUNE_TEST_UNSET_X/k": "/d/$PGTUNE_TEST_UNSET_X/k", "a$$b": "/d/a$$b", "x${": "/d/x${", "$1": "/d/$1"} {
		if got := resolveCfgPath("/d", in); got != want {
			t.Errorf("%q: %q, want %q (as written)", in, got, want)
		}
	}
}

// TestAnsibleEnv: Ansible's connection-default variables win over
// ansible.cfg, and count without one; ANSIBLE_INVENTORY and
// ANSIBLE_HOST_KEY_CHECKING are not taken (no -i is localhost, per
// DESIGN; a CI image's HOST_KEY_CHECKING=False must not make every host
// trust on first use).
func TestAnsibleEnv(t *testing.T) {
	for _, k := range []string{"ANSIBLE_INVENTORY", "ANSIBLE_REMOTE_USER", "ANSIBLE_PRIVATE_KEY_FILE", "ANSIBLE_HOST_KEY_CHECKING"} {
		t.Setenv(k, "")
	}
	t.Setenv("ANSIBLE_INVENTORY", "hosts.ini")
	t.Setenv("ANSIBLE_HOST_KEY_CHECKING", "False")
	if c, err := WithAnsibleEnv(nil); err != nil || c != nil {
		t.Fatalf("only ANSIBLE_INVENTORY and ANSIBLE_HOST_KEY_CHECKING set: %+v, %v; want nil", c, err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("ANSIBLE_REMOTE_USER", "deploy")
	t.Setenv("ANSIBLE_PRIVATE_KEY_FILE", "keys/k")
	c, err := WithAnsibleEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Inventory != nil || c.Defaults.User != "deploy" || c.Defaults.PrivateKeyFile != filepath.Join(cwd, "keys/k") || c.Defaults.HostKeyChecking != "" {
		t.Errorf("without ansible.cfg: %+v", c)
	}
	cfg := &AnsibleConfig{File: "/p/ansible.cfg", Inventory: []string{"/p/inv"}, Defaults: ConnDefaults{User: "cfg", PrivateKeyFile: "/p/k"}}
	if c, err = WithAnsibleEnv(cfg); err != nil {
		t.Fatal(err)
	}
	if c.Inventory[0] != "/p/inv" || c.Defaults.User != "deploy" || c.Defaults.PrivateKeyFile != filepath.Join(cwd, "keys/k") {
		t.Errorf("over ansible.cfg: %+v", c)
	}
}
