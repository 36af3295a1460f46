package inventory

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Inventories of several shapes whose host patterns are checked against
// ansible --list-hosts (TestSubscriptOrderAgainstAnsible): subscripts
// count hosts in the order the inventory lists them, children after their
// parent's own hosts; globs and regexes match as Ansible's do.
var subscriptInventories = map[string]map[string]string{
	"lim.ini": {"lim.ini": "[pg]\ndb10\ndb2\ndb1\nDB3\n[web]\nweb-b\nweb-a\n[etcd]\ne2\ne1\n"},
	"ch.ini": {"ch.ini": "[top:children]\nzc\nac\n[top]\nt2\nt1\n[zc]\nz2\nz1\n[ac]\na2\na1\nt1\n" +
		"[zc:children]\nzz\n[ac:children]\naa\n[zz]\nzz1\n[aa]\naa1\n"},
	"y.yml": {"y.yml": "all:\n  hosts:\n    u2:\n  children:\n    pg:\n      hosts:\n        db10:\n        db2:\n        db1:\n" +
		"      children:\n        sub:\n          hosts:\n            s1:\n            db0:\n" +
		"    web:\n      hosts:\n        w2:\n        w1:\n"},
	// An inventory directory: its files in name order (.ini is one of
	// the extensions Ansible skips there).
	"dir": {"dir/b": "[pg]\nb2\nb1\n", "dir/a": "[pg]\na9\na1\n[web]\nw1\n"},
	// Globs, regexes and subscripts on them; a host and a group of one name.
	"glob.ini": {"glob.ini": "[pg]\npg1\npg2\nproddb\n[pgx]\npg3\npg1\n[db]\ndb1\ndb.x\n"},
	"same.ini": {"same.ini": "web\n[web]\nw1\nw2\n[pg]\npg1\nweb\n"},
}

var subscriptCases = []struct {
	inv, pattern, want string // want in Ansible's order
	// unordered: Ansible's order here varies between runs (the second
	// level of children); only the set is compared with it.
	unordered bool
}{
	{"lim.ini", "pg[0]", "db10", false},
	{"lim.ini", "pg[-1]", "DB3", false},
	{"lim.ini", "pg[1:2]", "db2 db1", false},
	{"lim.ini", "pg[2:]", "db1 DB3", false},
	{"lim.ini", "pg[2:0]", "db1", false}, // an end of 0 is none: [2]
	{"lim.ini", "web[0]", "web-b", false},
	{"lim.ini", "etcd[0:5]", "e2 e1", false},
	{"lim.ini", "etcd[1:9]", "e1", false},
	{"lim.ini", "etcd[3:5]", "", false},
	{"lim.ini", "etcd[5]", "", false},
	{"lim.ini", "etcd[-3]", "", false},
	{"lim.ini", "etcd[-2]", "e2", false},
	{"lim.ini", "web[0]:pg[0]", "web-b db10", false},
	{"lim.ini", "all[0:3]", "db10 db2 db1 DB3", false},
	{"lim.ini", "all[-1]", "e1", false},
	{"ch.ini", "top[0:5]", "t2 t1 z2 z1 a2 a1", false},
	{"ch.ini", "top[0:]", "t2 t1 z2 z1 a2 a1 zz1 aa1", true},
	{"ch.ini", "ac[0:]", "a2 a1 t1 aa1", false},
	{"ch.ini", "zc[-1]", "zz1", false},
	{"y.yml", "pg[0:]", "db10 db2 db1 s1 db0", false},
	{"y.yml", "pg[-1]", "db0", false},
	{"y.yml", "all[0:]", "u2 db10 db2 db1 w2 w1 s1 db0", false},
	{"y.yml", "ungrouped[0]", "u2", false},
	{"dir", "pg[0:]", "a9 a1 b2 b1", false},
	{"dir", "all[-1]", "w1", false},
	// A ~regex matches from the name's start (Python's re.match), not
	// anywhere: ~db took proddb too, a host Ansible leaves out.
	{"glob.ini", "~db", "db1 db.x", false},
	{"glob.ini", "~pg", "pg1 pg2 proddb pg3", false}, // group pg matches
	{"glob.ini", "~.*db", "db1 db.x proddb", false},
	{"glob.ini", "~p.*1$", "pg1", false},
	// A subscript on a glob counts the hosts of the groups it matches,
	// then the hosts it matches, repeats included: pg*[1] was pg1, a
	// glob's [1] read as a set.
	{"glob.ini", "pg*[0]", "pg1", false},
	{"glob.ini", "pg*[1]", "pg2", false},
	{"glob.ini", "pg*[3]", "pg3", false},
	{"glob.ini", "pg*[5]", "pg1", false},
	{"glob.ini", "pg*[0:4]", "pg1 pg2 proddb pg3", false},
	{"glob.ini", "[pd]*[-1]", "db.x", false},
	{"glob.ini", "pg[0-1]", "pg1 pg2", false}, // the old [a-b] form, still read as [a:b]
	// Python's fnmatch: "!" negates a set, a "-" last is a member, "."
	// is no wildcard; [:1] is no subscript but a set.
	{"glob.ini", "db[!1]*", "db.x", false},
	{"glob.ini", "d?[!.]*", "db1", false},
	{"glob.ini", "p[a-h-]*", "pg1 pg2 proddb pg3", false},
	{"glob.ini", "*db", "db1 db.x proddb", false},
	{"glob.ini", "pg[:1]", "pg1", false},
	// A host of a group's name is the host in a union, the group after
	// & or !: all:!web kept the host web and web took w1 w2 too.
	{"same.ini", "web", "web", false},
	{"same.ini", "web[0]", "w1", false},
	{"same.ini", "all:!web", "pg1 web", false},
	{"same.ini", "pg:!web", "pg1 web", false},
	{"same.ini", "w*", "w1 w2 web", false},
}

func writeSubscriptInventories(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for name, files := range subscriptInventories {
		for rel, text := range files {
			p := filepath.Join(root, name, rel)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func subscriptSource(root, inv string) string {
	if inv == "dir" {
		return filepath.Join(root, inv, "dir")
	}
	return filepath.Join(root, inv, inv)
}

// TestSubscriptOrder: a subscript picks by Ansible's order of a group's
// hosts, not by name (pg[0] was DB3, Ansible's is db10), and a slice past
// the hosts is cut there (etcd[0:5] was an error).
func TestSubscriptOrder(t *testing.T) {
	root := writeSubscriptInventories(t)
	for _, tc := range subscriptCases {
		t.Run(tc.inv+"/"+tc.pattern, func(t *testing.T) {
			inv, err := Open(subscriptSource(root, tc.inv), Options{})
			if err != nil {
				t.Fatal(err)
			}
			hs, err := inv.Match(tc.pattern)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range hs {
				got = append(got, h.Name)
			}
			if want := sortedNames(tc.want); strings.Join(got, " ") != want {
				t.Errorf("Match(%q) = %q, want %q", tc.pattern, strings.Join(got, " "), want)
			}
		})
	}
}

// TestSubscriptOrderAgainstAnsible checks the cases' expectations with
// Ansible's own host selection, in the order it picked the hosts.
func TestSubscriptOrderAgainstAnsible(t *testing.T) {
	if testing.Short() {
		t.Skip("comparison with ansible runs without -short")
	}
	root := writeSubscriptInventories(t)
	byInv := map[string][]string{}
	for _, tc := range subscriptCases {
		byInv[tc.inv] = append(byInv[tc.inv], tc.pattern)
	}
	answers := map[string][]string{} // inv + "\x00" + pattern → hosts
	for inv, patterns := range byInv {
		for i, hosts := range ansibleHosts(t, subscriptSource(root, inv), patterns) {
			answers[inv+"\x00"+patterns[i]] = hosts
		}
	}
	for _, tc := range subscriptCases {
		t.Run(tc.inv+"/"+tc.pattern, func(t *testing.T) {
			got := strings.Join(answers[tc.inv+"\x00"+tc.pattern], " ")
			want := tc.want
			if tc.unordered {
				got, want = sortedNames(got), sortedNames(want)
			}
			if got != want {
				t.Errorf("ansible --list-hosts %q = %q, the case says %q", tc.pattern, got, want)
			}
		})
	}
}

// ansibleHosts answers each pattern as ansible -i SRC --list-hosts
// PATTERN does (the ad-hoc CLI's get_host_list: a pattern Ansible refuses,
// such as an index past the hosts, lists none), all in one Python process
// with the installed Ansible: one `ansible` run per pattern took a second
// or two of CPU each.
func ansibleHosts(t *testing.T, src string, patterns []string) [][]string {
	t.Helper()
	const script = `import json, sys
from ansible.errors import AnsibleError
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
inv = InventoryManager(loader=DataLoader(), sources=[sys.argv[1]])
out = []
for p in json.load(sys.stdin):
    try:
        out.append([h.name for h in inv.list_hosts(p)])
    except AnsibleError:
        out.append([])
print(json.dumps(out))
`
	in, _ := json.Marshal(patterns)
	cmd := exec.Command(ansiblePython(t), "-c", script, src)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "ANSIBLE_LOCAL_TEMP="+home, "LC_ALL=C.UTF-8")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ansible host patterns on %s: %v\n%s", src, err, stderr.String())
	}
	var hosts [][]string
	if err := json.Unmarshal(out, &hosts); err != nil || len(hosts) != len(patterns) {
		t.Fatalf("ansible host patterns on %s: %v (%d answers for %d)\n%s", src, err, len(hosts), len(patterns), out)
	}
	return hosts
}

func sortedNames(s string) string {
	f := strings.Fields(s)
	sort.Strings(f)
	return strings.Join(f, " ")
}
