package inventory

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// globCases are Python's fnmatch.fnmatchcase results (checked against
// python3 by TestGlobAgainstPython).
var globCases = []struct {
	glob, name string
	want       bool
}{
	{"db*", "db1", true},
	{"db*", "proddb", false},
	{"*db", "proddb", true},
	{"d?", "db", true},
	{"db?", "db.x", false},
	{"db.?", "db.x", true},
	{"db.x", "dbax", false},     // "." is no wildcard
	{"a*", "a/b", true},         // "*" crosses "/" (path.Match's does not)
	{"db[!1]*", "db1", false},   // "!" negates a set
	{"db[!1]*", "db2", true},    //
	{"db[^1]", "db^", true},     // "^" is a member, not a negation
	{"db[^1]", "db2", false},    //
	{"p[a-h-]*", "p-", true},    // a last "-" is a member
	{"p[-a]", "p-", true},       // a first "-" is a member
	{"p[]]", "p]", true},        // a first "]" is a member
	{"p[!]]", "pa", true},       //
	{"p[z-a]", "pz", false},     // a reversed range goes
	{"p[!z-a]", "pq", true},     // and negated, leaves any character
	{"p[", "p[", true},          // a "[" without "]" is literal
	{`p[\]`, `p\`, true},        // a backslash is a member
	{`p\*`, `p\x`, true},        // and no escape outside a set
	{"p[a-c-e]", "p-", true},    // the "-" after a range is a member
	{"p[a-c-e]", "pd", false},   //
	{"[[:alpha:]]", "a]", true}, // no POSIX classes: a set, then "]"
	{"[[:alpha:]]", "a", false}, //
	{"ü*", "über", true},        // whole characters
	{"?ber", "über", true},      //
	{"DB*", "db1", false},       // case counts
	{"**x", "x", true},          //
	{"a[.]b", "a.b", true},      //
	{"x[a-]", "x-", true},       //
	{"x[!a-]", "x-", false},     //
	{"[!]", "[!]", true},        // no closing "]" after "[!]"
}

func TestGlob(t *testing.T) {
	for _, c := range globCases {
		re, err := globRegexp(c.glob)
		if err != nil {
			t.Fatalf("globRegexp(%q): %v", c.glob, err)
		}
		if got := re.MatchString(c.name); got != c.want {
			t.Errorf("glob %q on %q = %v, want %v (%s)", c.glob, c.name, got, c.want, re)
		}
	}
}

// TestGlobAgainstPython compares globRegexp with fnmatchcase of the
// Python Ansible runs on, on the cases above and on random globs over the
// characters sets and ranges are made of.
func TestGlobAgainstPython(t *testing.T) {
	if testing.Short() {
		t.Skip("comparison with python3 runs without -short")
	}
	py := ansiblePython(t)
	type pair struct {
		Glob string `json:"g"`
		Name string `json:"n"`
	}
	var pairs []pair
	for _, c := range globCases {
		pairs = append(pairs, pair{c.glob, c.name})
	}
	rnd := rand.New(rand.NewSource(1))
	const alphabet = "ab-z!^]\\[*?."
	word := func(n int, chars string) string {
		b := make([]byte, rnd.Intn(n)+1)
		for i := range b {
			b[i] = chars[rnd.Intn(len(chars))]
		}
		return string(b)
	}
	for range 20000 {
		// Short names over fewer characters, so that many match.
		pairs = append(pairs, pair{word(7, alphabet), word(3, "ab-z!]")})
	}
	in, _ := json.Marshal(pairs)
	cmd := exec.Command(py, "-c", `import fnmatch, json, sys
print(json.dumps([fnmatch.fnmatchcase(p["n"], p["g"]) for p in json.load(sys.stdin)]))`)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, stderr.String())
	}
	var want []bool
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(pairs) {
		t.Fatalf("python3 output: %v (%d answers for %d)", err, len(want), len(pairs))
	}
	matched := 0
	for _, w := range want {
		if w {
			matched++
		}
	}
	t.Logf("%d of %d pairs match in Python", matched, len(pairs))
	bad := 0
	for i, p := range pairs {
		re, err := globRegexp(p.Glob)
		if err != nil {
			t.Errorf("globRegexp(%q): %v", p.Glob, err)
			continue
		}
		if got := re.MatchString(p.Name); got != want[i] {
			if bad++; bad <= 20 {
				t.Errorf("glob %q on %q: pgtune %v, Python %v (%s)", p.Glob, p.Name, got, want[i], re)
			}
		}
	}
}

// ansiblePython is the interpreter the installed ansible runs on (its
// script's #! line), not whichever python3 comes first in PATH.
func ansiblePython(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("ansible")
	if err != nil {
		t.Fatalf("ansible is not installed (%v): run scripts/deps.sh", err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	if f := strings.Fields(strings.TrimPrefix(line, "#!")); strings.HasPrefix(line, "#!") && len(f) > 0 {
		if f[0] == "/usr/bin/env" && len(f) > 1 {
			return f[1]
		}
		return f[0]
	}
	t.Fatalf("%s has no #! line", bin)
	return ""
}
