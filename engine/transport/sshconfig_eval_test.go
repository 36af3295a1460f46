package transport

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sshG is what ssh(1) itself makes of conf for `ssh alias`: the host,
// port and user `ssh -G` prints.
func sshG(t *testing.T, conf, alias string, p configPresets) (host string, port int, login string) {
	t.Helper()
	o := sshGOptions(t, conf, alias, p)
	port, _ = strconv.Atoi(o["port"])
	return o["hostname"], port, o["user"]
}

// sshGOptions is the configuration ssh(1) evaluates from conf for
// `ssh [-l user] [-p port] alias`, key (lower case) to value: `ssh -G`
// prints it (Match exec commands are run) and connects to nothing.
func sshGOptions(t *testing.T, conf, alias string, p configPresets) map[string]string {
	t.Helper()
	args := []string{"-G", "-F", conf}
	if p.user != "" {
		args = append(args, "-l", p.user)
	}
	if p.port != 0 {
		args = append(args, "-p", strconv.Itoa(p.port))
	}
	cmd := exec.Command("ssh", append(args, alias)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ssh -G: %v: %s", err, stderr.String())
	}
	opts := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok {
			opts[k] = v
		}
	}
	return opts
}

// TestSSHConfigMatchesSSH evaluates ssh_configs with Host, Match (host,
// originalhost, user, localuser, exec, all, canonical, final, negated
// criteria), Include inside blocks, and settings fixed beforehand (the
// inventory's, as ssh's -l and -p): pgtune reaches the host,
// port and user that `ssh -G` prints, and the expected ones.
func TestSSHConfigMatchesSSH(t *testing.T) {
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
	dir := t.TempDir()
	marker := filepath.Join(dir, "exec-ran")
	inc := filepath.Join(dir, "inc.conf")
	if err := os.WriteFile(inc, []byte("Match user incuser\n  Port 2301\nHost *\n  Port 2302\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, conf, alias string
		presets           configPresets
		host              string
		port              int
		user              string
	}{
		{"Match host tests the HostName set before it", "Host db\n  HostName 10.0.0.9\nMatch host 10.0.0.*\n  Port 2201\n", "db", configPresets{}, "10.0.0.9", 2201, me.Username},
		{"Match host before the HostName tests the name", "Match host 10.0.0.*\n  Port 2201\nHost db\n  HostName 10.0.0.9\n", "db", configPresets{}, "10.0.0.9", 22, me.Username},
		{"Match originalhost tests the name", "Host db\n  HostName 10.0.0.9\nMatch originalhost db\n  Port 2202\n", "db", configPresets{}, "10.0.0.9", 2202, me.Username},
		{"Match user: the User set before it", "Host db\n  User bob\nMatch user bob\n  Port 2203\n", "db", configPresets{}, "db", 2203, "bob"},
		{"Match user: the inventory's user, as -l", "Match user carol,!bob\n  Port 2204\n", "db", configPresets{user: "carol"}, "db", 2204, "carol"},
		{"Match user: a negated pattern wins", "Match user carol,!bob\n  Port 2204\n", "db", configPresets{user: "bob"}, "db", 22, "bob"},
		{"Match localuser", "Match localuser " + me.Username + "\n  User local-matched\n", "db", configPresets{}, "db", 22, "local-matched"},
		{"Match !localuser", "Match !localuser " + me.Username + "\n  User wrong\n", "db", configPresets{}, "db", 22, me.Username},
		{"Match exec, tokens expanded", "Host db\n  HostName 10.0.0.9\nMatch exec \"test %h = 10.0.0.9 && test %n = db\"\n  Port 2205\n", "db", configPresets{}, "10.0.0.9", 2205, me.Username},
		{"Match exec that fails", "Match exec \"exit 3\"\n  Port 2206\n", "db", configPresets{}, "db", 22, me.Username},
		{"Match !exec", "Match !exec \"false\"\n  Port 2207\n", "db", configPresets{}, "db", 2207, me.Username},
		{"exec not run after a criterion that failed", "Match host other exec \"touch " + marker + "\"\n  Port 2208\n", "db", configPresets{}, "db", 22, me.Username},
		{"Match all", "Match all\n  Port 2209\n", "db", configPresets{}, "db", 2209, me.Username},
		{"Match final: a second pass where Host sees the HostName", "Host db\n  HostName 10.0.0.9\nHost 10.0.0.9\n  User viaip\nMatch final\n", "db", configPresets{}, "10.0.0.9", 22, "viaip"},
		{"Match canonical only in the final pass", "Match canonical\n  Port 2210\nHost db\n  HostName 10.0.0.9\nMatch final host 10.0.0.9\n  Port 2211\n", "db", configPresets{}, "10.0.0.9", 2210, me.Username},
		{"without Match final, canonical never matches", "Match canonical\n  Port 2210\n", "db", configPresets{}, "db", 22, me.Username},
		{"the inventory's port wins", "Match all\n  Port 2213\n", "db", configPresets{port: 2299}, "db", 2299, me.Username},
		{"Include inside a matching Host block", "Host db\n  Include " + inc + "\nHost *\n  User after\n", "db", configPresets{}, "db", 2302, "after"},
		{"Include inside a Host block that does not match", "Host other\n  Include " + inc + "\n", "db", configPresets{}, "db", 22, me.Username},
		{"Match in an included file, and the including block's state after it", "Host db\n  User incuser\n  Include " + inc + "\n  HostName after.example\n", "db", configPresets{}, "after.example", 2301, "incuser"},
		{"first value wins across Host and Match", "Host db\n  Port 2214\nMatch all\n  Port 2215\n  User first\nHost *\n  User second\n", "db", configPresets{}, "db", 2214, "first"},
		{"quoted arguments and comments", "Host \"db\" # the db\n  Port 2216 # a port\n", "db", configPresets{}, "db", 2216, me.Username},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conf := filepath.Join(t.TempDir(), "config")
			if err := os.WriteFile(conf, []byte(tc.conf), 0o600); err != nil {
				t.Fatal(err)
			}
			sh, sp, su := sshG(t, conf, tc.alias, tc.presets)
			if sh != tc.host || sp != tc.port || su != tc.user {
				t.Fatalf("ssh -G: %s@%s:%d, the test expects %s@%s:%d", su, sh, sp, tc.user, tc.host, tc.port)
			}
			local := localIdentity{user: me.Username, home: dir}
			r, err := resolve(SSHConfig{Name: tc.alias, ConfigFile: conf, User: tc.presets.user, Port: tc.presets.port}, local, false)
			if err != nil {
				t.Fatal(err)
			}
			e := r.target
			if e.host != sh || e.port != sp || e.user != su {
				t.Errorf("pgtune: %s@%s:%d, ssh -G: %s@%s:%d", e.user, e.host, e.port, su, sh, sp)
			}
		})
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("a Match exec ran after a criterion before it failed (%v)", err)
	}
}

// TestSSHConfigMatchRefused: a Match criterion pgtune does not honour, or
// a Match line ssh(1) rejects, fails the host naming the file and line.
func TestSSHConfigMatchRefused(t *testing.T) {
	local := localIdentity{user: "alice", home: t.TempDir()}
	for conf, want := range map[string]string{
		"Host db\n  Port 2\nMatch localnetwork 10.0.0.0/8\n  Port 3\n": "line 3: Match localnetwork is not supported by pgtune",
		"Match tagged prod\n  Port 3\n":                                "line 1: Match tagged is not supported by pgtune",
		"Match\n  Port 3\n":                                            "line 1: Match needs at least one criterion",
		"Match host\n":                                                 "line 1: Match host needs an argument",
		"Match all host db\n":                                          "line 1: Match all cannot be combined",
		"Match exec \"nc %C\"\n":                                       "line 1: Match exec \"nc %C\": token %C is not supported by pgtune",
		"Host db\n  Port \"2\n":                                        "line 2: unterminated \" quote",
	} {
		p := filepath.Join(t.TempDir(), "c")
		if err := os.WriteFile(p, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := resolve(SSHConfig{Name: "db", ConfigFile: p}, local, false)
		if want = fmt.Sprintf("ssh_config %s %s", p, want); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want %q", conf, err, want)
		}
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true}, {"*", "db1", true}, {"db?", "db1", true}, {"db?", "db12", false},
		{"*.example.com", "db.example.com", true}, {"*.example.com", "example.com", false},
		{"10.0.*.1", "10.0.3.1", true}, {"a*b*c", "aXbYc", true}, {"a*b*c", "aXbY", false}, {"[ab]", "a", false},
	} {
		if got := globMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %t", tc.pattern, tc.s, got)
		}
	}
}
