package transport

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDecideTrustsOnlyAWholeChain runs decide against stat answers given
// by a stand-in stat, as root would see them: any directory stat did not
// answer for (gone for a moment while its owner renames it) must not drop
// out of the chain, so a deeper name that stats as root's (a link to /)
// cannot make root act. Only names past the deepest existing one (mkdir
// -p makes them) may be missing.
func TestDecideTrustsOnlyAWholeChain(t *testing.T) {
	root := func(name string) string { return "0 755 41ed " + name }
	cases := []struct {
		name    string
		chain   []string
		stat    []string
		as      string
		want    string // the user printed; "" is root acting itself
		wantErr string
	}{
		{name: "root's alone", chain: []string{"/", "/etc", "/etc/sysctl.d"},
			stat: []string{root("/"), root("/etc"), root("/etc/sysctl.d")}},
		{name: "trailing names missing: root makes them", chain: []string{"/", "/etc", "/etc/new", "/etc/new/d"},
			stat: []string{root("/"), root("/etc")}},
		{name: "a middle name missing", chain: []string{"/", "/home", "/home/u", "/home/u/x"},
			stat: []string{root("/"), root("/home"), root("/home/u/x")}, wantErr: "refusing to act as root"},
		{name: "a middle name missing, the cluster owner named", chain: []string{"/", "/home", "/home/u", "/home/u/x"},
			stat: []string{root("/"), root("/home"), root("/home/u/x")}, as: "postgres", want: "postgres"},
		{name: "the owner's dir missing, its owner not taken from a later line", chain: []string{"/", "/srv", "/srv/pg"},
			stat: []string{root("/"), "1000 700 41c0 /srv/pg"}, wantErr: "refusing to act as root"},
		{name: "an answer for another name", chain: []string{"/", "/etc"},
			stat: []string{root("/"), root("/tmp")}, wantErr: "refusing to act as root"},
		{name: "more answers than names", chain: []string{"/", "/etc"},
			stat: []string{root("/"), root("/etc"), root("/etc")}, wantErr: "refusing to act as root"},
		{name: "not numbers", chain: []string{"/", "/etc"},
			stat: []string{root("/"), "0 7x5 41ed /etc"}, wantErr: "refusing to act as root"},
		{name: "a link in the chain", chain: []string{"/", "/etc", "/etc/d"},
			stat: []string{root("/"), "0 777 a1ff /etc", root("/etc/d")}, wantErr: "/etc is a symbolic link"},
		{name: "nothing answered", chain: []string{"/", "/etc"}, wantErr: "cannot inspect"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// my_uid and stat are replaced: root's view, whoever runs the test.
			script := actorFn + `my_uid() { d_me=0; }
stat() { printf '%s' "$FAKE"; }
dir=$DIR as=$AS
decide "$@"`
			cmd := exec.Command("sh", append([]string{"-c", script, "sh"}, c.chain...)...)
			fake := strings.Join(c.stat, "\n")
			if fake != "" {
				fake += "\n"
			}
			cmd.Env = []string{"PATH=/usr/bin:/bin", "FAKE=" + fake, "DIR=" + c.chain[len(c.chain)-1], "AS=" + c.as}
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if c.wantErr != "" {
				if err == nil || !strings.Contains(stderr.String(), c.wantErr) {
					t.Fatalf("decide printed %q, %v, stderr %q; want a refusal with %q", out, err, stderr.String(), c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("decide: %v, stderr %q", err, stderr.String())
			}
			if got := strings.TrimSuffix(string(out), "\n"); got != c.want {
				t.Errorf("decide chose %q, want %q", got, c.want)
			}
		})
	}
}
