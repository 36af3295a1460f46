package transport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandTokensRefuseShellNames: a host, alias or user name holding
// shell syntax never reaches the shell through a Match exec or a
// ProxyCommand token (CVE-2023-51385): the host fails naming the file,
// the line and the token, and the command does not run.
func TestCommandTokensRefuseShellNames(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	touch := "touch " + marker
	for _, tc := range []struct {
		name string
		conf string
		cfg  SSHConfig
		want string // after "ssh_config <file> "
	}{
		{"HostName with ; into Match exec", "Host db\n  HostName \"db;" + touch + "\"\nMatch exec \"true %h\"\n  Port 2\n",
			SSHConfig{Name: "db"}, `line 3: Match exec "true %h": %h expands to "db;touch `},
		{"inventory user with $( ) into Match exec", "Match exec \"true %r\"\n",
			SSHConfig{Name: "db", User: "x$(" + touch + ")"}, `line 1: Match exec "true %r": %r expands to "x$(touch `},
		{"User from the config with a backtick", "Host db\n  User \"a`" + touch + "`\"\nMatch exec \"true %r\"\n",
			SSHConfig{Name: "db"}, "line 3: Match exec \"true %r\": %r expands to \"a`touch "},
		{"alias that reads as an option", "Match exec \"true %n\"\n",
			SSHConfig{Name: "-oProxyCommand=" + touch}, `line 1: Match exec "true %n": %n expands to "-oProxyCommand=`},
		{"alias with a newline", "Match exec \"true %n\"\n",
			SSHConfig{Name: "db\n" + touch}, `%n expands to "db\ntouch `},
		{"HostName with a space into ProxyCommand", "Host db\n  HostName \"db " + touch + "\"\n  ProxyCommand nc %h 22\n",
			SSHConfig{Name: "db"}, `Host db: ProxyCommand "nc %h 22": %h expands to "db touch `},
		{"HostKeyAlias with a pipe", "Host db\n  HostKeyAlias \"k|" + touch + "\"\nMatch exec \"true %k\"\n",
			SSHConfig{Name: "db"}, `line 3: Match exec "true %k": %k expands to "k|touch `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := filepath.Join(t.TempDir(), "config")
			if err := os.WriteFile(conf, []byte(tc.conf), 0o600); err != nil {
				t.Fatal(err)
			}
			tc.cfg.ConfigFile = conf
			_, err := resolve(tc.cfg, localIdentity{user: "alice", home: dir}, false)
			if err == nil || !strings.Contains(err.Error(), "ssh_config "+conf) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ssh_config %s ... %s", err, conf, tc.want)
			}
			if _, err := os.Stat(marker); !os.IsNotExist(err) {
				t.Fatalf("the command ran (%v)", err)
			}
		})
	}
}

// TestCommandTokensInventoryProxyCommand: the inventory's own
// ProxyCommand gets the same check for the names it expands.
func TestCommandTokensInventoryProxyCommand(t *testing.T) {
	e := &endpoint{host: "db1.example", port: 22, user: "a;b"}
	_, err := expandProxyCommand("nc %h %p # %r", e, "db1")
	want := `ProxyCommand "nc %h %p # %r": %r expands to "a;b", which contains the shell metacharacter ';'`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v, want %s", err, want)
	}
}

// TestShellUnsafe: ordinary host, user and jump names pass; shell syntax
// does not.
func TestShellUnsafe(t *testing.T) {
	for _, ok := range []string{"db1.example.com", "10.0.0.9", "::1", "fe80::1%eth0", "alice", "svc_pg-01",
		"admin@jump:2222,bastion", "ssh://u@h:22", "DOMAIN.user", "", "22"} {
		if why := shellUnsafe(ok); why != "" {
			t.Errorf("shellUnsafe(%q) = %q, want safe", ok, why)
		}
	}
	for _, bad := range []string{"a;b", "a&b", "a|b", "$(id)", "`id`", "a b", "a\tb", "a\nb", "a'b", `a"b`, `a\b`,
		"a>b", "a<b", "(a)", "{a,b}", "a*", "a?", "[ab]", "~root", "#x", "-oProxyCommand=x", "a\x1b[2Jb", "a\x00b", "a\xffb"} {
		if shellUnsafe(bad) == "" {
			t.Errorf("shellUnsafe(%q) = safe, want refused", bad)
		}
	}
}
