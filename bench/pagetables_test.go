package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/internal/testhost"
)

// The experiment, scaled to a shared 2-core test machine: a 512 MB buffer
// cache holding a ~400 MB table, and backends that each read every block of
// it from shared buffers and stay connected.
const (
	sharedBuffersMB = 512
	tableMB         = 400
	// A row of an int and a 200-byte text takes 232 bytes plus a 4-byte
	// line pointer: 34 rows fill an 8 kB heap page.
	rowsPerPage = 34
	backends    = 8
)

// BenchmarkPageTables measures what DESIGN.md's first module is for: with
// 4 kB pages every backend builds its own page-table entries for the
// shared buffers it touches (8 bytes per 4 kB, so 2 kB per MB), with 2 MB
// huge pages one entry covers 2 MB and the cost stays flat.
//
// One PostgreSQL 15 cluster is loaded once; each sub-benchmark restarts it
// with huge_pages off or on, pg_prewarms the table into shared buffers, opens
// 8 backends and has each run one full scan. EXPLAIN (ANALYZE, BUFFERS)
// proves every block came from shared buffers (shared hit = every block of
// the table, nothing read), and each backend's VmPTE in /proc/PID/status
// before and after its scan gives its own page-table growth, untouched by
// whatever else runs on the machine. Those are one-off measurements,
// reported as metrics:
//
//	pagetable-kB/backend  measured VmPTE growth per backend (mean)
//	expected-kB/backend   touched bytes / page size × 8 bytes
//	meminfo-kB/backend    /proc/meminfo PageTables growth / backends (machine-wide, noisy)
//	first-scan-ms         server-side time of each backend's first scan, faults included
//	query-ms              wall time of a full scan on a backend whose mapping is built
//
// The timed loop (b.Loop, so the setup runs once whatever b.N is) is the
// warm full scan, round-robin over the 8 backends: ns/op and MB/s are its
// throughput, query-ms the same in milliseconds.
//
// It needs root (PostgreSQL runs as the postgres user; the huge case
// reserves a pool under testhost.LockKernel, which puts vm.nr_hugepages
// back) and skips under -short.
func BenchmarkPageTables(b *testing.B) {
	if testing.Short() {
		b.Skip("loads a 400 MB table into a real cluster")
	}
	if os.Geteuid() != 0 {
		b.Skip("needs root: runs PostgreSQL and reserves huge pages")
	}
	pg := testhost.Postgres(b, testhost.WithConf(
		fmt.Sprintf("shared_buffers = %dMB", sharedBuffersMB),
		// One process per scan: parallel workers would split the blocks
		// between processes and hide the per-backend cost.
		"max_parallel_workers_per_gather = 0",
		"jit = off",
		"synchronize_seqscans = off",
		"autovacuum = off",
		"huge_pages = off",
	))
	rows := int64(tableMB) << 20 / 8192 * rowsPerPage
	loadStart := time.Now()
	pg.Query(b, "CREATE EXTENSION pg_prewarm")
	// Unlogged: the data survives a clean restart without writing 400 MB
	// of WAL on a shared machine.
	pg.Query(b, "CREATE UNLOGGED TABLE t (id int NOT NULL, pad text NOT NULL) WITH (autovacuum_enabled = off)")
	pg.Query(b, fmt.Sprintf("INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(1, %d) g", rows))
	// Hint bits and the visibility map set now, so no scan below dirties
	// or rewrites a page.
	pg.Query(b, "VACUUM (FREEZE) t")
	relBytes, err := strconv.ParseInt(pg.Query(b, "SELECT pg_relation_size('t')"), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d rows (%d MB) in %v", rows, relBytes>>20, time.Since(loadStart).Round(time.Millisecond))

	b.Run("4k", func(b *testing.B) { pageTables(b, pg, relBytes, rows, false) })
	b.Run("huge", func(b *testing.B) { pageTables(b, pg, relBytes, rows, true) })
}

func pageTables(b *testing.B, pg *testhost.Cluster, relBytes, rows int64, huge bool) {
	if pg.Running() {
		pg.Stop(b)
	}
	pageKB := int64(os.Getpagesize() >> 10) // the base page: 4 kB on x86, larger elsewhere
	if huge {
		lockStart := time.Now()
		st := testhost.LockKernel(b)
		b.Logf("kernel lock taken after %v", time.Since(lockStart).Round(time.Millisecond))
		pg.AppendConf(b, "huge_pages = on") // the last setting in the file wins
		reservePool(b, pg, st)
		pageKB = st.Meminfo["Hugepagesize"]
		// Registered after the lock, so it runs first: the pool is given
		// back only once the segment is gone.
		b.Cleanup(func() {
			if pg.Running() {
				pg.Stop(b)
			}
		})
	} else {
		pg.AppendConf(b, "huge_pages = off")
	}
	pg.Start(b)
	if got := pg.HugetlbPages(b); (got > 0) != huge {
		b.Fatalf("postmaster HugetlbPages = %d kB with huge_pages %v", got, huge)
	}
	blocks := relBytes / 8192
	if got := pg.Query(b, "SELECT pg_prewarm('t')"); got != strconv.FormatInt(blocks, 10) {
		b.Fatalf("pg_prewarm loaded %s blocks, want %d", got, blocks)
	}

	ss := make([]*session, backends)
	for i := range ss {
		ss[i] = openSession(b, pg)
		// Plan once so catalog lookups are not counted with the scan.
		if _, err := ss[i].exec("EXPLAIN SELECT count(*) FROM t;"); err != nil {
			b.Fatal(err)
		}
	}
	before, err := testhost.Meminfo()
	if err != nil {
		b.Fatal(err)
	}
	var pteKB, firstMS float64
	for i, s := range ss {
		pte0, err := vmPTE(s.pid)
		if err != nil {
			b.Fatal(err)
		}
		lines, err := s.exec("EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) SELECT count(*) FROM t;")
		if err != nil {
			b.Fatal(err)
		}
		hit, read, ms, err := parseExplain(lines)
		if err != nil {
			b.Fatal(err)
		}
		if hit != blocks || read != 0 {
			b.Fatalf("backend %d: scan hit %d and read %d blocks; want all %d from shared buffers:\n%s",
				i, hit, read, blocks, strings.Join(lines, "\n"))
		}
		pte1, err := vmPTE(s.pid)
		if err != nil {
			b.Fatal(err)
		}
		pteKB += float64(pte1 - pte0)
		firstMS += ms
	}
	after, err := testhost.Meminfo()
	if err != nil {
		b.Fatal(err)
	}
	pteKB /= backends
	firstMS /= backends
	expectKB := float64(relBytes) / float64(pageKB<<10) * 8 / 1024
	meminfoKB := float64(after["PageTables"]-before["PageTables"]) / backends

	b.SetBytes(relBytes)
	want := strconv.FormatInt(rows, 10)
	var i int
	start := time.Now()
	for b.Loop() {
		s := ss[i%backends]
		i++
		lines, err := s.exec("SELECT count(*) FROM t;")
		if err != nil || len(lines) != 1 || lines[0] != want {
			b.Fatalf("scan: %q, %v; want %s", lines, err, want)
		}
	}
	queryMS := float64(time.Since(start).Microseconds()) / 1000 / float64(i)

	b.ReportMetric(pteKB, "pagetable-kB/backend")
	b.ReportMetric(expectKB, "expected-kB/backend")
	b.ReportMetric(meminfoKB, "meminfo-kB/backend")
	b.ReportMetric(firstMS, "first-scan-ms")
	b.ReportMetric(queryMS, "query-ms")
	b.Logf("%d kB pages: each of %d backends read %d MB from shared buffers; page tables grew %.0f kB per backend "+
		"(expected %.1f kB = %d MB / %d kB × 8 B); /proc/meminfo PageTables +%.0f kB per backend; "+
		"first scan %.0f ms, warm scan %.0f ms",
		pageKB, backends, relBytes>>20, pteKB, expectKB, relBytes>>20, pageKB, meminfoKB, firstMS, queryMS)
}

// reservePool grows vm.nr_hugepages by what the segment needs, as the
// server binary computes it for this configuration, beside the pages
// others hold (surplus pages included: vm.nr_hugepages does not count
// them), and checks the kernel gave every page.
func reservePool(b *testing.B, pg *testhost.Cluster, st *testhost.KernelState) {
	b.Helper()
	out := pg.AsOwner(b, pg.BinDir+"/postgres", "-D", pg.DataDir, "-C", "shared_memory_size_in_huge_pages")
	need, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil || need <= 0 {
		b.Fatalf("shared_memory_size_in_huge_pages = %q", out)
	}
	st.MakeRoom(b, need)
	mi, err := testhost.Meminfo()
	if err != nil {
		b.Fatal(err)
	}
	if free := mi["HugePages_Free"] - mi["HugePages_Rsvd"]; free < need {
		b.Fatalf("huge page pool: %d pages free of %d asked (%d total)", free, need, mi["HugePages_Total"])
	}
}

// parseExplain reads the first Buffers line (the top node's totals) and the
// execution time from EXPLAIN (ANALYZE, BUFFERS) text.
func parseExplain(lines []string) (hit, read int64, ms float64, err error) {
	sawBuffers, sawTime := false, false
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if v, ok := strings.CutPrefix(l, "Buffers:"); ok && !sawBuffers {
			sawBuffers = true
			for _, f := range strings.Fields(v) {
				k, n, ok := strings.Cut(f, "=")
				if !ok {
					continue
				}
				x, perr := strconv.ParseInt(n, 10, 64)
				if perr != nil {
					return 0, 0, 0, fmt.Errorf("explain: %q: %w", l, perr)
				}
				switch k {
				case "hit":
					hit = x
				case "read":
					read = x
				}
			}
		}
		if v, ok := strings.CutPrefix(l, "Execution Time:"); ok {
			sawTime = true
			if ms, err = strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " ms"), 64); err != nil {
				return 0, 0, 0, fmt.Errorf("explain: %q: %w", l, err)
			}
		}
	}
	if !sawBuffers || !sawTime {
		return 0, 0, 0, fmt.Errorf("explain: no Buffers or Execution Time in %q", lines)
	}
	return hit, read, ms, nil
}

func TestParseExplain(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lines     []string
		hit, read int64
		ms        float64
		bad       bool
	}{
		{name: "all hit", lines: []string{
			"Aggregate (actual rows=1 loops=1)",
			"  Buffers: shared hit=51200",
			"  ->  Seq Scan on t (actual rows=1740800 loops=1)",
			"        Buffers: shared hit=51200",
			"Planning Time: 0.051 ms",
			"Execution Time: 231.118 ms",
		}, hit: 51200, ms: 231.118},
		{name: "some read", lines: []string{
			"Aggregate (actual rows=1 loops=1)",
			"  Buffers: shared hit=100 read=20",
			"  ->  Seq Scan on t (actual rows=4 loops=1)",
			"        Buffers: shared hit=99 read=20",
			"Execution Time: 1.5 ms",
		}, hit: 100, read: 20, ms: 1.5},
		{name: "no buffers", lines: []string{"Execution Time: 1.5 ms"}, bad: true},
		{name: "no time", lines: []string{"Buffers: shared hit=1"}, bad: true},
		{name: "garbled count", lines: []string{"Buffers: shared hit=x", "Execution Time: 1 ms"}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hit, read, ms, err := parseExplain(tc.lines)
			if tc.bad {
				if err == nil {
					t.Fatalf("no error; got hit=%d read=%d ms=%v", hit, read, ms)
				}
				return
			}
			if err != nil || hit != tc.hit || read != tc.read || ms != tc.ms {
				t.Fatalf("got hit=%d read=%d ms=%v err=%v; want hit=%d read=%d ms=%v", hit, read, ms, err, tc.hit, tc.read, tc.ms)
			}
		})
	}
}
