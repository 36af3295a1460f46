package bench

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// Budget of one check of a host whose cluster runs (pg_data set, the
// default policy), on the host: what issue 11's speed rests on, counted
// where timing would not be steady. Sessions: facts (with discovery, the
// modules' files and the commands run ahead: the topology query, oom's
// read, pgconf's configuration read), pgconf's sizing. Processes:
// everything those start on the host, the topology query's backend and
// the discovery's awk over /proc included, as root over the local
// transport (an SSH login adds its shell and sudo per session). Two
// things depend on the machine's memory, and the budget allows for
// them: one more postgres -C when the candidate's size is a whole number
// of huge pages; and a candidate that misses the pool by more than the
// slack allowed costs another sizing session (in practice never: the
// first candidate errs a little under the pool), of at most
// budgetPerProbe processes.
const (
	budgetSessions  = 2
	budgetProcesses = 33
	// A sizing session of its own: nsenter's child (which becomes the
	// owner's shell), mktemp, tar, cp, postgres -C of the size and of the
	// page count, rm.
	budgetPerProbe = 7
)

// segmentRE finds pgconf's note on the planned segment: its MB and the
// postgres -C probes it took (pass 1 and each candidate).
var segmentRE = regexp.MustCompile(`segment (\d+) MB = .*, (\d+) probes\)`)

// nsTransport is the local transport inside a PID namespace, counting
// its sessions.
type nsTransport struct {
	ns    *testhost.PIDNamespace
	local transport.Transport
	mu    sync.Mutex
	runs  int
}

func (n *nsTransport) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	n.mu.Lock()
	n.runs++
	n.mu.Unlock()
	cmd.Args = n.ns.Args(cmd.Args...)
	return n.local.Run(ctx, cmd)
}

func (n *nsTransport) Close() error { return n.local.Close() }

// TestCheckProcessBudget checks a host alone in a PID namespace, where
// PIDs are handed out one after the other: the PIDs a check used are the
// processes it started there.
func TestCheckProcessBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("checks a real cluster in a PID namespace (root)")
	}
	testhost.WatchKernel(t)
	ns := testhost.NewPIDNamespace(t)
	// autovacuum off: its workers would take PIDs at their own pace.
	pg := testhost.Postgres(t, testhost.Stopped(), testhost.WithConf("autovacuum = off"))
	pg.StartIn(t, ns)
	mods, book := defaultBookWithoutPreflights(t)
	inv := fleet(t, 1, &recording{PGData: pg.DataDir, PGBin: pg.BinDir, StateDir: filepath.Join(pg.Root, "state")})
	host := &nsTransport{ns: ns, local: transport.NewLocal()}
	r := runner(mods, func(context.Context, *inventory.Host) (transport.Transport, error) { return host, nil })

	first := ns.NextPID(t)
	rep, err := check(context.Background(), r, inv, book)
	if err != nil {
		t.Fatal(err)
	}
	next := ns.NextPID(t)
	if h := rep.Hosts[0]; h.Error != nil || (h.Status != report.Drift && h.Status != report.InPolicy) {
		t.Fatalf("check: %s %v", h.Status, h.Error)
	}
	// The PIDs between, less the one NextPID's own process took.
	started := next - 1 - first
	// The candidate's page count is asked of postgres only when its MB
	// are a whole number of huge pages (sizeScript's pages).
	pagesRun, probes := 0, 0
	h := rep.Hosts[0]
	for _, n := range h.Notes {
		if m := segmentRE.FindStringSubmatch(n); m != nil {
			mb, _ := strconv.ParseInt(m[1], 10, 64)
			probes, _ = strconv.Atoi(m[2])
			// As sizeScript's pages: computed from the MB unless the huge
			// page is not a whole number of MiB or divides them.
			hp := int64(0)
			if h.HugePageSize > 0 && h.HugePageSize%(1<<20) == 0 {
				hp = h.HugePageSize >> 20
			}
			if hp <= 0 || mb <= 0 || mb%hp == 0 {
				pagesRun = 1
			}
		}
	}
	if probes < 2 {
		t.Fatalf("no segment note in the report (%q, huge page size %d): cannot tell what the sizing ran", h.Notes, h.HugePageSize)
	}
	extra := probes - 2 // candidates after the first: a session each
	if extra > 0 {
		pagesRun = 1 // the first candidate's, in the sizing session, unknown
	}
	sessions, processes := budgetSessions+extra, budgetProcesses+pagesRun+extra*budgetPerProbe
	t.Logf("one check: %d sessions, %d processes on the host (budget %d and %d: %d more candidates, %d page count runs)",
		host.runs, started, sessions, processes, extra, pagesRun)
	if host.runs != sessions {
		t.Errorf("%d sessions; the budget is %d", host.runs, sessions)
	}
	if started > processes || started < host.runs {
		t.Errorf("%d processes started on the host; the budget is %d", started, processes)
	}
}
