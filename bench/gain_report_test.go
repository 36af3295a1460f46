package bench

import (
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The side-by-side gain of huge pages (TestGain, build tag gain): what one
// run measured and how it is summarised. The rendering lives outside the
// build tag so that its arithmetic and layout are unit tested.

// gainResult is everything one `make bench-gain` measured, written as JSON.
type gainResult struct {
	Machine gainMachine `json:"machine"`
	Setup   gainSetup   `json:"setup"`
	// Sizes are the page sizes measured, in the order of the columns.
	Sizes []gainSize `json:"sizes"`
	// Skipped says why a page size has no column (e.g. 1 GB pages the
	// kernel does not offer).
	Skipped map[string]string `json:"skipped,omitempty"`
	// Order is the run order, e.g. ["4kB", "2MB", "2MB", "4kB", ...].
	Order []string `json:"order"`
}

// gainMachine is the header: what the numbers were measured on.
type gainMachine struct {
	Date        string   `json:"date"`
	Commit      string   `json:"commit"`
	CPU         string   `json:"cpu"`
	CPUs        int      `json:"cpus"`
	MemTotalMB  int64    `json:"mem_total_mb"`
	Kernel      string   `json:"kernel"`
	PageSizes   []string `json:"huge_page_sizes"` // what the kernel offers
	NUMANodes   int      `json:"numa_nodes"`
	ShmemTHP    string   `json:"transparent_hugepage_shmem_enabled"`
	Postgres    string   `json:"postgres"`
	LoadBefore  string   `json:"loadavg_before"`
	LoadAfter   string   `json:"loadavg_after"`
	SharedNotes string   `json:"notes"`
}

// gainSetup is the workload.
type gainSetup struct {
	SharedBuffersMB int   `json:"shared_buffers_mb"`
	Scale           int   `json:"pgbench_scale"`
	DataMB          int64 `json:"data_mb"` // pgbench_accounts + its index
	Clients         int   `json:"clients"`
	Threads         int   `json:"threads"`
	Seconds         int   `json:"seconds_per_run"`
	Rounds          int   `json:"rounds"`
	ScanMB          int64 `json:"scan_mb"` // what each sweep connection reads
}

// gainSize is one column: a page size's runs and page-table sweep.
type gainSize struct {
	Name   string    `json:"name"` // "4kB", "2MB", "1GB"
	PageKB int64     `json:"page_kb"`
	TPS    []float64 `json:"tps"` // in run order
	// Load is /proc/loadavg after each run: how busy the shared machine was.
	Load []string `json:"loadavg,omitempty"`
	// Sweep is page-table memory against open connections.
	Sweep []sweepPoint `json:"sweep"`
}

// sweepPoint is the page tables with n connections open, each having read
// the whole pgbench_accounts table from shared buffers.
type sweepPoint struct {
	Connections int `json:"connections"`
	// ClusterPTEkB is VmPTE summed over the postmaster and all its
	// children: the cluster's own page tables, whatever else runs.
	ClusterPTEkB int64 `json:"cluster_pte_kb"`
	// MeminfoDeltaKB is /proc/meminfo PageTables minus its value with no
	// connection open (machine-wide, noisy on a shared machine).
	MeminfoDeltaKB int64 `json:"meminfo_pagetables_delta_kb"`
}

// stats summarises a page size's TPS runs.
type stats struct {
	Median, Min, Max float64
	// Spread is (max − min) / median.
	Spread float64
}

func summarize(xs []float64) stats {
	if len(xs) == 0 {
		return stats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var med float64
	if n := len(s); n%2 == 1 {
		med = s[n/2]
	} else {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	st := stats{Median: med, Min: s[0], Max: s[len(s)-1]}
	if med > 0 {
		st.Spread = (st.Max - st.Min) / med
	}
	return st
}

// alternate is the run order for the sizes: A B C C B A per round, so a
// drift in the machine's speed weighs on every size alike.
func alternate(sizes []string, rounds int) []string {
	var out []string
	for range rounds {
		out = append(out, sizes...)
		for i := len(sizes) - 1; i >= 0; i-- {
			out = append(out, sizes[i])
		}
	}
	return out
}

// perConnection is the page-table growth per connection from the first to
// the last sweep point, in kB.
func (g gainSize) perConnection() float64 {
	if len(g.Sweep) < 2 {
		return math.NaN()
	}
	a, b := g.Sweep[0], g.Sweep[len(g.Sweep)-1]
	if b.Connections == a.Connections {
		return math.NaN()
	}
	return float64(b.ClusterPTEkB-a.ClusterPTEkB) / float64(b.Connections-a.Connections)
}

// markdown renders the results: header, TPS table, page-table table and
// the published references beside what was measured here.
func (r *gainResult) markdown() string {
	var b strings.Builder
	m, s := r.Machine, r.Setup
	fmt.Fprintf(&b, "# Huge pages, measured side by side\n\n")
	fmt.Fprintf(&b, "`make bench-gain`, %s, commit `%s`.\n\n", m.Date, m.Commit)
	fmt.Fprintf(&b, "| machine | |\n|---|---|\n")
	fmt.Fprintf(&b, "| CPU | %s × %d |\n| memory | %d MB |\n| kernel | %s |\n", m.CPU, m.CPUs, m.MemTotalMB, m.Kernel)
	fmt.Fprintf(&b, "| huge page sizes offered | %s |\n| NUMA nodes | %d |\n", strings.Join(m.PageSizes, ", "), m.NUMANodes)
	fmt.Fprintf(&b, "| transparent_hugepage/shmem_enabled | %s |\n| PostgreSQL | %s |\n", m.ShmemTHP, m.Postgres)
	fmt.Fprintf(&b, "| load average before / after | %s / %s |\n", m.LoadBefore, m.LoadAfter)
	if m.SharedNotes != "" {
		fmt.Fprintf(&b, "\n%s\n", m.SharedNotes)
	}
	fmt.Fprintf(&b, "\nWorkload: `pgbench -S -M prepared -c %d -j %d -T %d` on scale %d (%d MB of pgbench_accounts and its index, unlogged), "+
		"`shared_buffers = %dMB`, the data pg_prewarmed before each run; each run restarts the server with its page size. "+
		"%d rounds of %s.\n\n",
		s.Clients, s.Threads, s.Seconds, s.Scale, s.DataMB, s.SharedBuffersMB, s.Rounds, roundPattern(r.Sizes))
	for _, name := range sortedKeys(r.Skipped) {
		fmt.Fprintf(&b, "**%s pages: not measured** — %s\n\n", name, r.Skipped[name])
	}

	fmt.Fprintf(&b, "## Throughput (TPS)\n\n| page size | runs | median | min | max | spread | vs 4 kB |\n|---|---|---|---|---|---|---|\n")
	base := 0.0
	for i, g := range r.Sizes {
		st := summarize(g.TPS)
		if i == 0 {
			base = st.Median
		}
		gain := "—"
		if i > 0 && base > 0 {
			gain = fmt.Sprintf("%+.1f%%", 100*(st.Median/base-1))
		}
		fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f | %.0f | %.1f%% | %s |\n", g.Name, len(g.TPS), st.Median, st.Min, st.Max, 100*st.Spread, gain)
	}
	fmt.Fprintf(&b, "\nEvery run, in order:\n\n| # | page size | TPS | load average after |\n|---|---|---|---|\n")
	next := map[string]int{}
	for i, name := range r.Order {
		for _, g := range r.Sizes {
			if g.Name == name && next[name] < len(g.TPS) {
				load := ""
				if next[name] < len(g.Load) {
					load = g.Load[next[name]]
				}
				fmt.Fprintf(&b, "| %d | %s | %.0f | %s |\n", i+1, name, g.TPS[next[name]], load)
				next[name]++
			}
		}
	}

	fmt.Fprintf(&b, "\n## Page tables against connections\n\n")
	fmt.Fprintf(&b, "Each connection reads all of pgbench_accounts (%d MB) from shared buffers once (`SELECT sum(abalance)`, a sequential scan, every block a hit) and stays open. "+
		"`cluster VmPTE` sums `VmPTE` of the postmaster and every child (exact, this cluster only); "+
		"`PageTables Δ` is `/proc/meminfo` against the point with no connection (machine-wide, noisy).\n\n", s.ScanMB)
	fmt.Fprintf(&b, "| connections |")
	for _, g := range r.Sizes {
		fmt.Fprintf(&b, " %s cluster VmPTE | %s PageTables Δ |", g.Name, g.Name)
	}
	fmt.Fprintf(&b, "\n|---|")
	for range r.Sizes {
		fmt.Fprintf(&b, "---|---|")
	}
	fmt.Fprintf(&b, "\n")
	if len(r.Sizes) > 0 {
		for i, p := range r.Sizes[0].Sweep {
			fmt.Fprintf(&b, "| %d |", p.Connections)
			for _, g := range r.Sizes {
				if i < len(g.Sweep) {
					fmt.Fprintf(&b, " %s | %s |", kB(g.Sweep[i].ClusterPTEkB), kB(g.Sweep[i].MeminfoDeltaKB))
				} else {
					fmt.Fprintf(&b, " | |")
				}
			}
			fmt.Fprintf(&b, "\n")
		}
	}
	fmt.Fprintf(&b, "\nPer connection (growth from the first to the last point):")
	for _, g := range r.Sizes {
		fmt.Fprintf(&b, " %s %.0f kB;", g.Name, g.perConnection())
	}
	fmt.Fprintf(&b, " expected on 4 kB pages: %d MB / 4 kB × 8 B = %d kB.\n", s.ScanMB, s.ScanMB*2)

	fmt.Fprintf(&b, "\n## Against the published references\n\n| | published | measured here |\n|---|---|---|\n")
	for _, g := range r.Sizes[1:] {
		ref := map[string]string{"2MB": "+7.5%", "1GB": "+12%"}[g.Name]
		fmt.Fprintf(&b, "| TPS, %s vs 4 kB (pgbench -S) | %s (16 GB shared_buffers) | %s (%d MB shared_buffers) |\n",
			g.Name, ref, gainText(r.Sizes[0], g), s.SharedBuffersMB)
	}
	for _, name := range sortedKeys(r.Skipped) {
		ref := map[string]string{"2MB": "+7.5%", "1GB": "+12%"}[name]
		fmt.Fprintf(&b, "| TPS, %s vs 4 kB (pgbench -S) | %s | not measured (see above) |\n", name, ref)
	}
	if len(r.Sizes) > 0 {
		per := r.Sizes[0].perConnection()
		fmt.Fprintf(&b, "| page tables per connection, 4 kB | 31 MB for a 15.6 GB table (2 kB per MB) | %.0f kB for %d MB (%.2f kB per MB) |\n",
			per, s.ScanMB, per/float64(max(s.ScanMB, 1)))
	}
	return b.String()
}

func gainText(base, g gainSize) string {
	a, b := summarize(base.TPS).Median, summarize(g.TPS).Median
	if a <= 0 {
		return "—"
	}
	return fmt.Sprintf("%+.1f%%", 100*(b/a-1))
}

func roundPattern(sizes []gainSize) string {
	names := make([]string, len(sizes))
	for i, g := range sizes {
		names[i] = g.Name
	}
	return strings.Join(alternate(names, 1), " ")
}

func kB(n int64) string {
	if n >= 10*1024 || n <= -10*1024 {
		return fmt.Sprintf("%.1f MB", float64(n)/1024)
	}
	return fmt.Sprintf("%d kB", n)
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want stats
	}{
		{nil, stats{}},
		{[]float64{5}, stats{Median: 5, Min: 5, Max: 5}},
		{[]float64{3, 1, 2}, stats{Median: 2, Min: 1, Max: 3, Spread: 1}},
		{[]float64{4, 1, 3, 2}, stats{Median: 2.5, Min: 1, Max: 4, Spread: 1.2}},
	} {
		if got := summarize(tc.in); got != tc.want {
			t.Errorf("summarize(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestAlternate(t *testing.T) {
	got := strings.Join(alternate([]string{"A", "B", "C"}, 2), " ")
	if want := "A B C C B A A B C C B A"; got != want {
		t.Errorf("alternate = %q, want %q", got, want)
	}
	if got := strings.Join(alternate([]string{"A", "B"}, 1), " "); got != "A B B A" {
		t.Errorf("alternate = %q", got)
	}
}

var updateGolden = flag.Bool("update", false, "rewrite golden files")

// TestGainMarkdown renders a fixed result against a golden file: one size
// skipped with its reason, the gain column and the references table.
func TestGainMarkdown(t *testing.T) {
	r := &gainResult{
		Machine: gainMachine{Date: "2026-11-30T23:00:00Z", Commit: "abc1234", CPU: "Test CPU", CPUs: 2, MemTotalMB: 24000,
			Kernel: "6.18.0", PageSizes: []string{"2 MB"}, NUMANodes: 1, ShmemTHP: "never", Postgres: "15.18",
			LoadBefore: "5.0", LoadAfter: "4.0", SharedNotes: "Shared machine."},
		Setup: gainSetup{SharedBuffersMB: 1024, Scale: 30, DataMB: 450, Clients: 8, Threads: 2, Seconds: 15, Rounds: 2, ScanMB: 384},
		Sizes: []gainSize{
			{Name: "4kB", PageKB: 4, TPS: []float64{1000, 1100, 1050, 990}, Load: []string{"1.00 2.00 3.00"},
				Sweep: []sweepPoint{{0, 1000, 0}, {10, 8680, 7700}, {100, 77800, 80000}}},
			{Name: "2MB", PageKB: 2048, TPS: []float64{1080, 1150, 1120, 1100},
				Sweep: []sweepPoint{{0, 900, 0}, {10, 1000, 120}, {100, 1900, 1500}}},
		},
		Skipped: map[string]string{"1GB": "the kernel offers no 1 GB pages (no /sys/kernel/mm/hugepages/hugepages-1048576kB)"},
		Order:   []string{"4kB", "2MB", "2MB", "4kB", "4kB", "2MB", "2MB", "4kB"},
	}
	got := r.markdown()
	golden := filepath.Join("testdata", "gain.md.golden")
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("markdown differs from %s (run with -update to accept):\n%s", golden, got)
	}
}
