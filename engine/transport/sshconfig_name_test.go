package transport

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestSSHConfigLooksUpAnsibleName: the ssh_config is evaluated for the
// name Ansible gives ssh(1), `ssh ADDRESS` when the inventory sets
// ansible_host and `ssh NAME` otherwise. pgtune reaches the host, port,
// user and jump host `ssh -G` prints for that name, and the expected
// ones; the route still carries the inventory name for messages.
func TestSSHConfigLooksUpAnsibleName(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		if testing.Short() {
			t.Skip("no ssh client to compare with")
		}
		t.Fatal("ssh (openssh-client) is needed to compare with: run ./scripts/deps.sh")
	}
	me, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	const fleet = "Host db1\n  HostName 192.0.2.9\n  Port 2401\n  User byname\n" +
		"Host 10.0.0.*\n  Port 2402\n  User byaddress\n  ProxyJump bastion\n"
	cases := []struct {
		name, conf string
		inventory  string // the inventory host name
		address    string // ansible_host, "" when not set
		presets    configPresets
		host       string
		port       int
		user, jump string
	}{
		{"ansible_host set: the address's Host block applies, bastion included", fleet, "db1", "10.0.0.5", configPresets{}, "10.0.0.5", 2402, "byaddress", "bastion"},
		{"ansible_host set: the inventory name's Host block does not", fleet, "db1", "192.0.2.77", configPresets{}, "192.0.2.77", 22, me.Username, ""},
		{"no ansible_host: the inventory name", fleet, "db1", "", configPresets{}, "192.0.2.9", 2401, "byname", ""},
		{"ansible_host equal to the name", fleet, "db1", "db1", configPresets{}, "192.0.2.9", 2401, "byname", ""},
		{"the inventory's port and user win over the address's block", fleet, "db1", "10.0.0.5", configPresets{user: "carol", port: 2299}, "10.0.0.5", 2299, "carol", "bastion"},
		{"the address's block may set a HostName (%h is the address)", "Host *.internal\n  HostName %h.example\n", "db1", "pg-a.internal", configPresets{}, "pg-a.internal.example", 22, me.Username, ""},
		{"Match host sees the address", "Match host 10.1.*\n  Port 2212\n", "db", "10.1.2.3", configPresets{}, "10.1.2.3", 2212, me.Username, ""},
		{"Match originalhost sees the address", "Match originalhost db\n  Port 2213\nMatch originalhost 10.1.2.3\n  Port 2214\n", "db", "10.1.2.3", configPresets{}, "10.1.2.3", 2214, me.Username, ""},
		{"Match exec: %n is the address", "Match exec \"test %n = 10.1.2.3\"\n  Port 2215\n", "db", "10.1.2.3", configPresets{}, "10.1.2.3", 2215, me.Username, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conf := filepath.Join(t.TempDir(), "config")
			if err := os.WriteFile(conf, []byte(tc.conf), 0o600); err != nil {
				t.Fatal(err)
			}
			given := tc.inventory
			if tc.address != "" {
				given = tc.address
			}
			o := sshGOptions(t, conf, given, tc.presets)
			sh, su := o["hostname"], o["user"]
			sp, _ := strconv.Atoi(o["port"])
			if sh != tc.host || sp != tc.port || su != tc.user || o["proxyjump"] != tc.jump {
				t.Fatalf("ssh -G %s: %s@%s:%d via %q, the test expects %s@%s:%d via %q", given, su, sh, sp, o["proxyjump"], tc.user, tc.host, tc.port, tc.jump)
			}
			local := localIdentity{user: me.Username, home: t.TempDir()}
			r, err := resolve(SSHConfig{Name: tc.inventory, Address: tc.address, ConfigFile: conf, User: tc.presets.user, Port: tc.presets.port}, local, false)
			if err != nil {
				t.Fatal(err)
			}
			e := r.target
			if e.host != sh || e.port != sp || e.user != su {
				t.Errorf("pgtune: %s@%s:%d, ssh -G %s: %s@%s:%d", e.user, e.host, e.port, given, su, sh, sp)
			}
			var jumps []string
			for _, j := range r.jumps {
				jumps = append(jumps, j.name)
			}
			if got := strings.Join(jumps, ","); got != o["proxyjump"] {
				t.Errorf("pgtune jumps through %q, ssh -G %s through %q", got, given, o["proxyjump"])
			}
			if e.name != tc.inventory {
				t.Errorf("the route is named %q in messages, want the inventory name %q", e.name, tc.inventory)
			}
		})
	}
}
