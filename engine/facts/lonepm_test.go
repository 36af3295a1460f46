package facts

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// pidNamespace is a PID namespace with its own /proc: a host on which the
// only processes are the ones a test starts there. Discovery without
// pg_data reads every process of /proc, and a machine running other
// tests' clusters never has one postmaster alone.
type pidNamespace struct {
	holder *exec.Cmd // unshare, whose child (sleep) is the namespace's init
	init   int       // that child's PID, as this machine sees it
}

func newPIDNamespace(t *testing.T) *pidNamespace {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a PID namespace needs root")
	}
	// --kill-child: when unshare ends, its child (the namespace's init)
	// is killed, and with it every process of the namespace. Pdeathsig
	// ends unshare when this test's process dies without its clean-up
	// (a panic, a timeout); it follows the starting thread, hence the lock.
	holder := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "sleep", "infinity")
	holder.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread()
	err := holder.Start()
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatalf("unshare: %v", err)
	}
	ns := &pidNamespace{holder: holder}
	t.Cleanup(func() {
		_ = holder.Process.Kill()
		_ = holder.Wait()
	})
	children := fmt.Sprintf("/proc/%d/task/%d/children", holder.Process.Pid, holder.Process.Pid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(children)
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns.init, _ = strconv.Atoi(f[0])
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("unshare started no namespace (%s empty)", children)
		}
	}
	// The namespace is ready once its own /proc is mounted there: its
	// pid 1 is the sleep.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		out, err := ns.command("cat", "/proc/1/comm").Output()
		if err == nil && strings.TrimSpace(string(out)) == "sleep" {
			return ns
		}
		if time.Now().After(deadline) {
			t.Fatalf("no PID namespace behind pid %d: %v %q", ns.init, err, out)
		}
	}
}

// command runs args inside the namespace (its PIDs and its /proc).
func (ns *pidNamespace) command(args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"-t", strconv.Itoa(ns.init), "-p", "-m", "--"}, args...)...)
}

// nsTransport is the local transport inside the namespace.
type nsTransport struct {
	ns    *pidNamespace
	local transport.Transport
}

func (n nsTransport) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	cmd.Args = append([]string{"nsenter", "-t", strconv.Itoa(n.ns.init), "-p", "-m", "--"}, cmd.Args...)
	return n.local.Run(ctx, cmd)
}

func (n nsTransport) Close() error { return n.local.Close() }

// startIn starts c's server inside ns (unix socket only). Its clean-up,
// registered before the start so that it runs even when the start fails
// half-way, stops it there and removes postmaster.pid before the
// cluster's own clean-up runs: that one reads postmaster.pid, whose PID
// names another process outside the namespace.
func startIn(t *testing.T, ns *pidNamespace, c *testhost.Cluster, options ...string) {
	t.Helper()
	pgctl := filepath.Join(c.BinDir, "pg_ctl")
	t.Cleanup(func() {
		stop := ns.command("runuser", "-u", c.Owner, "--", pgctl, "-D", c.DataDir, "-w", "-t", "30", "-m", "fast", "stop")
		stop.Dir = "/"
		if out, err := stop.CombinedOutput(); err != nil {
			t.Logf("pg_ctl stop in the namespace: %v: %s (the namespace's end kills it)", err, out)
		}
		_ = os.Remove(filepath.Join(c.DataDir, "postmaster.pid"))
	})
	start := ns.command("runuser", "-u", c.Owner, "--", pgctl, "-D", c.DataDir, "-l", c.LogFile, "-w", "-t", "60",
		"-o", fmt.Sprintf("-p %d -k %s -c listen_addresses='' %s", c.Port, c.SocketDir, strings.Join(options, " ")), "start")
	start.Dir = "/"
	if out, err := start.CombinedOutput(); err != nil {
		t.Fatalf("pg_ctl start in the namespace: %v\n%s\n%s", err, out, c.Log(t))
	}
}

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
	ns := newPIDNamespace(t)
	c := testhost.Postgres(t, testhost.Stopped())
	c.Port = 5432 // the namespace shares the network: unix socket only, any port
	startIn(t, ns, c)
	host := nsTransport{ns: ns, local: transport.NewLocal()}

	probe := []string{"sh", "-c", `echo "pid=$1 owner=$2"; cat "/proc/$1/comm"`, "sh", PMPid, PMOwner}
	sets := []Set{{Name: "probe", PostmasterRuns: [][]string{probe}}}
	f, err := GatherHost(ctx, host, Options{Sets: sets, RunAhead: []string{"probe"}})
	if err != nil || f.Postgres == nil {
		t.Fatalf("GatherHost: %v, %+v, %q", err, f, f.PostgresError)
	}
	pg := f.Postgres
	if !pg.Running || pg.DataDir != c.DataDir || pg.PID != c.PID(t) || pg.PID >= 100 {
		t.Fatalf("found %+v; want the namespace's postmaster of %s (pid %d there)", pg, c.DataDir, c.PID(t))
	}
	if pg.ConfigFile != c.ConfigFile() {
		t.Errorf("configuration %q; want %q", pg.ConfigFile, c.ConfigFile())
	}
	if f.Ran.Len() != 2 {
		t.Fatalf("%d answers run ahead; want the probe's and the topology's", f.Ran.Len())
	}
	pid := strconv.Itoa(pg.PID)
	res, ok := f.Ran.Take(transport.Command{Args: []string{"sh", "-c", probe[2], "sh", pid, pg.Owner}})
	if want := "pid=" + pid + " owner=" + pg.Owner + "\npostgres\n"; !ok || string(res.Stdout) != want {
		t.Errorf("probe: %q, %v; want %q", res.Stdout, ok, want)
	}
	counted := &countingTransport{}
	topo, err := GatherTopology(ctx, f.Ran.Transport(counted), false, pg)
	if err != nil {
		t.Fatal(err)
	}
	if counted.runs != 0 || f.Ran.Len() != 0 {
		t.Errorf("the topology's answer was not taken (%d runs reached the host, %d answers left)", counted.runs, f.Ran.Len())
	}
	if topo.Role != "primary" || topo.Settings["block_size"] == "" {
		t.Errorf("topology run ahead: %+v", topo)
	}

	// A second postmaster: two candidates, the operator picks (pg_data).
	other := testhost.Postgres(t, testhost.Stopped())
	other.Port = 5433
	startIn(t, ns, other)
	f, err = GatherHost(ctx, host, Options{Sets: sets, RunAhead: []string{"probe"}})
	if err != nil {
		t.Fatal(err)
	}
	if f.Postgres != nil || !strings.Contains(f.PostgresError, c.DataDir) || !strings.Contains(f.PostgresError, other.DataDir) || f.Ran.Len() != 0 {
		t.Errorf("two postmasters: found %+v (%q), %d answers run ahead; want both named, none chosen, nothing run ahead",
			f.Postgres, f.PostgresError, f.Ran.Len())
	}
}

// recordingTransport keeps every command's arguments.
type recordingTransport struct {
	transport.Transport
	ran [][]string
}

func (r *recordingTransport) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	r.ran = append(r.ran, cmd.Args)
	return r.Transport.Run(ctx, cmd)
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
	ns := newPIDNamespace(t)
	c := testhost.Postgres(t, testhost.Stopped())
	c.Port = 5432
	startIn(t, ns, c, "-c cluster_name=config_file=/etc/postgresql/15/pgtune-none/postgresql.conf")
	host := &recordingTransport{Transport: nsTransport{ns: ns, local: transport.NewLocal()}}

	f, err := GatherHost(ctx, host, Options{})
	if err != nil || f.Postgres == nil {
		t.Fatalf("GatherHost: %v, %+v, %q", err, f, f.PostgresError)
	}
	if f.Postgres.DataDir != c.DataDir || f.Postgres.ConfigFile != c.ConfigFile() {
		t.Errorf("found %s (configuration %s); want %s (%s)", f.Postgres.DataDir, f.Postgres.ConfigFile, c.DataDir, c.ConfigFile())
	}
	asked := 0
	for _, args := range host.ran {
		if args[len(args)-1] == "lsc" {
			asked++
		}
	}
	if asked != 1 {
		t.Errorf("discovery ran %d times with pg_lsclusters asked for; want once (the hint was wrong)", asked)
	}
}
