package facts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
)

func TestCheckPreRun(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"sh", "-c", "x", "sh", PMPid, PMOwner}, ""},
		{[]string{"/usr/bin/cat", "--", PMPid}, ""},
		{[]string{"sh", "-c", "x", "sh", pmBin + "/psql"}, "a module's run may use only"},
		{[]string{"sh", "-c", "x", "sh", pmPort}, "a module's run may use only"},
		{[]string{"sh", "-c", "x", "sh", pmSocket}, "a module's run may use only"},
		{[]string{"sh", "-c", "x", "sh", PMConfig}, "a module's run may use only"},
		{[]string{"/bin/cat", "/proc/{pg.pid}/status"}, "inside argument"},
		{[]string{"/x", "{pg.nope}"}, "may use only"},
		{[]string{PMPid}, "not an absolute path"},
		{[]string{"rec", "x"}, "not an absolute path"},
		{nil, "an empty command"},
	} {
		err := checkPreRun(tc.args)
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("checkPreRun(%q) = %v; want %q", tc.args, err, tc.err)
		}
	}
	if err := CheckSets([]Set{{Name: "m", PostmasterRuns: [][]string{{"sh", "{pg.port}"}}}}); err == nil || !strings.Contains(err.Error(), "fact set m: postmaster run") {
		t.Errorf("CheckSets: %v; want the run refused", err)
	}
	// Runs as the owner may use every placeholder, inside arguments too.
	for _, tc := range []struct {
		run OwnerRun
		err string
	}{
		{OwnerRun{Script: "x", Args: []string{"f:" + PMConfig, PMData + "/postmaster.opts", "p:" + PMConfigDir, pmBin + "/psql", pmSocket, pmPort, PMPid, PMOwner}}, ""},
		{OwnerRun{Script: "x"}, ""},
		{OwnerRun{Args: []string{"a"}}, "an empty script"},
		{OwnerRun{Script: "x", Args: []string{"f:{pg.nope}"}}, "placeholder {pg.nope}"},
	} {
		err := CheckSets([]Set{{Name: "m", OwnerRuns: []OwnerRun{tc.run}}})
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), "fact set m: owner run: "+tc.err)) {
			t.Errorf("CheckSets(owner run %q) = %v; want %q", tc.run, err, tc.err)
		}
	}
}

// A run as the owner gets the discovery's values as data, inside its
// arguments too, whatever they hold (the owner's text: quotes, $(...),
// blanks), and is left out when a value it names is unknown.
func TestPreRunsComposeOwnerValues(t *testing.T) {
	dir := t.TempDir()
	touched := filepath.Join(dir, "touched")
	show := `printf '%s|' "$@"`
	runs := [][]string{
		{"sh", "-c", show, "sh", "f:" + PMConfig, "d:" + PMConfigDir + "/conf.d", PMData + "/auto", "p:/etc/postgresql", "a'b{pg.x}"},
		{"sh", "-c", show, "sh", "p:" + PMData},
	}
	// A line break and text shaped like a frame (another nonce's) too.
	fake := discoveryNonce()
	data := "/d $(touch " + touched + ") `touch " + touched + "`\n" + fake + " status 0 0\n" + fake + " args 1"
	vars := "lp_pid=42 lp_owner=pg lp_conf=\"/etc/pg 'x'/main/postgresql.conf\" lp_data=" + shellQuote(data)
	ran, _ := runAhead(t, runs, vars, "post 0 1")
	want := []string{"f:/etc/pg 'x'/main/postgresql.conf", "d:/etc/pg 'x'/main/conf.d", data + "/auto", "p:/etc/postgresql", "a'b{pg.x}"}
	res, ok := ran.Take(transport.Command{Args: append([]string{"sh", "-c", show, "sh"}, want...), Become: true})
	if !ok || string(res.Stdout) != strings.Join(want, "|")+"|" {
		t.Errorf("run 0: %q, %v; want %q", res.Stdout, ok, want)
	}
	if _, err := os.Stat(touched); err == nil {
		t.Error("a value was run as code")
	}
	// Without the configuration file, run 0 is left out; without the
	// data directory, run 1.
	ran, _ = runAhead(t, runs, "lp_pid=42 lp_owner=pg lp_conf= lp_data=/d", "post 0 1")
	if res, ok := ran.Take(transport.Command{Args: []string{"sh", "-c", show, "sh", "p:/d"}, Become: true}); !ok || string(res.Stdout) != "p:/d|" || ran.Len() != 0 {
		t.Errorf("no configuration file: run 1 %q, %v, %d answers left; want run 1's alone", res.Stdout, ok, ran.Len())
	}
	ran, _ = runAhead(t, runs, "lp_pid=42 lp_owner=pg lp_conf=/c/p.conf lp_data=", "post 0 1")
	if _, ok := ran.Take(transport.Command{Args: []string{"sh", "-c", show, "sh", "f:/c/p.conf", "d:/c/conf.d", "/auto", "p:/etc/postgresql", "a'b{pg.x}"}, Become: true}); ok || ran.Len() != 0 {
		t.Errorf("no data directory: %d answers; want none", ran.Len())
	}
}

// runAhead runs preRunScript for runs in a real sh with the discovery's
// variables set as for a postmaster, inside a discovery frame, and parses
// the output as GatherHost does.
func runAhead(t *testing.T, runs [][]string, vars, pq string) (*Ran, []block) {
	t.Helper()
	nonce := discoveryNonce()
	script := "dn=" + nonce + " pq=" + shellQuote(pq) + "\n" + vars + "\n" +
		"gpost=" + shellQuote(preRunScript(runs)) + "\n" +
		`printf 'D %s\n' "$dn"; printf '[override]\0data=/d\0'; ( eval "$gpost"; exit 0 ) </dev/null; printf '\n%s %s\n' "$dn" "$?"`
	out, err := exec.Command("sh", "-c", script).Output()
	if err != nil {
		t.Fatal(err)
	}
	blocks, ran, answered, err := discoveryAnswer(out, nonce, true)
	if err != nil || !answered {
		t.Fatalf("discoveryAnswer: %v (answered %v)\n%q", err, answered, out)
	}
	return ran, blocks
}

// The gather runs the asked runs with the postmaster's values in place,
// keeps a run's output under the exact command it ran, whatever that
// output holds (line breaks, NULs, frames with a wrong nonce), and keeps
// nothing of a run that failed, was not asked, or needs a configuration
// file the script could not tell.
func TestPreRunsRunAndKept(t *testing.T) {
	fake := discoveryNonce()
	runs := [][]string{
		{"sh", "-c", `printf '%s|' "$@"; printf 'two\n'`, "sh", PMPid, PMOwner, pmBin + "/psql", pmSocket, pmPort},
		{"sh", "-c", "echo failed; exit 3"},
		{"sh", "-c", `echo "$1"`, "sh", PMConfig},
		{"sh", "-c", "echo not asked"},
		{"sh", "-c", `printf 'a\0b\n%s status 4 0\n%s 0\nno newline' "$1" "$1"`, "sh", fake},
		// A program the shell also has as a function runs as the program.
		{"pr", "x"},
	}
	vars := `lp_pid=42 lp_owner=pg lp_bin='/usr/lib/a b' lp_sock=/run/pg lp_port=5432 lp_conf=`
	ran, blocks := runAhead(t, runs, vars, "post 0 1 2 4 5")
	if len(blocks) != 1 || blocks[0].get("data") != "/d" {
		t.Errorf("blocks %+v; want the discovery's records untouched", blocks)
	}
	if ran.Len() != 2 {
		t.Errorf("%d answers kept; want 2 (runs 0 and 4)", ran.Len())
	}
	want := map[int]string{
		0: "42|pg|/usr/lib/a b/psql|/run/pg|5432|two\n",
		4: "a\x00b\n" + fake + " status 4 0\n" + fake + " 0\nno newline",
	}
	concrete := map[int][]string{
		0: {"sh", "-c", runs[0][2], "sh", "42", "pg", "/usr/lib/a b/psql", "/run/pg", "5432"},
		4: runs[4],
	}
	for i, args := range concrete {
		if _, ok := ran.Take(transport.Command{Args: args, Become: false}); ok {
			t.Errorf("run %d: taken without become; the gather ran it with", i)
		}
		if _, ok := ran.Take(transport.Command{Args: args, Become: true, Stdin: []byte("x")}); ok {
			t.Errorf("run %d: taken by a command with stdin", i)
		}
		res, ok := ran.Take(transport.Command{Args: args, Become: true})
		if !ok || string(res.Stdout) != want[i] {
			t.Errorf("run %d: %q, %v; want %q", i, res.Stdout, ok, want[i])
		}
		if _, ok := ran.Take(transport.Command{Args: args, Become: true}); ok {
			t.Errorf("run %d: taken twice", i)
		}
	}
	// With the configuration file known, run 2 runs too.
	ran, _ = runAhead(t, runs, vars+" lp_conf=/etc/pg.conf", "post 2")
	if res, ok := ran.Take(transport.Command{Args: []string{"sh", "-c", runs[2][2], "sh", "/etc/pg.conf"}, Become: true}); !ok || string(res.Stdout) != "/etc/pg.conf\n" {
		t.Errorf("run 2: %q, %v", res.Stdout, ok)
	}
}

// A process left behind by a run writes without the nonce: whatever it
// adds to the frames drops every answer run ahead (each command then
// runs where it is asked), and never the discovery's records.
func TestPreRunsMalformedDropped(t *testing.T) {
	nonce := discoveryNonce()
	sep := "\n" + nonce + " "
	good := sep + "args 0\nsh\x00-c\x00true\x00" + sep + "out 0\nhello\n" + sep + "status 0 0\n"
	for name, frames := range map[string]string{
		"well formed":           good,
		"garbage after status":  sep + "args 0\nx\x00" + sep + "out 0\n" + sep + "status 0 0\ngarbage",
		"out of order":          sep + "out 0\nx" + sep + "args 0\nx\x00" + sep + "status 0 0\n",
		"index mismatch":        sep + "args 0\nx\x00" + sep + "out 1\nx" + sep + "status 0 0\n",
		"no status":             sep + "args 0\nx\x00" + sep + "out 0\nx",
		"status not a number":   sep + "args 0\nx\x00" + sep + "out 0\nx" + sep + "status 0 zero\n",
		"args without a NUL":    sep + "args 0\nx" + sep + "out 0\nx" + sep + "status 0 0\n",
		"a frame of an unknown": good + sep + "extra\n",
	} {
		out := []byte("M MemTotal: 1 kB\nD " + nonce + "\n[override]\x00data=/d\x00" + frames + sep + "0\n")
		blocks, ran, answered, err := discoveryAnswer(out, nonce, true)
		if err != nil || !answered || len(blocks) != 1 || blocks[0].get("data") != "/d" {
			t.Errorf("%s: %v, %+v; want the discovery's records", name, err, blocks)
			continue
		}
		if wantKept := name == "well formed"; (ran.Len() == 1) != wantKept {
			t.Errorf("%s: %d answers kept; want kept %v", name, ran.Len(), wantKept)
		}
	}
	// The discovery's last line still decides: a failed discovery is
	// refused. Output after that line (a process a run left behind, as no
	// nonce is in it) drops the answers run ahead, not the records.
	out := []byte("D " + nonce + "\n[override]\x00data=/d\x00" + good + sep + "1\n")
	if _, _, _, err := discoveryAnswer(out, nonce, true); err == nil || !strings.Contains(err.Error(), "failed") {
		t.Errorf("failed discovery: %v", err)
	}
	out = []byte("D " + nonce + "\n[override]\x00data=/d\x00" + good + sep + "0\nW 1\n")
	blocks, ran, _, err := discoveryAnswer(out, nonce, true)
	if err != nil || len(blocks) != 1 || ran.Len() != 0 {
		t.Errorf("output after the last line: %v, %d blocks, %d answers; want the records, no answers", err, len(blocks), ran.Len())
	}
}

// Ran.Transport answers what was run ahead, once, and passes the rest on.
func TestRanTransport(t *testing.T) {
	r := &Ran{}
	r.Keep([]string{"a"}, true, transport.Result{Stdout: []byte("kept")})
	c := &countingTransport{}
	tr := r.Transport(c)
	for i, want := range []string{"kept", "ran"} {
		res, err := tr.Run(context.Background(), transport.Command{Args: []string{"a"}, Become: true})
		if err != nil || string(res.Stdout) != want {
			t.Errorf("run %d: %q, %v; want %q", i, res.Stdout, err, want)
		}
	}
	if c.runs != 1 {
		t.Errorf("%d runs reached the host; want 1", c.runs)
	}
	var none *Ran
	if none.Transport(c) != transport.Transport(c) || none.Len() != 0 {
		t.Error("a nil Ran should pass everything on")
	}
}

type countingTransport struct{ runs int }

func (c *countingTransport) Run(_ context.Context, cmd transport.Command) (transport.Result, error) {
	c.runs++
	return transport.Result{Stdout: []byte("ran")}, nil
}

func (c *countingTransport) Close() error { return nil }

// The gather script is the same whichever modules a play runs: the runs
// asked are on stdin.
func TestPreRunRequest(t *testing.T) {
	sets := []Set{
		{Name: "a", PostmasterRuns: [][]string{{"x"}, {"y"}}, OwnerRuns: []OwnerRun{{Script: "w", Args: []string{"f:" + PMConfig}}}},
		{Name: "b", PostmasterRuns: [][]string{{"z"}}, OwnerRuns: []OwnerRun{{Script: "v", Args: []string{PMData}}}},
	}
	// Runs as root first (0-2), then as the owner (3 a's, 4 b's), the
	// topology query last (5).
	runs, owners := preRunsOf(sets)
	if len(runs) != 6 || owners[3] != "a" || owners[4] != "b" || owners[5] != "" ||
		!slices.Equal(runs[3], OwnerRunArgs(PMOwner, "w", "f:"+PMConfig)) {
		t.Fatalf("preRunsOf: %q, %q", runs, owners)
	}
	for _, tc := range []struct {
		ask   []string
		owner bool
		want  string
	}{
		{nil, true, "post 5"}, {[]string{"a"}, true, "post 0 1 3 5"}, {[]string{"b", "c"}, true, "post 2 4 5"},
		// Without owner, no run as the owner: not the topology's, not
		// one that names the data directory alone.
		{[]string{"b"}, false, "post 2"}, {[]string{"a", "b"}, false, "post 0 1 2"}, {nil, false, "post"},
	} {
		if got := preRunRequest(sets, tc.ask, tc.owner); got != tc.want {
			t.Errorf("preRunRequest(%v, %v) = %q; want %q", tc.ask, tc.owner, got, tc.want)
		}
	}
	if !bytes.Contains([]byte(GatherScript(sets)), []byte(shellQuote("z"))) {
		t.Error("the gather script lacks a run")
	}
}

// askingHost answers the gather from a recorded output, failing it with
// fail while its request asks for the topology query run ahead.
type askingHost struct {
	gather []byte
	fail   error
	asked  []string // each gather's request line of runs
}

func (h *askingHost) Run(_ context.Context, cmd transport.Command) (transport.Result, error) {
	lines := strings.Split(string(cmd.Stdin), "\n")
	if len(lines) < 5 || lines[0] != "discover" {
		return transport.Result{}, nil // the discovery on its own: no cluster
	}
	h.asked = append(h.asked, lines[4])
	if lines[4] != "post" {
		return transport.Result{}, h.fail
	}
	return transport.Result{Stdout: h.gather}, nil
}

func (h *askingHost) Close() error { return nil }

// The topology query is the owner's code inside the gather: when the
// gather's output runs past the cap or its session is held open, the
// gather runs again without it, and the host's facts stand.
func TestGatherHostWithoutTheOwnersRunOnTrouble(t *testing.T) {
	gather, err := os.ReadFile("testdata/gather-debian-vm.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, fail := range []error{
		fmt.Errorf("run: %w", transport.ErrOutputTooLarge),
		fmt.Errorf("held: %w", transport.ErrNoResponse),
	} {
		h := &askingHost{gather: gather, fail: fail}
		f, err := GatherHost(context.Background(), h, Options{})
		if err != nil || f.MemTotal <= 0 {
			t.Errorf("%v: %v; want the facts from the second gather", fail, err)
		}
		if strings.Join(h.asked, "|") != "post 0|post" {
			t.Errorf("%v: requests %q; want the topology's run, then none", fail, h.asked)
		}
	}
	// Any other failure is the gather's own: not run again.
	h := &askingHost{gather: gather, fail: errors.New("connection lost")}
	if _, err := GatherHost(context.Background(), h, Options{}); err == nil || len(h.asked) != 1 {
		t.Errorf("other failure: %v after %d gathers; want it reported after one", err, len(h.asked))
	}
}
