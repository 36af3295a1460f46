package facts

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// nsTransport is the local transport inside a PID namespace.
type nsTransport struct {
	ns    *testhost.PIDNamespace
	local transport.Transport
}

func (n nsTransport) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	cmd.Args = n.ns.Args(cmd.Args...)
	return n.local.Run(ctx, cmd)
}

func (n nsTransport) Close() error { return n.local.Close() }

// With no pg_data, a postmaster running alone on the host is found in
// /proc, and the commands run ahead run for it: a module's read and the
// topology query, whose configuration file the script guesses from -D
// (pg_ctl's plain start) exactly as the controller then names it. A
// second postmaster makes the choice the operator's: nothing runs ahead.
func TestGatherHostRunsAheadForALonePostmaster(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: real clusters in a PID namespace (root)")
	}
	ctx := context.Background()
	ns := testhost.NewPIDNamespace(t)
	c := testhost.Postgres(t, testhost.Stopped())
	c.StartIn(t, ns)
	host := nsTransport{ns: ns, local: transport.NewLocal()}

	probe := []string{"sh", "-c", `echo "pid=$1 owner=$2"; cat "/proc/$1/comm"`, "sh", PMPid, PMOwner}
	sets := []Set{{Name: "probe", PostmasterRuns: [][]string{probe}}}
	f, err := GatherHost(ctx, host, Options{Sets: sets, RunAhead: []string{"probe"}})
	if err != nil || f.Postgres == nil {
		t.Fatalf("GatherHost: %v, %+v, %q", err, f, f.PostgresError)
	}
	pg := f.Postgres
	if !pg.Running || pg.DataDir != c.DataDir || pg.PID != c.PID(t) {
		t.Fatalf("found %+v; want the namespace's postmaster of %s (pid %d there)", pg, c.DataDir, c.PID(t))
	}
	if pg.ConfigFile != c.ConfigFile() {
		t.Errorf("configuration %q; want %q", pg.ConfigFile, c.ConfigFile())
	}
	topo := takeRanAhead(t, f, probe)
	if topo.Role != "primary" || topo.Settings["block_size"] == "" {
		t.Errorf("topology run ahead: %+v", topo)
	}

	// A second postmaster: two candidates, the operator picks (pg_data).
	other := testhost.Postgres(t, testhost.Stopped())
	other.StartIn(t, ns)
	f, err = GatherHost(ctx, host, Options{Sets: sets, RunAhead: []string{"probe"}})
	if err != nil {
		t.Fatal(err)
	}
	if f.Postgres != nil || !strings.Contains(f.PostgresError, c.DataDir) || !strings.Contains(f.PostgresError, other.DataDir) || f.Ran.Len() != 0 {
		t.Errorf("two postmasters: found %+v (%q), %d answers run ahead; want both named, none chosen, nothing run ahead",
			f.Postgres, f.PostgresError, f.Ran.Len())
	}
}

// A lone postmaster whose command line reads like Debian's configuration
// to the shell (which sees it without the NULs between arguments) but is
// not: the controller asks again with pg_lsclusters ($5 "lsc"), and the
// script must list the clusters this time. (It did not, when its process
// loop had overwritten the positional parameters before reading $5.)
func TestDiscoveryListsClustersWhenAskedAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: a real cluster in a PID namespace (root)")
	}
	if _, err := exec.LookPath("pg_lsclusters"); err != nil {
		t.Fatalf("pg_lsclusters (postgresql-common) is not installed: %v", err)
	}
	ctx := context.Background()
	ns := testhost.NewPIDNamespace(t)
	c := testhost.Postgres(t, testhost.Stopped())
	c.StartIn(t, ns, "-c cluster_name=config_file=/etc/postgresql/15/pgtune-none/postgresql.conf")
	host := &seenRuns{Transport: nsTransport{ns: ns, local: transport.NewLocal()}}

	f, err := GatherHost(ctx, host, Options{})
	if err != nil || f.Postgres == nil {
		t.Fatalf("GatherHost: %v, %+v, %q", err, f, f.PostgresError)
	}
	if f.Postgres.DataDir != c.DataDir || f.Postgres.ConfigFile != c.ConfigFile() {
		t.Errorf("found %s (configuration %s); want %s (%s)", f.Postgres.DataDir, f.Postgres.ConfigFile, c.DataDir, c.ConfigFile())
	}
	asked := 0
	for _, args := range host.args {
		if args[len(args)-1] == "lsc" {
			asked++
		}
	}
	if asked != 1 {
		t.Errorf("discovery ran %d times with pg_lsclusters asked for; want once (the hint was wrong)", asked)
	}
}
