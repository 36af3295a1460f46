package transport

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	local := localIdentity{user: "alice", home: "/home/alice"}
	homeKnown := "/home/alice/.ssh/known_hosts"

	// What `vagrant ssh-config` prints, quoting and all.
	vagrant := `Host default
  HostName 127.0.0.1
  User vagrant
  Port 2222
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  PasswordAuthentication no
  IdentityFile "/home/alice/my box/.vagrant/machines/default/libvirt/private_key"
  IdentitiesOnly yes
  LogLevel FATAL
  PubkeyAcceptedKeyTypes +ssh-rsa
  HostKeyAlgorithms +ssh-rsa
`
	fleet := `# first obtained value wins, as in OpenSSH
Host db1
  HostName db1.internal
  Port 2200
  IdentityFile ~/.ssh/db1_key
Host db3
  ProxyJump none
Host *.prod db*
  User postgres
  IdentityFile ~/.ssh/%r@%h
  UserKnownHostsFile ~/.ssh/known_fleet "/etc/ssh/known hosts"
  StrictHostKeyChecking accept-new
  ProxyJump ops@bastion:2022
  ConnectTimeout 7
Host bastion
  HostName 10.0.0.1
  IdentityFile ~/.ssh/bastion
Host strict
  StrictHostKeyChecking yes
Host badport
  Port 99999
Host badstrict
  StrictHostKeyChecking maybe
Host pct
  HostName %h.example.com
Host bastion2
  HostName 10.0.0.2
  StrictHostKeyChecking accept-new
`
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	vagrantFile := write("vagrant", vagrant)
	fleetFile := write("fleet", fleet)

	tests := []struct {
		name    string
		cfg     SSHConfig
		agent   bool
		want    endpoint
		jumps   []endpoint
		timeout time.Duration
		wantErr string
	}{
		{
			name:    "bare name, OpenSSH defaults",
			cfg:     SSHConfig{Name: "pg1"},
			want:    endpoint{name: "pg1", host: "pg1", port: 22, user: "alice", knownHosts: []string{homeKnown}, policy: HostKeyStrict},
			timeout: 10 * time.Second,
		},
		{
			name:    "explicit fields",
			cfg:     SSHConfig{Name: "pg1", Address: "10.1.1.1", Port: 2201, User: "admin", PrivateKeyFile: "/k", KnownHostsFile: "/kh", HostKeyPolicy: "accept-new", ConnectTimeout: 3 * time.Second},
			agent:   true,
			want:    endpoint{name: "pg1", host: "10.1.1.1", port: 2201, user: "admin", keyFiles: []string{"/k"}, agent: true, knownHosts: []string{"/kh"}, policy: HostKeyAcceptNew},
			timeout: 3 * time.Second,
		},
		{
			name:    "~ in inventory paths",
			cfg:     SSHConfig{Name: "pg1", PrivateKeyFile: "~/.ssh/db4", KnownHostsFile: "~/kh"},
			want:    endpoint{name: "pg1", host: "pg1", port: 22, user: "alice", keyFiles: []string{"/home/alice/.ssh/db4"}, knownHosts: []string{"/home/alice/kh"}, policy: HostKeyStrict},
			timeout: 10 * time.Second,
		},
		{
			name:  "vagrant ssh-config",
			cfg:   SSHConfig{Name: "default", ConfigFile: vagrantFile},
			agent: true, // IdentitiesOnly yes keeps it out
			want: endpoint{name: "default", host: "127.0.0.1", port: 2222, user: "vagrant",
				keyFiles:   []string{"/home/alice/my box/.vagrant/machines/default/libvirt/private_key"},
				knownHosts: []string{"/dev/null"}, policy: HostKeyAcceptNew},
			timeout: 10 * time.Second,
		},
		{
			// The address is the name ssh is given (`ssh default`, as
			// Ansible runs it): its block's HostName still applies.
			name: "explicit fields win over ssh_config",
			cfg:  SSHConfig{Name: "box1", ConfigFile: vagrantFile, Address: "default", Port: 22, User: "ops", PrivateKeyFile: "/inv_key", KnownHostsFile: "/kh", HostKeyPolicy: "strict"},
			want: endpoint{name: "box1", host: "127.0.0.1", port: 22, user: "ops",
				keyFiles:   []string{"/inv_key", "/home/alice/my box/.vagrant/machines/default/libvirt/private_key"},
				knownHosts: []string{"/kh"}, policy: HostKeyStrict},
			timeout: 10 * time.Second,
		},
		{
			name: "patterns, first value wins, tokens, jump host looked up too",
			cfg:  SSHConfig{Name: "db1", ConfigFile: fleetFile, PrivateKeyFile: "/inv_key"},
			want: endpoint{name: "db1", host: "db1.internal", port: 2200, user: "postgres",
				keyFiles:   []string{"/inv_key", "/home/alice/.ssh/db1_key", "/home/alice/.ssh/postgres@db1.internal"},
				knownHosts: []string{"/home/alice/.ssh/known_fleet", "/etc/ssh/known hosts"}, policy: HostKeyAcceptNew},
			jumps: []endpoint{{name: "bastion", host: "10.0.0.1", port: 2022, user: "ops",
				keyFiles: []string{"/home/alice/.ssh/bastion", "/inv_key"}, knownHosts: []string{homeKnown}, policy: HostKeyStrict, jump: true}},
			timeout: 7 * time.Second,
		},
		{
			name: "inventory known_hosts applies to jump hosts",
			cfg:  SSHConfig{Name: "db2", ConfigFile: fleetFile, KnownHostsFile: "/kh", HostKeyPolicy: "strict"},
			want: endpoint{name: "db2", host: "db2", port: 22, user: "postgres",
				keyFiles: []string{"/home/alice/.ssh/postgres@db2"}, knownHosts: []string{"/kh"}, policy: HostKeyStrict},
			jumps: []endpoint{{name: "bastion", host: "10.0.0.1", port: 2022, user: "ops",
				keyFiles: []string{"/home/alice/.ssh/bastion"}, knownHosts: []string{"/kh"}, policy: HostKeyStrict, jump: true}},
			timeout: 7 * time.Second,
		},
		{
			// As ssh(1) -o StrictHostKeyChecking=accept-new -J: the hop's
			// ssh gets no -o, so the bastion stays strict.
			name: "inventory accept-new is the target's, not the jump host's",
			cfg:  SSHConfig{Name: "db2", ConfigFile: fleetFile, KnownHostsFile: "/kh", HostKeyPolicy: "accept-new"},
			want: endpoint{name: "db2", host: "db2", port: 22, user: "postgres",
				keyFiles: []string{"/home/alice/.ssh/postgres@db2"}, knownHosts: []string{"/kh"}, policy: HostKeyAcceptNew},
			jumps: []endpoint{{name: "bastion", host: "10.0.0.1", port: 2022, user: "ops",
				keyFiles: []string{"/home/alice/.ssh/bastion"}, knownHosts: []string{"/kh"}, policy: HostKeyStrict, jump: true}},
			timeout: 7 * time.Second,
		},
		{
			name:    "a jump host's own ssh_config block sets its policy",
			cfg:     SSHConfig{Name: "x", ConfigFile: fleetFile, ProxyJump: "bastion2"},
			want:    endpoint{name: "x", host: "x", port: 22, user: "alice", knownHosts: []string{homeKnown}, policy: HostKeyStrict},
			jumps:   []endpoint{{name: "bastion2", host: "10.0.0.2", port: 22, user: "alice", knownHosts: []string{homeKnown}, policy: HostKeyAcceptNew, jump: true}},
			timeout: 10 * time.Second,
		},
		{
			name:    "the inventory's strict binds jump hosts too",
			cfg:     SSHConfig{Name: "x", ConfigFile: fleetFile, ProxyJump: "bastion2", HostKeyPolicy: "strict"},
			want:    endpoint{name: "x", host: "x", port: 22, user: "alice", knownHosts: []string{homeKnown}, policy: HostKeyStrict},
			jumps:   []endpoint{{name: "bastion2", host: "10.0.0.2", port: 22, user: "alice", knownHosts: []string{homeKnown}, policy: HostKeyStrict, jump: true}},
			timeout: 10 * time.Second,
		},
		{
			name:    "field ProxyJump with IPv6 and URI hops",
			cfg:     SSHConfig{Name: "pg9", ProxyJump: "ssh://j1@[::1]:2201, j2.example"},
			want:    endpoint{name: "pg9", host: "pg9", port: 22, user: "alice", knownHosts: []string{homeKnown}, policy: HostKeyStrict},
			jumps:   []endpoint{{name: "::1", host: "::1", port: 2201, user: "j1", knownHosts: []string{homeKnown}, policy: HostKeyStrict, jump: true}, {name: "j2.example", host: "j2.example", port: 22, user: "alice", knownHosts: []string{homeKnown}, policy: HostKeyStrict, jump: true}},
			timeout: 10 * time.Second,
		},
		{
			name:    "ProxyJump none",
			cfg:     SSHConfig{Name: "db3", ConfigFile: fleetFile},
			want:    endpoint{name: "db3", host: "db3", port: 22, user: "postgres", keyFiles: []string{"/home/alice/.ssh/postgres@db3"}, knownHosts: []string{"/home/alice/.ssh/known_fleet", "/etc/ssh/known hosts"}, policy: HostKeyAcceptNew},
			timeout: 7 * time.Second,
		},
		{
			name:    "HostName %h",
			cfg:     SSHConfig{Name: "pct", ConfigFile: fleetFile},
			want:    endpoint{name: "pct", host: "pct.example.com", port: 22, user: "alice", knownHosts: []string{homeKnown}, policy: HostKeyStrict},
			timeout: 10 * time.Second,
		},
		{name: "bad port in ssh_config", cfg: SSHConfig{Name: "badport", ConfigFile: fleetFile}, wantErr: `Host badport: bad Port "99999"`},
		{name: "bad StrictHostKeyChecking", cfg: SSHConfig{Name: "badstrict", ConfigFile: fleetFile}, wantErr: `StrictHostKeyChecking "maybe"`},
		{name: "bad policy field", cfg: SSHConfig{Name: "x", HostKeyPolicy: "off"}, wantErr: `host key policy "off"`},
		{name: "bad ProxyJump port", cfg: SSHConfig{Name: "x", ProxyJump: "j:http"}, wantErr: `ProxyJump "j:http": bad port "http"`},
		{name: "missing ssh_config", cfg: SSHConfig{Name: "x", ConfigFile: filepath.Join(dir, "nope")}, wantErr: "no such file"},
		{name: "no name", cfg: SSHConfig{}, wantErr: "no host name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := resolve(tc.cfg, local, tc.agent)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*r.target, tc.want) {
				t.Errorf("target\n got %+v\nwant %+v", *r.target, tc.want)
			}
			var jumps []endpoint
			for _, j := range r.jumps {
				jumps = append(jumps, *j)
			}
			if !reflect.DeepEqual(jumps, tc.jumps) {
				t.Errorf("jumps\n got %+v\nwant %+v", jumps, tc.jumps)
			}
			if r.timeout != tc.timeout {
				t.Errorf("timeout = %v, want %v", r.timeout, tc.timeout)
			}
		})
	}
}

func TestResolveDefaultKeys(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	for _, k := range []string{"id_rsa", "id_ed25519"} {
		os.WriteFile(filepath.Join(home, ".ssh", k), []byte("x"), 0o600)
	}
	r, err := resolve(SSHConfig{Name: "h"}, localIdentity{user: "u", home: home}, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(home, ".ssh", "id_ed25519"), filepath.Join(home, ".ssh", "id_rsa")}
	if !reflect.DeepEqual(r.target.keyFiles, want) {
		t.Errorf("keys = %v, want %v (existing defaults, OpenSSH order)", r.target.keyFiles, want)
	}
}

func TestParseProxyJump(t *testing.T) {
	tests := []struct {
		in      string
		want    []jumpSpec
		wantErr bool
	}{
		{in: "", want: nil},
		{in: "none", want: nil},
		{in: "b", want: []jumpSpec{{host: "b"}}},
		{in: "u@b:2", want: []jumpSpec{{user: "u", host: "b", port: 2}}},
		{in: "u@d@b", want: []jumpSpec{{user: "u@d", host: "b"}}},
		{in: "[fe80::1]:22,ssh://x@y", want: []jumpSpec{{host: "fe80::1", port: 22}, {user: "x", host: "y"}}},
		{in: "fe80::1", want: []jumpSpec{{host: "fe80::1"}}},
		{in: "a,,b", wantErr: true},
		{in: "u@:22", wantErr: true},
		{in: "b:0", wantErr: true},
	}
	for _, tc := range tests {
		got, err := parseProxyJump(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: err = %v", tc.in, err)
			continue
		}
		if !tc.wantErr && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %+v, want %+v", tc.in, got, tc.want)
		}
	}
}
