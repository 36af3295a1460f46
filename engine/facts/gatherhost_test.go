package facts

import (
	"context"
	"encoding/json"
	"os"
	"os/user"
	"strconv"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// GatherHost reads the facts and looks for the cluster in one round trip;
// a cluster it cannot find is the facts' PostgresError, not a failed
// gather. Gather runs the same script without asking for discovery.
func TestGatherHostLocal(t *testing.T) {
	testhost.Steady(t) // machine-wide facts: held still where they could change
	ctx := context.Background()
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"pg_data missing", Options{PGData: "/nonexistent/pgtune-test"}, "pg_data /nonexistent/pgtune-test: no such directory"},
		{"pg_data not absolute", Options{PGData: "relative/dir"}, `pg_data "relative/dir": must be an absolute path`},
		{"pg_bin with a line break", Options{PGData: "/d", PGBin: "/a\nb"}, "contains a line break or NUL"},
	}
	f, err := Gather(ctx, transport.NewLocal(), Options{PGData: "/nonexistent/pgtune-test"})
	if err != nil || f.Postgres != nil || f.PostgresError != "" {
		t.Errorf("Gather: %v, postgres %+v %q; want facts without discovery", err, f.Postgres, f.PostgresError)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := GatherHost(ctx, transport.NewLocal(), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if f.MemTotal <= 0 {
				t.Errorf("MemTotal %d: the gather's facts are missing", f.MemTotal)
			}
			if f.Postgres != nil || !strings.Contains(f.PostgresError, tc.wantErr) {
				t.Errorf("postgres %+v, error %q; want none and %q", f.Postgres, f.PostgresError, tc.wantErr)
			}
		})
	}
}

// The discovery's answer is framed by the run's nonce: host text that
// carries a frame of its own (a guessed nonce, another run's, a forged
// record), before the answer or inside it, cannot end it early, start it
// again or add records.
func TestDiscoveryAnswerHostileDelimiter(t *testing.T) {
	nonce := discoveryNonce()
	if len(nonce) != len("pgtune-")+32 || nonce == discoveryNonce() {
		t.Fatalf("nonce %q: want 128 random bits, new each run", nonce)
	}
	fake := discoveryNonce() // the attacker's best guess: a well-formed other nonce
	forged := "\nD " + fake + "\n[override]\x00realdata=/forged\x00\n" + fake + " 0\n"
	// A host string holds no NUL: an argument carries the frame without.
	forgedArg := strings.ReplaceAll(forged, "\x00", " ")
	real := "[override]\x00realdata=/real\x00[postmaster]\x00pid=7\x00arg=/bin/postgres\x00arg=" + forgedArg + "\x00"
	out := "M MemTotal: 1 kB\nH x" + forged + "L line" + forged +
		"D " + nonce + "\n" + real + "\n" + nonce + " 0\n"
	blocks, _, answered, err := discoveryAnswer([]byte(out), nonce, true)
	if err != nil || !answered {
		t.Fatal(err, answered)
	}
	if len(blocks) != 2 || blocks[0].get("realdata") != "/real" || blocks[1].kind != "postmaster" {
		t.Fatalf("blocks %+v; want the real answer's two", blocks)
	}
	if a := blocks[1].args; len(a) != 2 || a[1] != forgedArg {
		t.Errorf("args %q; want the forged frame as one argument's text", a)
	}
	for _, tc := range []struct{ name, out string }{
		{"cut short", "M x\nD " + nonce + "\n" + real},
		{"failed", "M x\nD " + nonce + "\n" + real + "\n" + nonce + " 2\n"},
		{"started twice", "M x\nD " + nonce + "\nD " + nonce + "\n" + real + "\n" + nonce + " 0\n"},
		{"output after it", "M x\nD " + nonce + "\n" + real + "\n" + nonce + " 0\nW 1\n"},
	} {
		if _, _, answered, err := discoveryAnswer([]byte(tc.out), nonce, true); err == nil || !answered {
			t.Errorf("%s: %v (answered %v); want an error", tc.name, err, answered)
		}
	}
	if b, _, answered, err := discoveryAnswer([]byte("M MemTotal: 1 kB\nD "+fake+"\n"), nonce, true); err != nil || b != nil || answered {
		t.Errorf("no D line of this run: %v, %v, %v; want not answered (GatherHost then asks on its own)", b, answered, err)
	}
}

// The gather reads hostname and osrelease with the shell's read, which
// reads a byte at a time: string files of /proc/sys answer reads at an
// offset (the integer ones do not, see gatherScript), so the whole value
// arrives. The user is read from /etc/passwd, as id -un would say.
func TestGatherReadsKernelStrings(t *testing.T) {
	f, err := Gather(context.Background(), transport.NewLocal(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ file, got string }{
		{"/proc/sys/kernel/hostname", f.Hostname},
		{"/proc/sys/kernel/osrelease", f.Kernel},
	} {
		want, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if w := strings.TrimSpace(string(want)); c.got != w || len(w) < 2 {
			t.Errorf("%s: gathered %q, want %q", c.file, c.got, w)
		}
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	if want := os.Getenv("SUDO_USER"); want != "" && f.User != want || want == "" && f.User != u.Username {
		t.Errorf("user %q; want %q (SUDO_USER %q)", f.User, u.Username, want)
	}
}

// On a real cluster, GatherHost runs the topology query and the modules'
// postmaster runs in its own round trip: GatherTopology then asks the
// host nothing and finds what it finds on its own, and a module's run
// takes the gather's answer. A module not in the play has nothing run
// ahead; with a pg_config_file (which the script cannot check) the
// topology query is not.
// takeRanAhead checks what a gather ran ahead for its postmaster: the
// probe's answer (it prints its pid and owner arguments and the pid's
// comm) and the topology's, which GatherTopology takes without a run on
// the host.
func takeRanAhead(t *testing.T, f *Facts, probe []string) *Topology {
	t.Helper()
	pg := f.Postgres
	if f.Ran.Len() != 2 {
		t.Fatalf("%d answers run ahead; want the probe's and the topology's", f.Ran.Len())
	}
	pid := strconv.Itoa(pg.PID)
	res, ok := f.Ran.Take(transport.Command{Args: []string{"sh", "-c", probe[2], "sh", pid, pg.Owner}})
	if want := "pid=" + pid + " owner=" + pg.Owner + "\npostgres\n"; !ok || string(res.Stdout) != want {
		t.Errorf("probe: %q, %v; want %q", res.Stdout, ok, want)
	}
	counted := &countingTransport{}
	topo, err := GatherTopology(context.Background(), f.Ran.Transport(counted), false, pg)
	if err != nil {
		t.Fatal(err)
	}
	if f.Ran.Len() != 0 || counted.runs != 0 {
		t.Errorf("the topology's answer was not taken (%d left, %d runs reached the host)", f.Ran.Len(), counted.runs)
	}
	return topo
}

func TestGatherHostRunsAheadLive(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: a real cluster")
	}
	ctx := context.Background()
	c := testhost.Postgres(t)
	probe := []string{"sh", "-c", `echo "pid=$1 owner=$2"; cat "/proc/$1/comm"`, "sh", PMPid, PMOwner}
	sets := []Set{{Name: "probe", PostmasterRuns: [][]string{probe}}}
	local := transport.NewLocal()
	f, err := GatherHost(ctx, local, Options{PGData: c.DataDir, Sets: sets, RunAhead: []string{"probe"}})
	if err != nil || f.Postgres == nil || !f.Postgres.Running {
		t.Fatalf("GatherHost: %v, %+v, %s", err, f.Postgres, f.PostgresError)
	}
	pg := f.Postgres
	pid := strconv.Itoa(pg.PID)
	ahead := takeRanAhead(t, f, probe)
	asked, err := GatherTopology(ctx, local, false, pg)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(ahead)
	b, _ := json.Marshal(asked)
	if string(a) != string(b) || ahead.Role != "primary" || ahead.Settings["block_size"] == "" {
		t.Errorf("topology run ahead\n %s\nasked on its own\n %s", a, b)
	}

	for name, opts := range map[string]Options{
		"module not in the play": {PGData: c.DataDir, Sets: sets},
		"pg_config_file":         {PGData: c.DataDir, PGConfigFile: c.ConfigFile(), Sets: sets, RunAhead: []string{"probe"}},
	} {
		f, err := GatherHost(ctx, local, opts)
		if err != nil || f.Postgres == nil {
			t.Fatalf("%s: %v, %s", name, err, f.PostgresError)
		}
		// With pg_config_file the script cannot check the configuration
		// file: the topology query is not run ahead, the module's run is.
		withConf := name == "pg_config_file"
		_, probed := f.Ran.Take(transport.Command{Args: []string{"sh", "-c", probe[2], "sh", pid, pg.Owner}})
		if probed != withConf || (f.Ran.Len() == 1) == withConf {
			t.Errorf("%s: probe run ahead %v, %d answers left", name, probed, f.Ran.Len())
		}
	}
	// A run that leaves a process behind writing after the gather's last
	// line: the cluster is still found, no answer is kept. (The run is the
	// last one: pg_config_file leaves the topology query out.)
	leaver := []Set{{Name: "leaver", PostmasterRuns: [][]string{{"sh", "-c", `( sleep 0.5; printf 'late\n' ) & echo early`}}}}
	f, err = GatherHost(ctx, local, Options{PGData: c.DataDir, PGConfigFile: c.ConfigFile(), Sets: leaver, RunAhead: []string{"leaver"}})
	if err != nil || f.Postgres == nil || f.PostgresError != "" || f.Ran.Len() != 0 {
		t.Errorf("a run's leftover process: %v, %+v, %q, %d answers; want the cluster and no answers", err, f.Postgres, f.PostgresError, f.Ran.Len())
	}

	c.Stop(t)
	if f, err := GatherHost(ctx, local, Options{PGData: c.DataDir, Sets: sets, RunAhead: []string{"probe"}}); err != nil || f.Ran.Len() != 0 {
		t.Errorf("stopped cluster: %v, %d answers run ahead; want none", err, f.Ran.Len())
	}
}

// TestGatherHostDiscoversInItsShell: the discovery runs in the gather's
// own shell, not a subshell of it (a process more on every host): a
// command run ahead is a child of the process transport started.
func TestGatherHostDiscoversInItsShell(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: a real cluster")
	}
	c := testhost.Postgres(t)
	// The probe's parent runs it ahead; it prints that parent's parent.
	probe := []string{"sh", "-c", `read -r st < "/proc/$PPID/stat"; st=${st##*) }; set -- $st; echo "$2"`}
	sets := []Set{{Name: "probe", PostmasterRuns: [][]string{probe}}}
	f, err := GatherHost(context.Background(), transport.NewLocal(), Options{PGData: c.DataDir, Sets: sets, RunAhead: []string{"probe"}})
	if err != nil || f.Postgres == nil || !f.Postgres.Running {
		t.Fatalf("GatherHost: %v, %+v, %s", err, f.Postgres, f.PostgresError)
	}
	res, ok := f.Ran.Take(transport.Command{Args: probe})
	if !ok {
		t.Fatal("the probe was not run ahead")
	}
	if got, want := strings.TrimSpace(string(res.Stdout)), strconv.Itoa(os.Getpid()); got != want {
		t.Errorf("the gather's discovery ran in a process whose parent is %s; want this test's (%s): the gather's own shell", got, want)
	}
}
