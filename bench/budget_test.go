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
// modules' files and the commands run ahead), pgconf's configuration
// read, pgconf's sizing. Processes: everything those start on the host,
// the topology query's backend included, as root over the local
// transport (an SSH login adds its shell and sudo per session). One
// more postgres -C runs when the candidate's size is a whole number of
// huge pages (that depends on the machine's memory): the budget allows
// for it.
const (
	budgetSessions  = 3
	budgetProcesses = 36
)

// segmentRE finds pgconf's note on the planned segment.
var segmentRE = regexp.MustCompile(`segment (\d+) MB = `)

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
	pagesRun, sized := 0, false
	h := rep.Hosts[0]
	for _, n := range h.Notes {
		if m := segmentRE.FindStringSubmatch(n); m != nil && h.HugePageSize >= 1<<20 {
			mb, _ := strconv.ParseInt(m[1], 10, 64)
			sized = true
			if mb%(h.HugePageSize>>20) == 0 {
				pagesRun = 1
			}
		}
	}
	if !sized {
		t.Fatalf("no segment note in the report (%q, huge page size %d): cannot tell the page count's run", h.Notes, h.HugePageSize)
	}
	t.Logf("one check: %d sessions, %d processes on the host (%d for the page count)", host.runs, started, pagesRun)
	if host.runs != budgetSessions {
		t.Errorf("%d sessions; the budget is %d", host.runs, budgetSessions)
	}
	if started-pagesRun > budgetProcesses || started < budgetSessions {
		t.Errorf("%d processes started on the host (%d of them for the page count); the budget is %d", started, pagesRun, budgetProcesses)
	}
}
