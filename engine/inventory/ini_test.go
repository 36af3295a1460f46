package inventory

import (
	"reflect"
	"testing"
)

func TestINIErrors(t *testing.T) {
	for _, tc := range []struct{ name, src, want string }{
		{"unknown section type", "[db:hostz]\nx\n", "hosts.ini:1: section [db:hostz] has unknown type \"hostz\" (expected [db], [db:vars] or [db:children])"},
		{"space in header", "[db cluster]\nx\n", "hosts.ini:1: invalid section [db cluster]: a header is [group], [group:vars] or [group:children], without spaces"},
		{"bare word after host", "[db]\ndb1 ansible_port\n", "hosts.ini:2: host \"db1\": expected key=value after the host name, got \"ansible_port\""},
		{"vars without =", "[db]\ndb1\n[db:vars]\n# c\nfoo\n", "hosts.ini:5: expected key=value in [db:vars], got a line without = that starts \"foo\""},
		// A password is never quoted back: only the key's name is.
		{"vars with a space for =", "[db]\ndb1\n[db:vars]\nansible_become_pass INIPW3\n", "hosts.ini:4: expected key=value in [db:vars], got a line without = that starts \"ansible_become_pass\""},
		{"vars with a tab for =", "[db]\ndb1\n[db:vars]\nansible_become_pass\tINIPW5\n", "hosts.ini:4: expected key=value in [db:vars], got a line without = that starts \"ansible_become_pass\""},
		{"value after a space", "[db]\ndb1 app_token= TOKEN4\n", "hosts.ini:2: host \"db1\": a space after \"app_token=\": write key=value with no space around ="},
		{"vars of undefined group", "[db]\ndb1\n[web:vars]\nx=1\n", "hosts.ini:3: [web:vars] is for a group that is not defined (add a [web] section)"},
		{"undefined child", "[db]\ndb1\n[pg:children]\ndb\nreplicas\n", "hosts.ini:5: [pg:children] names group \"replicas\", which is not defined (add a [replicas] or [replicas:children] section)"},
		{"unclosed quote", "[db]\ndb1 x='a\n", "hosts.ini:2: host line \"db1 x='a\": no closing quotation"},
		{"bad port", "[db]\ndb1 ansible_port=99999\n", "hosts.ini:2: ansible_port: expected a port number (1-65535), got 99999"},
		{"bad range", "[db]\ndb[3:1]\n", "hosts.ini:2: host \"db[3:1]\": range [3:1]: bad bounds"},
		{"become user", "[db]\ndb1 ansible_become_user=postgres\n", "hosts.ini:2: host \"db1\": ansible_become_user \"postgres\" is not supported: pgtune becomes root, which its kernel steps need; remove it or set it to root"},
		{"no hosts", "# nothing\n[db]\n", "hosts.ini:1: inventory has no hosts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("hosts.ini", []byte(tc.src))
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got: %v\nwant: %s", err, tc.want)
			}
		})
	}
}

func TestINIValues(t *testing.T) {
	inv, err := Parse("hosts", []byte(`[db]  # trailing comment
db[01:02] a=5 b="'5'" k=5432,6432 c=0755 d=True e=[1,2] f="x y" g=1.5 h=None # comment
[db:vars]
i='quoted'  # comment
j=bar # kept
`))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := inv.Host("db02")
	want := map[string]any{"a": 5, "b": "5", "c": "0755", "d": true, "e": []any{1, 2}, "f": "x y", "g": 1.5, "h": nil, "i": "quoted", "j": "bar # kept", "k": []any{5432, 6432}}
	if !reflect.DeepEqual(h.Vars, want) {
		t.Errorf("vars\n got: %#v\nwant: %#v", h.Vars, want)
	}
	if h.Line != 2 || h.File != "hosts" {
		t.Errorf("position %s:%d", h.File, h.Line)
	}
}

func TestINIChildrenLoop(t *testing.T) {
	_, err := Parse("hosts", []byte("[a:children]\nb\n[b:children]\na\n[a]\nx\n[b]\ny\n"))
	want := `hosts:1: group "a" contains itself (a → b → a)`
	if err == nil || err.Error() != want {
		t.Errorf("error\n got: %v\nwant: %s", err, want)
	}
}

// TestINIUngroupedThenGrouped: hosts listed before any header and again in
// a group end up only in the group, as in Ansible (and fast: this was
// quadratic).
func TestINIUngroupedThenGrouped(t *testing.T) {
	inv, err := Parse("hosts", []byte("h[0:20000]\nlone\n[g]\nh[0:20000]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ug := inv.Groups["ungrouped"].Hosts; len(ug) != 1 || ug[0] != "lone" {
		t.Errorf("ungrouped: %d hosts, want [lone]", len(ug))
	}
	if len(inv.Groups["g"].Hosts) != 20001 {
		t.Errorf("g: %d hosts", len(inv.Groups["g"].Hosts))
	}
}

func TestConnectionSpellings(t *testing.T) {
	inv, err := Parse("hosts", []byte("a ansible_connection=ansible.builtin.ssh\nb ansible_connection=paramiko\nc ansible_connection=ansible.builtin.local\nd ansible_connection=smart\n"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a": "ssh", "b": "ssh", "c": "local", "d": "ssh"} {
		if h, _ := inv.Host(name); h.Conn.Connection != want {
			t.Errorf("%s: %s, want %s", name, h.Conn.Connection, want)
		}
	}
	if _, err := Parse("hosts", []byte("a ansible_connection=winrm\n")); err == nil || err.Error() != `hosts:1: ansible_connection: expected ssh or local, got "winrm"` {
		t.Errorf("winrm: %v", err)
	}
}
