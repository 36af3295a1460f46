package inventory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTree writes files (path → content) under a new temp dir.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestOpenErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string // after the temp dir
	}{
		{"ssh option that changes the host key", map[string]string{
			"hosts": "[db]\ndb1 ansible_ssh_common_args='-o HostKeyAlias=other'\n",
		}, `/hosts:2: host "db1": ansible_ssh_common_args: -o HostKeyAlias=other: pgtune does not take this option from the inventory`},
		{"unknown ssh option", map[string]string{
			"hosts":              "[db]\ndb1\n",
			"group_vars/all.yml": "ansible_ssh_extra_args: -o BindAddress=10.0.0.1\n",
		}, `/group_vars/all.yml:1: host "db1": ansible_ssh_extra_args: -o BindAddress=10.0.0.1: not supported by pgtune`},
		{"inventory script", map[string]string{
			"inv.py": "#!/usr/bin/env python3\nprint('{}')\n",
		}, "/inv.py:1: this is an inventory script; pgtune does not run scripts"},
		{"loop across the files of a directory", map[string]string{
			"inv/01-a.yml": "a:\n  children:\n    b:\n      hosts:\n        db1:\n",
			"inv/02-b":     "[b:children]\na\n[c]\ndb2\n",
		}, `/inv/01-a.yml:1: group "a" contains itself (a → b → a)`},
		{"become method", map[string]string{
			"hosts.yml": "all:\n  hosts:\n    db1:\n      ansible_become_method: su\n",
		}, `/hosts.yml:4: host "db1": ansible_become_method "su" is not supported: pgtune becomes root with sudo only`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeTree(t, tc.files)
			src := dir
			for name := range tc.files {
				if !strings.Contains(name, "/") {
					src = filepath.Join(dir, name)
				}
			}
			_, err := Open(src, Options{})
			if err == nil || !strings.HasPrefix(err.Error(), dir+tc.want) {
				t.Errorf("error\n got: %v\nwant: %s%s…", err, dir, tc.want)
			}
		})
	}
}

// Jinja and vault connection values load (other hosts stay usable) and
// fail their host where it connects, naming where they were written.
func TestUnusableConnectionVarsFailTheirHost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string // after the temp dir
	}{
		{"jinja in group_vars", map[string]string{
			"hosts":                  "[db]\ndb1\n[etcd]\ne1\n",
			"group_vars/db/conn.yml": "# c\nansible_host: \"{{ inventory_hostname }}.internal\"\n",
		}, `/group_vars/db/conn.yml:2: ansible_host: "{{ inventory_hostname }}.internal" is a Jinja template, which pgtune does not evaluate (pgtune expressions are ${ }); write the value itself`},
		{"vault in host_vars", map[string]string{
			"hosts":             "db1\n",
			"host_vars/db1.yml": "ansible_user: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6231\n",
		}, "/host_vars/db1.yml:1: ansible_user is encrypted with Ansible Vault"},
		{"jinja become password in INI", map[string]string{
			"hosts": "[db]\ndb1 ansible_become_password='{{ vault_sudo }}'\n",
		}, `/hosts:2: ansible_become_password: "{{ vault_sudo }}" is a Jinja template, which pgtune does not evaluate (pgtune expressions are ${ }); write the value itself`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeTree(t, tc.files)
			inv, err := Open(filepath.Join(dir, "hosts"), Options{})
			if err != nil {
				t.Fatal(err)
			}
			h, _ := inv.Host("db1")
			if err := h.ConnError(); err == nil || !strings.HasPrefix(err.Error(), `host "db1": `+dir+tc.want) {
				t.Errorf("ConnError\n got: %v\nwant: host \"db1\": %s%s…", err, dir, tc.want)
			}
			if e1, ok := inv.Host("e1"); ok && e1.ConnError() != nil {
				t.Errorf("e1: %v", e1.ConnError())
			}
		})
	}
}

func TestSSHArgs(t *testing.T) {
	dir := writeTree(t, map[string]string{"hosts.yml": `all:
  vars:
    ansible_ssh_common_args: >-
      -C -o ControlMaster=auto -o ControlPersist=60s
      -o "ProxyCommand=ssh -W %h:%p -q jump@bastion" -o UserKnownHostsFile=/etc/pgtune/known_hosts
      -o StrictHostKeyChecking=accept-new -o Port=2201 -o User=ignored -i ~/.ssh/fleet
  hosts:
    db1:
      ansible_user: deploy
    db2:
      ansible_ssh_extra_args: -J ops@bastion:2222 -p 2300
      ansible_ssh_common_args: -o ServerAliveInterval=30
`})
	inv, err := Open(filepath.Join(dir, "hosts.yml"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	db1, _ := inv.Host("db1")
	want := Conn{Connection: "ssh", Address: "db1", Port: 2201, User: "deploy", PrivateKeyFile: "~/.ssh/fleet",
		KnownHostsFile: "/etc/pgtune/known_hosts", HostKeyChecking: "accept-new", ProxyCommand: "ssh -W %h:%p -q jump@bastion"}
	if db1.Conn != want {
		t.Errorf("db1\n got: %+v\nwant: %+v", db1.Conn, want)
	}
	db2, _ := inv.Host("db2")
	want = Conn{Connection: "ssh", Address: "db2", Port: 2300, ProxyJump: "ops@bastion:2222"}
	if db2.Conn != want {
		t.Errorf("db2\n got: %+v\nwant: %+v", db2.Conn, want)
	}
}

func TestUnknownAnsibleVarsWarnOnce(t *testing.T) {
	inv, err := Parse("hosts", []byte("[db]\ndb[1:5] ansible_password=x ansible_become_pass=y ansible_ssh_pipelining=true ansible_python_interpreter=/usr/bin/python3\n"))
	if err != nil {
		t.Fatal(err)
	}
	// The passwords are used now (login and sudo), so only the rest warns.
	want := []string{
		"inventory: pgtune ignores these Ansible variables: ansible_ssh_pipelining (db1, db2, db3 and 2 more)",
	}
	if strings.Join(inv.Warnings, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings\n got: %q\nwant: %q", inv.Warnings, want)
	}
	if h, _ := inv.Host("db4"); h.Conn.Password != "x" || h.Conn.BecomePassword != "y" {
		t.Errorf("db4 passwords not taken: %q %q", h.Conn.Password, h.Conn.BecomePassword)
	}
}

func TestUnusableVarsLeftOut(t *testing.T) {
	inv, err := Parse("hosts.yml", []byte("all:\n  hosts:\n    db1:\n      name: \"{{ x }}\"\n      keep: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := inv.Host("db1")
	if _, ok := h.Vars["name"]; ok || h.Vars["keep"] != 1 {
		t.Errorf("vars %v", h.Vars)
	}
	if e := h.Unusable["name"]; e == nil || !strings.HasPrefix(e.Error(), "hosts.yml:4: name:") {
		t.Errorf("unusable: %v", e)
	}
}
