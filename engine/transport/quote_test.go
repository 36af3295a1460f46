package transport

import (
	"os/exec"
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "''"},
		{"plain", "plain"},
		{"/var/lib/postgresql/15/main", "/var/lib/postgresql/15/main"},
		{"vm.nr_hugepages=1024", "vm.nr_hugepages=1024"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"'", `''\'''`},
		{"$(touch /tmp/owned)", "'$(touch /tmp/owned)'"},
		{"`id`", "'`id`'"},
		{"/x; touch /tmp/owned", "'/x; touch /tmp/owned'"},
		{"a\nb", "'a\nb'"},
		{"~root", "'~root'"},
		{"*", "'*'"},
		{"héllo", "'héllo'"},
	}
	for _, tc := range tests {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	if got := Join([]string{"sh", "-c", `echo "$1"`, "sh", "a b"}); got != `sh -c 'echo "$1"' sh 'a b'` {
		t.Errorf("Join = %s", got)
	}
}

// shells are the login shells a remote sshd may hand our command line to.
func shells(t testing.TB) []string {
	var out []string
	for _, sh := range []string{"sh", "bash", "dash"} {
		if p, err := exec.LookPath(sh); err == nil {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Skip("no POSIX shell")
	}
	return out
}

// FuzzQuote proves the SSH transport's contract: the command line built by
// Join, read by a login shell, reaches the program as exactly the argument
// vector we meant, whatever the bytes. It runs the same two-level shape as
// the file helpers: `sh -c 'printf %s "$1"' sh ARG` inside a shell.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{
		"", "plain", "a b", "it's", "'", "''", `"`, `\`, `\'`, "$HOME", "${IFS}", "$(id)", "`id`",
		"; rm -rf /", "a\nb", "\t", " lead", "trail ", "*", "?", "[a]", "~", "~root", "-n", "--",
		"%s", "x=y", "héllo", "\xff\xfe", "!", "!!", "#comment", "a&b|c>d<e", "{a,b}", "\r\n",
	} {
		f.Add(s)
	}
	sh := shells(f)
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsRune(s, 0) {
			t.Skip("NUL cannot travel in an argv")
		}
		q := Quote(s)
		if q == s {
			for _, r := range s {
				if !isSafe(r) {
					t.Fatalf("Quote(%q) left unsafe %q bare", s, r)
				}
			}
		}
		line := Join([]string{"sh", "-c", `printf %s "$1"`, "sh", s})
		for _, shell := range sh {
			out, err := exec.Command(shell, "-c", line).Output()
			if err != nil {
				t.Fatalf("%s -c %s: %v", shell, line, err)
			}
			if string(out) != s {
				t.Fatalf("%s round trip of %q via %s gave %q", shell, s, line, out)
			}
		}
		// One level too: the word itself as printf's argument.
		out, err := exec.Command(sh[0], "-c", "printf %s "+q).Output()
		if err != nil || string(out) != s {
			t.Fatalf("printf %%s %s = %q, %v; want %q", q, out, err, s)
		}
	})
}
