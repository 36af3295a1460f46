package inventory

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/expr"
)

func loadT(t *testing.T, path string) *Inventory {
	t.Helper()
	inv, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func TestAnsibleInventory(t *testing.T) {
	inv := loadT(t, "testdata/ansible.yml")
	var names []string
	for _, h := range inv.Hosts {
		names = append(names, h.Name)
	}
	want := []string{"bastion", "db1", "db2", "db3", "db4.example.com", "old1"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("hosts %v, want %v", names, want)
	}
	tests := []struct {
		host   string
		groups []string
		vars   map[string]any // subset
		conn   Conn
	}{
		{
			host:   "bastion",
			groups: []string{"all", "ungrouped"},
			vars:   map[string]any{"tier": "all", "env": "prod"},
			conn:   Conn{Connection: "ssh", Address: "192.0.2.10", User: "deploy"},
		},
		{
			// primary (depth 2) beats postgres (1) beats all (0); eu is
			// depth 1 too, so primary's role wins over eu's.
			host:   "db1",
			groups: []string{"all", "eu", "postgres", "primary"},
			vars:   map[string]any{"tier": "primary", "role": "primary", "region": "eu", "ansible_port": 2222},
			conn: Conn{Connection: "ssh", Address: "192.0.2.21", Port: 2222, User: "deploy", Become: true,
				PGData: "/var/lib/postgresql/15/main"},
		},
		{
			host:   "db2",
			groups: []string{"all", "eu", "postgres", "replicas"},
			vars:   map[string]any{"tier": "replicas", "role": "replica", "region": "eu"},
			conn: Conn{Connection: "ssh", Address: "db2", User: "deploy", Become: true,
				PGData: "/var/lib/postgresql/15/main"},
		},
		{
			// pgtune and postgres are both depth 1: "pgtune" sorts later and
			// wins; ssh_user beats ansible_user given at the same level.
			host:   "db3",
			groups: []string{"all", "pgtune", "postgres", "replicas"},
			conn: Conn{Connection: "ssh", Address: "db3", User: "postgres", Become: true,
				KnownHostsFile: "known_hosts", ConfigFile: filepath.Join("testdata", "ssh_config"),
				HostKeyChecking: "accept-new", PGData: "/var/lib/postgresql/15/main"},
		},
		{
			host:   "db4.example.com",
			groups: []string{"all", "postgres", "replicas"},
			conn: Conn{Connection: "ssh", Address: "db4.example.com", Port: 2200, User: "deploy", Become: true,
				PrivateKeyFile: "~/.ssh/db4", PGData: "/var/lib/postgresql/15/main"},
		},
		{
			host:   "old1",
			groups: []string{"all", "legacy"},
			vars:   map[string]any{"unknown_thing": map[string]any{"a": 1}},
			conn:   Conn{Connection: "local", Address: "old1", User: "deploy"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			h, ok := inv.Host(tt.host)
			if !ok {
				t.Fatal("missing")
			}
			if !reflect.DeepEqual(h.Groups, tt.groups) {
				t.Errorf("groups %v, want %v", h.Groups, tt.groups)
			}
			for k, v := range tt.vars {
				if !reflect.DeepEqual(h.Vars[k], v) {
					t.Errorf("var %s = %#v, want %#v", k, h.Vars[k], v)
				}
			}
			if h.Conn != tt.conn {
				t.Errorf("conn\n got %+v\nwant %+v", h.Conn, tt.conn)
			}
		})
	}
	g := inv.Groups["replicas"]
	if !reflect.DeepEqual(g.Hosts, []string{"db2", "db3", "db4.example.com"}) || g.Vars["role"] != "replica" {
		t.Errorf("replicas group: %+v", g)
	}
	if !reflect.DeepEqual(inv.Groups["postgres"].Children, []string{"primary", "replicas"}) {
		t.Errorf("postgres children: %v", inv.Groups["postgres"].Children)
	}
	if !reflect.DeepEqual(inv.Groups["all"].Children, []string{"eu", "legacy", "pgtune", "postgres", "ungrouped"}) {
		t.Errorf("all children: %v", inv.Groups["all"].Children)
	}
}

func TestPrecedence(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		host string
		key  string
		want any
	}{
		{"host beats groups", "all:\n  vars: {x: all}\n  children:\n    g:\n      vars: {x: g}\n      hosts:\n        h: {x: host}\n", "h", "x", "host"},
		{"child beats parent", "all:\n  children:\n    p:\n      vars: {x: p}\n      children:\n        c:\n          vars: {x: c}\n          hosts: {h: }\n", "h", "x", "c"},
		{"parent beats all", "all:\n  vars: {x: all}\n  children:\n    p:\n      vars: {x: p}\n      hosts: {h: }\n", "h", "x", "p"},
		{"later sibling wins", "all:\n  children:\n    zeta:\n      vars: {x: zeta}\n      hosts: {h: }\n    alpha:\n      vars: {x: alpha}\n      hosts: {h: }\n", "h", "x", "zeta"},
		{"priority beats name", "all:\n  children:\n    zeta:\n      vars: {x: zeta}\n      hosts: {h: }\n    alpha:\n      vars: {x: alpha, ansible_group_priority: 5}\n      hosts: {h: }\n", "h", "x", "alpha"},
		{"deeper beats name", "all:\n  children:\n    a:\n      children:\n        aa:\n          vars: {x: aa}\n          hosts: {h: }\n    z:\n      vars: {x: z}\n      hosts: {h: }\n", "h", "x", "aa"},
		{"depth is the longest path", "all:\n  children:\n    top:\n      vars: {x: top}\n      children: {mid: {children: {leaf: }}}\n    leaf:\n      vars: {x: leaf}\n      hosts: {h: }\n    mid:\n      vars: {x: mid}\n", "h", "x", "leaf"},
		{"top-level group is a child of all", "all:\n  vars: {x: all}\ng:\n  vars: {x: g}\n  hosts: {h: }\n", "h", "x", "g"},
		{"group defined twice merges", "all:\n  children:\n    g:\n      vars: {x: 1, y: 1}\n      hosts: {h: }\n    p:\n      children:\n        g:\n          vars: {y: 2}\n", "h", "x", 1},
		{"host defined twice merges", "a:\n  hosts:\n    h: {x: 1, y: 1}\nb:\n  hosts:\n    h: {y: 2}\n", "h", "y", 2},
		{"replace, not deep merge", "all:\n  vars: {m: {a: 1, b: 2}}\n  hosts:\n    h: {m: {a: 3}}\n", "h", "m", map[string]any{"a": 3}},
		{"merge keys", "x: &d\n  vars: {x: from-anchor, y: 1}\n  hosts: {h: }\ny:\n  <<: *d\n  hosts: {h2: }\n", "h2", "x", "from-anchor"},
		{"explicit key beats merged", "x: &d\n  vars: {x: from-anchor}\n  hosts: {h: }\ny:\n  <<: *d\n  hosts: {h2: }\n  vars: {x: own}\n", "h2", "x", "own"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, err := Parse("inv.yml", []byte(tt.doc))
			if err != nil {
				t.Fatal(err)
			}
			h, ok := inv.Host(tt.host)
			if !ok {
				t.Fatalf("no host %s", tt.host)
			}
			if !reflect.DeepEqual(h.Vars[tt.key], tt.want) {
				t.Errorf("%s = %#v, want %#v", tt.key, h.Vars[tt.key], tt.want)
			}
		})
	}
}

func TestConnAliases(t *testing.T) {
	tests := []struct {
		name string
		vars string
		want Conn
	}{
		{"defaults", "{}", Conn{Connection: "ssh", Address: "h"}},
		{"ansible spellings", "{ansible_host: 10.0.0.1, ansible_port: '2222', ansible_user: u, ansible_ssh_private_key_file: /k, ansible_connection: local, ansible_become: 'yes'}",
			Conn{Connection: "local", Address: "10.0.0.1", Port: 2222, User: "u", PrivateKeyFile: "/k", Become: true}},
		{"legacy ansible spellings", "{ansible_ssh_host: a, ansible_ssh_port: 22, ansible_ssh_user: u, ansible_private_key_file: k, ansible_connection: smart}",
			Conn{Connection: "ssh", Address: "a", Port: 22, User: "u", PrivateKeyFile: "k"}},
		{"pgtune keys win in a level", "{ssh_host: b, ansible_host: a, ssh_port: 23, ansible_port: 22}",
			Conn{Connection: "ssh", Address: "b", Port: 23}},
		{"become spellings", "{become: True}", Conn{Connection: "ssh", Address: "h", Become: true}},
		{"become off", "{become: off}", Conn{Connection: "ssh", Address: "h"}},
		{"pg and paths", "{pg_data: /d, pg_bin: /b, pg_config_file: /c, pg_restart: systemctl restart postgresql, ssh_config_file: /abs/cfg, ssh_known_hosts_file: kh}",
			Conn{Connection: "ssh", Address: "h", PGData: "/d", PGBin: "/b", PGConfigFile: "/c",
				PGRestart: "systemctl restart postgresql", ConfigFile: "/abs/cfg", KnownHostsFile: "kh"}},
		{"relative ssh_config", "{ssh_config_file: vagrant.cfg}", Conn{Connection: "ssh", Address: "h", ConfigFile: "/etc/pgtune/vagrant.cfg"}},
		{"injection is kept verbatim (quoted later)", "{pg_data: '/x; touch /tmp/owned', ssh_user: '$(id)', pg_bin: '`id`'}",
			Conn{Connection: "ssh", Address: "h", PGData: "/x; touch /tmp/owned", User: "$(id)", PGBin: "`id`"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, err := Parse("/etc/pgtune/inv.yml", []byte("all:\n  hosts:\n    h: "+tt.vars+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			if got := inv.Hosts[0].Conn; got != tt.want {
				t.Errorf("\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestLevelBeatsSpelling(t *testing.T) {
	// A host's ansible_user beats a group's ssh_user: the most specific
	// level wins whatever the spelling.
	inv, err := Parse("i.yml", []byte("all:\n  vars: {ssh_user: a}\n  hosts:\n    h: {ansible_user: b}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if u := inv.Hosts[0].Conn.User; u != "b" {
		t.Errorf("user %q", u)
	}
}

// TestAnsibleSpellingOrder: among Ansible's spellings of a setting, the
// one Ansible's ssh plugin takes wins whatever level set it: the last of
// its list (ansible_ssh_host over ansible_host, ansible_ssh_port over
// ansible_port), as "ansible -vvv" connected in exploratory QA (olduser@
// 127.0.0.9 port 1). Before, the most specific level won, and within one
// the last spelling written: pgtune reached newuser@127.0.0.3 port 2.
func TestAnsibleSpellingOrder(t *testing.T) {
	ini := "[g]\nh3 ansible_host=127.0.0.3 ansible_ssh_port=1 ansible_port=2 ansible_user=newuser\n" +
		"[g:vars]\nansible_ssh_host=127.0.0.9\nansible_ssh_user=olduser\nansible_private_key_file=/g\n" +
		"[all:vars]\nansible_ssh_private_key_file=/all\nssh_user=own\n"
	inv, err := Parse("alias.ini", []byte(ini))
	if err != nil {
		t.Fatal(err)
	}
	c := inv.Hosts[0].Conn
	if c.User != "olduser" || c.Address != "127.0.0.9" || c.Port != 1 || c.PrivateKeyFile != "/all" {
		t.Errorf("%s@%s port %d key %s; want olduser@127.0.0.9 port 1 key /all, as Ansible", c.User, c.Address, c.Port, c.PrivateKeyFile)
	}
	// pgtune's own key still wins at its level or a more specific one.
	inv, err = Parse("i.yml", []byte("all:\n  vars: {ansible_ssh_user: a}\n  hosts:\n    h: {ssh_user: b, ansible_user: c}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if u := inv.Hosts[0].Conn.User; u != "b" {
		t.Errorf("user %q, want b (pgtune's key, at the host)", u)
	}
}

func TestRanges(t *testing.T) {
	tests := []struct {
		pattern string
		want    []string
		port    string
		err     string
	}{
		{"db1", []string{"db1"}, "", ""},
		{"db[1:3]", []string{"db1", "db2", "db3"}, "", ""},
		{"db[01:03].x", []string{"db01.x", "db02.x", "db03.x"}, "", ""},
		{"n[a:c]", []string{"na", "nb", "nc"}, "", ""},
		{"w[0:10:5]", []string{"w0", "w5", "w10"}, "", ""},
		{"r[1:2]c[1:2]", []string{"r1c1", "r1c2", "r2c1", "r2c2"}, "", ""},
		{"db[1:2]:2222", []string{"db1", "db2"}, "2222", ""},
		{"fe80::1", []string{"fe80::1"}, "", ""},
		{"[2001:db8::1]:2200", []string{"2001:db8::1"}, "2200", ""},
		{"[2001:db8::1]", []string{"2001:db8::1"}, "", ""},
		{"[2001:db8::1]:x", nil, "", "expected [IPv6], [IPv6]:PORT or [NAME]:PORT"},
		// As Ansible: a zone, an IPv4-mapped address, a bracketed IPv4
		// address or name with a port (each failed the whole inventory).
		{"[fe80::1%eth0]:2222", []string{"fe80::1%eth0"}, "2222", ""},
		{"[fe80::1%eth0]", []string{"fe80::1%eth0"}, "", ""},
		{"fe80::2%eth0", []string{"fe80::2%eth0"}, "", ""},
		{"[::ffff:10.0.0.1]:2200", []string{"::ffff:10.0.0.1"}, "2200", ""},
		{"[10.0.0.1]:2201", []string{"10.0.0.1"}, "2201", ""},
		{"[db1]:2202", []string{"db1"}, "2202", ""},
		{"[db1]:x", nil, "", "expected [IPv6], [IPv6]:PORT or [NAME]:PORT"},
		{"[a:c]", []string{"a", "b", "c"}, "", ""},
		{"[1:3]", []string{"1", "2", "3"}, "", ""},
		{"db:x", nil, "", "expected NAME or NAME:PORT"},
		{"db[3:1]", nil, "", "range [3:1]: bad bounds"},
		{"db[1:2", nil, "", "unbalanced ["},
		{"db[1]", nil, "", "range [1] must be [start:end] or [start:end:step]"},
		{"db[0:999999]", nil, "", "range [0:999999] is too large"},
	}
	for _, tt := range tests {
		names, port, err := expandHost(tt.pattern)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%s: err %v, want %s", tt.pattern, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(names, tt.want) || port != tt.port {
			t.Errorf("%s: %v %q %v", tt.pattern, names, port, err)
		}
	}
}

func TestMatch(t *testing.T) {
	inv := loadT(t, "testdata/ansible.yml")
	tests := []struct {
		pattern string
		want    string
		err     string
	}{
		{pattern: "all", want: "bastion db1 db2 db3 db4.example.com old1"},
		{pattern: "*", want: "bastion db1 db2 db3 db4.example.com old1"},
		{pattern: "postgres", want: "db1 db2 db3 db4.example.com"},
		{pattern: "primary", want: "db1"},
		{pattern: "db2", want: "db2"},
		{pattern: "ungrouped", want: "bastion"},
		{pattern: "db*", want: "db1 db2 db3 db4.example.com"},
		{pattern: "db?", want: "db1 db2 db3"},
		{pattern: "repl*", want: "db2 db3 db4.example.com"},
		{pattern: "primary:legacy", want: "db1 old1"},
		{pattern: "primary,legacy", want: "db1 old1"},
		{pattern: "postgres:&eu", want: "db1 db2"},
		{pattern: "postgres:!eu", want: "db3 db4.example.com"},
		{pattern: "!eu:postgres", want: "db3 db4.example.com"},
		{pattern: "!postgres", want: "bastion old1"},
		{pattern: "postgres:!db1:&replicas", want: "db2 db3 db4.example.com"},
		{pattern: " primary , eu ", want: "db1 db2"},
		{pattern: "~db[0-9]$", want: "db1 db2 db3"},
		{pattern: "~^(old|bas)", want: "bastion old1"},
		{pattern: "postgres[0]", want: "db1"},
		{pattern: "postgres[-1]", want: "db4.example.com"},
		{pattern: "postgres[1:2]", want: "db2 db3"},
		{pattern: "postgres[2:]", want: "db3 db4.example.com"},
		{pattern: "db3:db3", want: "db3"},
		{pattern: "nope", err: `no host or group matches "nope"`},
		{pattern: "postgres:!nope", err: `no host or group matches "nope"`},
		{pattern: "zz*", err: `no host or group matches "zz*"`},
		{pattern: "~^zz", err: `no host or group matches "~^zz"`},
		{pattern: "postgres[9]", want: ""}, // Ansible: "No hosts matched"
		{pattern: "postgres[-2:]", err: `no host or group matches "postgres[-2:]"`},
		{pattern: `~\Qdb`, want: "db1 db2 db3 db4.example.com"}, // panicked once anchored as ^(?:\Qdb)
		{pattern: "~b", want: "bastion"},                        // from the start, as Ansible's re.match
		{pattern: "~(", err: "host pattern \"~(\": error parsing regexp: missing closing ): `(`"},
		{pattern: "", err: "empty host pattern"},
		{pattern: " , ", err: "empty host pattern"},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			hs, err := inv.Match(tt.pattern)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("err %v, want %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range hs {
				got = append(got, h.Name)
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("got %q, want %q", strings.Join(got, " "), tt.want)
			}
		})
	}
}

func TestLimit(t *testing.T) {
	inv := loadT(t, "testdata/ansible.yml")
	play, err := inv.Match("postgres")
	if err != nil {
		t.Fatal(err)
	}
	got, err := inv.Limit(play, "eu:!db2")
	if err != nil || len(got) != 1 || got[0].Name != "db1" {
		t.Errorf("limit eu:!db2 → %v %v", got, err)
	}
	got, err = inv.Limit(play, "bastion")
	if err != nil || len(got) != 0 {
		t.Errorf("limit to a host outside the play: %v %v", got, err)
	}
	if _, err := inv.Limit(play, "db9"); err == nil || err.Error() != `--limit: no host or group matches "db9"` {
		t.Errorf("unknown host in --limit: %v", err)
	}
}

func TestLocalhost(t *testing.T) {
	inv := Localhost()
	hs, err := inv.Match("all")
	if err != nil || len(hs) != 1 || hs[0].Conn.Connection != "local" || hs[0].Name != "localhost" {
		t.Fatalf("%v %v", hs, err)
	}
	if _, err := inv.Match("localhost"); err != nil {
		t.Error(err)
	}
	if _, err := inv.Limit(hs, "other"); err == nil {
		t.Error("unknown --limit accepted")
	}
}

func TestErrorsArePositioned(t *testing.T) {
	_, err := Parse("inv.yml", []byte("all:\n  hosts:\n    h:\n      ssh_port: abc\n"))
	var pe *expr.PosError
	if !errors.As(err, &pe) || pe.File != "inv.yml" || pe.Line != 4 {
		t.Fatalf("%#v", err)
	}
	if _, err := Load("testdata/does-not-exist.yml"); err == nil || !strings.Contains(err.Error(), "testdata/does-not-exist.yml") {
		t.Errorf("missing file: %v", err)
	}
}

// TestBracketedIPv6: [IPv6]:PORT in an INI or YAML inventory and in a
// comma list is the host IPv6 on PORT, as ansible-inventory reads it
// (before: "range [2001:db8::1] must be [start:end]" failed the whole
// inventory, and the comma list made a host named "[2001:db8::1]:2200"
// on port 22).
func TestBracketedIPv6(t *testing.T) {
	dir := t.TempDir()
	ini := filepath.Join(dir, "v6.ini")
	yml := filepath.Join(dir, "v6.yml")
	if err := os.WriteFile(ini, []byte("[2001:db8::1]:2200\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(yml, []byte("all:\n  hosts:\n    \"[2001:db8::1]:2200\":\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{ini, yml, "[2001:db8::1]:2200,"} {
		inv, err := Open(src, Options{})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if len(inv.Hosts) != 1 || inv.Hosts[0].Name != "2001:db8::1" || inv.Hosts[0].Conn.Port != 2200 {
			t.Errorf("%s: hosts %+v, want 2001:db8::1 on port 2200", src, inv.Hosts[0])
		}
	}
}

// TestYAML11Booleans: unquoted yes/no/on/off in a YAML inventory are
// booleans, as Ansible's YAML 1.1 loader makes them (ansible-inventory
// --list shows true); quoted, they stay strings. Before, "yes" was a
// string and `${vars.big ? 4 * GiB : 2 * GiB}` failed the host.
func TestYAML11Booleans(t *testing.T) {
	inv, err := Parse("i.yml", []byte("all:\n  hosts:\n    h:\n      big: yes\n      off_switch: Off\n      quoted: \"yes\"\n      nested: {a: [on, no]}\n      word: yesterday\n"))
	if err != nil {
		t.Fatal(err)
	}
	v := inv.Hosts[0].Vars
	if v["big"] != true || v["off_switch"] != false || v["quoted"] != "yes" || v["word"] != "yesterday" {
		t.Errorf("vars %#v", v)
	}
	if n, ok := v["nested"].(map[string]any); !ok || fmt.Sprint(n["a"]) != "[true false]" {
		t.Errorf("nested %#v", v["nested"])
	}
}
