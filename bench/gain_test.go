//go:build gain

package bench

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/pgtune/pgtune/internal/testhost"
)

// TestGain is `make bench-gain`: pgbench -S throughput and page-table
// memory with 4 kB pages (huge_pages = off), 2 MB pages and 1 GB pages
// where the kernel offers them, side by side on one cluster. It changes the
// huge page pools, so it holds the kernel lock from before the cluster
// starts until after it stopped (taken once: on a machine where many test
// packages queue for the lock, taking it per run made each run wait
// minutes), reserves each size's pool once and gives it back at the end.
// Results go to bench/results/gain.{md,json,png}.
//
// It is behind the build tag `gain`: never part of `go test ./...`.
const (
	gainSharedBuffersMB = 1024
	gainScale           = 30 // ~385 MB pgbench_accounts + 64 MB index: fits shared_buffers
	gainClients         = 8
	gainThreads         = 2
	gainSeconds         = 12
	gainRounds          = 3
	gainMaxConnections  = 100
)

var sweepPoints = []int{0, 10, 25, 50, 75, 100}

// pageSize is one column of the experiment.
type pageSize struct {
	name   string
	kB     int64  // 4 for the base page
	sysfs  string // the pool's nr_hugepages; "" for 4 kB pages
	hpSize string // huge_page_size for postgresql.conf ("0": the default)
}

func TestGain(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("bench-gain needs root: it runs PostgreSQL and reserves huge pages")
	}
	start := time.Now()
	res := &gainResult{Machine: machineFacts(t), Skipped: map[string]string{}}
	sizes := gainSizes(t, res)
	names := make([]string, len(sizes))
	for i, s := range sizes {
		names[i] = s.name
		res.Sizes = append(res.Sizes, gainSize{Name: s.name, PageKB: s.kB})
	}
	res.Order = alternate(names, gainRounds)
	res.Setup = gainSetup{SharedBuffersMB: gainSharedBuffersMB, Scale: gainScale, Clients: gainClients,
		Threads: gainThreads, Seconds: gainSeconds, Rounds: gainRounds}

	lockWait := time.Now()
	testhost.LockKernel(t) // first: its restore runs after the cluster stopped
	waited := time.Since(lockWait).Round(time.Second)
	t.Logf("kernel lock taken after %v", waited)
	pg := testhost.Postgres(t, testhost.WithConf(
		fmt.Sprintf("shared_buffers = %dMB", gainSharedBuffersMB),
		fmt.Sprintf("max_connections = %d", gainMaxConnections+20),
		"max_parallel_workers_per_gather = 0", // one process per scan
		"jit = off",
		"autovacuum = off",
		"synchronize_seqscans = off",
	))
	pg.Query(t, "CREATE EXTENSION pg_prewarm")
	load := time.Now()
	pg.AsOwner(t, filepath.Join(pg.BinDir, "pgbench"), "-h", pg.SocketDir, "-p", strconv.Itoa(pg.Port),
		"-i", "-q", "--unlogged-tables", "-s", strconv.Itoa(gainScale), "postgres")
	pg.Query(t, "VACUUM (FREEZE) pgbench_accounts")
	mb := func(sql string) int64 {
		n, err := strconv.ParseInt(pg.Query(t, sql), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n >> 20
	}
	res.Setup.DataMB = mb("SELECT pg_total_relation_size('pgbench_accounts')")
	res.Setup.ScanMB = mb("SELECT pg_relation_size('pgbench_accounts')")
	t.Logf("pgbench -i -s %d: %d MB in %v", gainScale, res.Setup.DataMB, time.Since(load).Round(time.Second))
	pg.Stop(t)
	for _, s := range sizes {
		if s.sysfs != "" {
			reserve(t, pg, s)
		}
	}

	byName := map[string]pageSize{}
	for _, s := range sizes {
		byName[s.name] = s
	}
	for i, name := range res.Order {
		s := byName[name]
		t.Run(fmt.Sprintf("run%02d-%s", i+1, name), func(t *testing.T) {
			withPageSize(t, pg, s, func() {
				tps := pgbenchRun(t, pg)
				t.Logf("run %d %s: %.0f TPS (load %s)", i+1, name, tps, loadAvg())
				g := sizeOf(res, name)
				g.TPS = append(g.TPS, tps)
				g.Load = append(g.Load, loadAvg())
			})
		})
	}
	for _, s := range sizes {
		t.Run("sweep-"+s.name, func(t *testing.T) {
			withPageSize(t, pg, s, func() {
				sizeOf(res, s.name).Sweep = sweep(t, pg, res.Setup.ScanMB)
			})
		})
	}
	res.Machine.LoadAfter = loadAvg()
	res.Machine.SharedNotes += fmt.Sprintf(" The whole experiment took %v, of which %v waiting for the kernel lock.", time.Since(start).Round(time.Second), waited)
	writeResults(t, res)
}

func sizeOf(r *gainResult, name string) *gainSize {
	for i := range r.Sizes {
		if r.Sizes[i].Name == name {
			return &r.Sizes[i]
		}
	}
	panic(name)
}

// gainSizes lists the columns: 4 kB always, then every size the kernel
// offers of 2 MB and 1 GB. A size it does not offer is recorded as skipped
// with the reason, never dropped silently.
func gainSizes(t *testing.T, r *gainResult) []pageSize {
	def := defaultHugePageKB(t)
	out := []pageSize{{name: "4kB", kB: 4}}
	for _, c := range []struct {
		name string
		kB   int64
	}{{"2MB", 2048}, {"1GB", 1 << 20}} {
		dir := fmt.Sprintf("/sys/kernel/mm/hugepages/hugepages-%dkB", c.kB)
		if _, err := os.Stat(dir); err != nil {
			why := fmt.Sprintf("the kernel offers no %s pages (no %s)", c.name, dir)
			if c.kB == 1<<20 && !cpuFlag(t, "pdpe1gb") {
				why += ": the CPU has no pdpe1gb flag"
			}
			r.Skipped[c.name] = why
			t.Logf("%s column skipped: %s", c.name, why)
			continue
		}
		hp := "0"
		if c.kB != def {
			hp = fmt.Sprintf("%dkB", c.kB)
		}
		out = append(out, pageSize{name: c.name, kB: c.kB, sysfs: dir + "/nr_hugepages", hpSize: hp})
	}
	return out
}

// withPageSize starts the cluster on page size s (its pool reserved by
// reserve) and runs f, then stops it.
func withPageSize(t *testing.T, pg *testhost.Cluster, s pageSize, f func()) {
	if s.sysfs == "" {
		pg.AppendConf(t, "huge_pages = off")
	} else {
		pg.AppendConf(t, "huge_pages = on", "huge_page_size = "+s.hpSize)
	}
	pg.Start(t)
	defer pg.Stop(t)
	if got := pg.HugetlbPages(t); (got > 0) != (s.sysfs != "") {
		t.Fatalf("postmaster HugetlbPages = %d kB on %s pages", got, s.name)
	}
	pg.Query(t, "SELECT pg_prewarm('pgbench_accounts'), pg_prewarm('pgbench_accounts_pkey'), pg_prewarm('pgbench_branches'), pg_prewarm('pgbench_tellers')")
	f()
}

// reserve grows the pool of size s by the segment's need, under the
// kernel lock. Pools of a size other than the default are not in
// testhost's snapshot: the cleanup puts them back itself.
func reserve(t *testing.T, pg *testhost.Cluster, s pageSize) {
	out := pg.AsOwner(t, pg.BinDir+"/postgres", "-D", pg.DataDir, "-c", "huge_page_size="+s.hpSize, "-C", "shared_memory_size_in_huge_pages")
	need, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil || need <= 0 {
		t.Fatalf("shared_memory_size_in_huge_pages = %q", out)
	}
	read := func(name string) int64 {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(s.sysfs), name))
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	base := read("nr_hugepages")
	t.Cleanup(func() {
		if err := os.WriteFile(s.sysfs, []byte(strconv.FormatInt(base, 10)), 0); err != nil {
			t.Errorf("give the %s pool back: %v", s.name, err)
		}
	})
	// Room first: without it the kernel finds no contiguous memory for
	// 1 GB pages and few 2 MB ones on a long-running machine.
	_ = exec.Command("sync").Run()
	_ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0)
	_ = os.WriteFile("/proc/sys/vm/compact_memory", []byte("1"), 0)
	if err := os.WriteFile(s.sysfs, []byte(strconv.FormatInt(base+need, 10)), 0); err != nil {
		t.Fatal(err)
	}
	if got := read("nr_hugepages"); got < base+need {
		t.Fatalf("%s pool: the kernel gave %d of %d pages", s.name, got, base+need)
	}
	if free := read("free_hugepages") - read("resv_hugepages"); free < need {
		t.Fatalf("%s pool: %d pages free, the segment needs %d", s.name, free, need)
	}
}

var tpsLine = regexp.MustCompile(`(?m)^tps = ([0-9.]+) \(without initial connection time\)`)

func pgbenchRun(t *testing.T, pg *testhost.Cluster) float64 {
	out := pg.AsOwner(t, filepath.Join(pg.BinDir, "pgbench"), "-h", pg.SocketDir, "-p", strconv.Itoa(pg.Port),
		"-n", "-S", "-M", "prepared", "-c", strconv.Itoa(gainClients), "-j", strconv.Itoa(gainThreads),
		"-T", strconv.Itoa(gainSeconds), "postgres")
	m := tpsLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no tps line in pgbench output:\n%s", out)
	}
	tps, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return tps
}

// sweep opens connections up to the last sweep point; each reads all of
// pgbench_accounts from shared buffers (checked: every block a hit) and
// stays open. At each point the cluster's page tables are summed.
func sweep(t *testing.T, pg *testhost.Cluster, scanMB int64) []sweepPoint {
	blocks, err := strconv.ParseInt(pg.Query(t, "SELECT pg_relation_size('pgbench_accounts') / 8192"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	base, err := testhost.Meminfo()
	if err != nil {
		t.Fatal(err)
	}
	var out []sweepPoint
	open := 0
	for _, n := range sweepPoints {
		for ; open < n; open++ {
			s := openSession(t, pg)
			// sum(abalance) reads every tuple: a sequential scan of the
			// whole heap (count(*) of an all-visible table is answered
			// from the primary key's 64 MB instead).
			lines, err := s.exec("EXPLAIN (ANALYZE, BUFFERS, TIMING OFF) SELECT sum(abalance) FROM pgbench_accounts;")
			if err != nil {
				t.Fatal(err)
			}
			// A block or two may come from outside shared buffers (a
			// hint-bit rewrite): the page tables measured are those of
			// the hundreds of MB that are hits.
			hit, read, _, err := parseExplain(lines)
			if err != nil || read*100 > hit+read || hit+read < blocks {
				t.Fatalf("connection %d: scan hit %d blocks and read %d of the table's %d (%v); every block must come from shared buffers:\n%s",
					open, hit, read, blocks, err, strings.Join(lines, "\n"))
			}
		}
		mi, err := testhost.Meminfo()
		if err != nil {
			t.Fatal(err)
		}
		p := sweepPoint{Connections: n, ClusterPTEkB: clusterPTE(t, pg.PID(t)), MeminfoDeltaKB: mi["PageTables"] - base["PageTables"]}
		t.Logf("%d connections: cluster VmPTE %d kB, PageTables Δ %d kB", n, p.ClusterPTEkB, p.MeminfoDeltaKB)
		out = append(out, p)
	}
	return out
}

// clusterPTE sums VmPTE over the postmaster and its children.
func clusterPTE(t *testing.T, postmaster int) int64 {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pid != postmaster && parentOf(pid) != postmaster {
			continue
		}
		if n, err := vmPTE(pid); err == nil {
			sum += n
		}
	}
	return sum
}

func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}

func defaultHugePageKB(t *testing.T) int64 {
	mi, err := testhost.Meminfo()
	if err != nil {
		t.Fatal(err)
	}
	return mi["Hugepagesize"]
}

func cpuFlag(t *testing.T, flag string) bool {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "flags"); ok {
			return strings.Contains(" "+strings.TrimLeft(v, "\t :")+" ", " "+flag+" ")
		}
	}
	return false
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func machineFacts(t *testing.T) gainMachine {
	m := gainMachine{Date: time.Now().UTC().Format(time.RFC3339), CPUs: runtime.NumCPU(), LoadBefore: loadAvg()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimLeft(v, "\t :"))
				break
			}
		}
	}
	if mi, err := testhost.Meminfo(); err == nil {
		m.MemTotalMB = mi["MemTotal"] >> 10
	}
	if out, err := exec.Command("uname", "-r").Output(); err == nil {
		m.Kernel = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	if dirs, err := filepath.Glob("/sys/kernel/mm/hugepages/hugepages-*kB"); err == nil {
		for _, d := range dirs {
			m.PageSizes = append(m.PageSizes, strings.TrimPrefix(filepath.Base(d), "hugepages-"))
		}
	}
	nodes, _ := filepath.Glob("/sys/devices/system/node/node[0-9]*")
	m.NUMANodes = max(1, len(nodes))
	if b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/shmem_enabled"); err == nil {
		m.ShmemTHP = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command(filepath.Join(testhost.DefaultPGBin, "postgres"), "--version").Output(); err == nil {
		m.Postgres = strings.TrimSpace(string(out))
	}
	m.SharedNotes = "The machine is shared: other engineers' test suites were running on its " +
		strconv.Itoa(runtime.NumCPU()) + " cores throughout (see the load averages), so absolute TPS and the spread are noisy; " +
		"the A B … B A order spreads that noise over every page size alike."
	return m
}

func writeResults(t *testing.T, r *gainResult) {
	dir := "results"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	md := r.markdown() + "\n![TPS and page tables](gain.png)\n"
	for name, data := range map[string][]byte{"gain.json": append(js, '\n'), "gain.md": []byte(md)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := chart(r, filepath.Join(dir, "gain.png")); err != nil {
		t.Fatal(err)
	}
	t.Logf("results in %s:\n%s", dir, md)
}

var palette = []color.Color{
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
}

// chart draws TPS per page size (every run, and its median) beside page
// tables against connections.
func chart(r *gainResult, file string) error {
	tps := plot.New()
	tps.Title.Text = fmt.Sprintf("pgbench -S, %d clients (each run and median)", r.Setup.Clients)
	tps.Y.Label.Text = "TPS"
	var names []string
	for i, g := range r.Sizes {
		names = append(names, g.Name)
		pts := make(plotter.XYs, len(g.TPS))
		for j, v := range g.TPS {
			pts[j] = plotter.XY{X: float64(i) + 0.04*float64(j) - 0.1, Y: v}
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		sc.Color = palette[i%len(palette)]
		med := summarize(g.TPS).Median
		ml, err := plotter.NewLine(plotter.XYs{{X: float64(i) - 0.25, Y: med}, {X: float64(i) + 0.25, Y: med}})
		if err != nil {
			return err
		}
		ml.Color, ml.Width = palette[i%len(palette)], vg.Points(2)
		tps.Add(sc, ml)
	}
	tps.NominalX(names...)
	tps.Y.Min = 0

	pt := plot.New()
	pt.Title.Text = fmt.Sprintf("page tables vs connections (each reads %d MB)", r.Setup.ScanMB)
	pt.X.Label.Text = "connections"
	pt.Y.Label.Text = "cluster VmPTE (MB)"
	for i, g := range r.Sizes {
		pts := make(plotter.XYs, len(g.Sweep))
		for j, p := range g.Sweep {
			pts[j] = plotter.XY{X: float64(p.Connections), Y: float64(p.ClusterPTEkB) / 1024}
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		l.Color, s.Color = palette[i%len(palette)], palette[i%len(palette)]
		pt.Add(l, s)
		pt.Legend.Add(g.Name+" pages", l, s)
	}
	pt.Legend.Top, pt.Legend.Left = true, true

	img := vgimg.New(vg.Points(960), vg.Points(400))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(20), PadTop: vg.Points(10), PadBottom: vg.Points(10), PadLeft: vg.Points(10), PadRight: vg.Points(10)}
	cs := plot.Align([][]*plot.Plot{{tps, pt}}, tiles, dc)
	tps.Draw(cs[0][0])
	pt.Draw(cs[0][1])
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
