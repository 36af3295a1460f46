package transport

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestResolveRefusedDirectives(t *testing.T) {
	local := localIdentity{user: "alice", home: "/home/alice"}
	conf := `Host canon
  CanonicalizeHostname yes
Host canon-off
  CanonicalizeHostname no
Host family
  AddressFamily inet6
Host bind
  BindAddress 10.0.0.5
Host bindif
  BindInterface eth1
Host fdpass
  ProxyCommand nc %h %p
  ProxyUseFdpass yes
Host khcmd
  KnownHostsCommand /usr/local/bin/keys %H
Host algos
  HostKeyAlgorithms ssh-ed25519
Host algos-plus
  HostKeyAlgorithms +ssh-rsa
Host checkip
  CheckHostIP yes
Host dns
  VerifyHostKeyDNS yes
Host revoked
  RevokedHostKeys /etc/ssh/revoked
Host nolocal
  NoHostAuthenticationForLocalhost yes
Host localcmd
  PermitLocalCommand yes
  LocalCommand touch /tmp/x
Host agentpath
  IdentityAgent /run/other-agent.sock
Host agentnone
  IdentityAgent none
Host viahop
  ProxyJump hop1
Host hop1
  ProxyJump hop0
Host twohops
  ProxyJump hopA,hopB
Host hopB
  ProxyCommand nc %h %p
Host ignored
  ControlMaster auto
  ControlPath ~/.ssh/cm-%r@%h:%p
  ControlPersist 10m
  ForwardAgent yes
  LocalForward 5432 localhost:5432
  RemoteCommand sudo -i
  ConnectionAttempts 3
  UpdateHostKeys yes
  HashKnownHosts yes
`
	path := filepath.Join(t.TempDir(), "ssh_config")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	refused := map[string]string{
		"canon":     "Host canon: CanonicalizeHostname yes is not supported",
		"family":    "Host family: AddressFamily inet6 is not supported",
		"bind":      "Host bind: BindAddress 10.0.0.5 is not supported",
		"bindif":    "Host bindif: BindInterface eth1 is not supported",
		"fdpass":    "Host fdpass: ProxyUseFdpass yes is not supported",
		"khcmd":     "Host khcmd: KnownHostsCommand /usr/local/bin/keys %H is not supported",
		"algos":     "Host algos: HostKeyAlgorithms ssh-ed25519 is not supported",
		"checkip":   "Host checkip: CheckHostIP yes is not supported",
		"dns":       "Host dns: VerifyHostKeyDNS yes is not supported",
		"revoked":   "Host revoked: RevokedHostKeys /etc/ssh/revoked is not supported",
		"nolocal":   "Host nolocal: NoHostAuthenticationForLocalhost yes is not supported",
		"localcmd":  "Host localcmd: PermitLocalCommand yes is not supported",
		"agentpath": "Host agentpath: IdentityAgent /run/other-agent.sock is not supported",
		"viahop":    "jump host hop1: its own ProxyJump hop0 is not supported",
		"twohops":   "jump host hopB: ProxyCommand is not supported on a jump host after the first one",
	}
	for alias, want := range refused {
		t.Run(alias, func(t *testing.T) {
			_, err := resolve(SSHConfig{Name: alias, ConfigFile: path}, local, true)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v, want it to name %s and contain %q", err, path, want)
			}
		})
	}
	for _, alias := range []string{"canon-off", "algos-plus", "ignored"} {
		t.Run(alias, func(t *testing.T) {
			if _, err := resolve(SSHConfig{Name: alias, ConfigFile: path}, local, true); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("IdentityAgent none drops the agent", func(t *testing.T) {
		r, err := resolve(SSHConfig{Name: "agentnone", ConfigFile: path}, local, true)
		if err != nil || r.target.agent {
			t.Fatalf("agent = %v, err = %v; want no agent", r != nil && r.target.agent, err)
		}
	})
	t.Run("the first hop's ProxyCommand is kept, expanded for the hop", func(t *testing.T) {
		conf := "Host db\n  ProxyJump hopB\nHost hopB\n  HostName 10.9.9.9\n  User j\n  ProxyCommand nc %h %p %r %n %%\n"
		p := filepath.Join(t.TempDir(), "c")
		os.WriteFile(p, []byte(conf), 0o600)
		r, err := resolve(SSHConfig{Name: "db", ConfigFile: p}, local, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.jumps[0].proxyCommand; got != "nc 10.9.9.9 22 j hopB %" {
			t.Errorf("hop ProxyCommand = %q", got)
		}
	})
}

// Match blocks are evaluated as ssh(1) evaluates them (the comparison
// with ssh -G itself is TestSSHConfigMatchesSSH): Match host tests the
// HostName obtained so far, Match user the User.
func TestResolveMatchBlocks(t *testing.T) {
	local := localIdentity{user: "alice", home: "/home/alice"}
	for conf, wantPort := range map[string]int{
		"Match all\n  Port 2\n":                                         2,
		"Host db\n  User bob\nMatch host db\n  Port 2\n":                2, // HostName is db
		"Host db\n  HostName 10.0.0.9\nMatch host db\n  Port 2\n":       22,
		"Host db\n  HostName 10.0.0.9\nMatch host 10.0.0.*\n  Port 2\n": 2,
		"Match host 10.0.0.*\n  Port 2\nHost db\n  HostName 10.0.0.9\n": 22, // before the HostName: the name
		"Match exec \"true\"\n  Port 2\n":                               2,
		"Match exec \"false\"\n  Port 2\n":                              22,
		"Match user alice\n  Port 2\n":                                  2, // no User: the local user
		"Host db\n  User root\nMatch user root\n  Port 2\n":             2,
	} {
		p := filepath.Join(t.TempDir(), "c")
		os.WriteFile(p, []byte(conf), 0o600)
		r, err := resolve(SSHConfig{Name: "db", ConfigFile: p}, local, false)
		if err != nil || r.target.port != wantPort {
			t.Errorf("%q: err = %v, route %+v; want port %d", conf, err, r, wantPort)
		}
	}
}

func TestResolveKnownHostsFiles(t *testing.T) {
	local := localIdentity{user: "alice", home: "/home/alice"}
	conf := `Host a
  UserKnownHostsFile none
  GlobalKnownHostsFile /etc/ssh/one "/etc/ssh/two words"
  HostKeyAlias db-a
Host b
  GlobalKnownHostsFile none
Host c
  UserKnownHostsFile ~/.ssh/kh_%h none
`
	p := filepath.Join(t.TempDir(), "c")
	os.WriteFile(p, []byte(conf), 0o600)
	for _, tc := range []struct {
		alias        string
		user, global []string
		hostKeyAlias string
	}{
		{"a", nil, []string{"/etc/ssh/one", "/etc/ssh/two words"}, "db-a"},
		{"b", []string{"/home/alice/.ssh/known_hosts"}, nil, ""},
		{"c", []string{"/home/alice/.ssh/kh_c"}, nil, ""},
	} {
		r, err := resolve(SSHConfig{Name: tc.alias, ConfigFile: p}, local, false)
		if err != nil {
			t.Fatal(err)
		}
		e := r.target
		if !reflect.DeepEqual(e.knownHosts, tc.user) || !reflect.DeepEqual(e.globalKnownHosts, tc.global) || e.hostKeyAlias != tc.hostKeyAlias {
			t.Errorf("%s: user %q global %q alias %q; want %q %q %q", tc.alias, e.knownHosts, e.globalKnownHosts, e.hostKeyAlias, tc.user, tc.global, tc.hostKeyAlias)
		}
		if tc.hostKeyAlias != "" && e.knownHostsName() != tc.hostKeyAlias+":22" {
			t.Errorf("%s: known_hosts name %q", tc.alias, e.knownHostsName())
		}
	}
}
