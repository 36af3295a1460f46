package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/internal/termsafe"
)

// runFacts prints what pgtune knows about each host.
func (a *App) runFacts(o *options) int {
	l, mods, err := a.load(o)
	if err != nil {
		return a.fail(err)
	}
	ctx, stop := a.signalContext()
	defer stop()
	r := a.runner(o, mods)
	lv := a.newLive(o, "facts", report.ModeCheck, nil)
	lv.attach(a, o, r, len(l.hosts))
	var streamed func(engine.HostFacts)
	if o.format != "json" {
		// Each host's facts as soon as it is done; the clusters, which
		// need every host, at the end.
		streamed = func(h engine.HostFacts) {
			lv.block(h.Error != nil, func() { writeFactsText(a.Stdout, h) })
		}
	}
	hosts := r.FactsEach(ctx, l.hosts, streamed)
	lv.finish(&report.Report{})
	clusters, notes := engine.Clusters(ctx, hosts, r.Forks)
	for _, n := range notes {
		if ctx.Err() != nil {
			break // Ctrl-C cut the lookups: each would say so
		}
		fmt.Fprintf(a.Stderr, "pgtune: warning: %s\n", safeText(n))
	}
	if o.format == "json" {
		// encoding/json escapes C0 controls; termsafe.JSON the C1 and
		// bidi controls it leaves raw.
		doc, err := json.MarshalIndent(map[string]any{"hosts": hosts, "clusters": clusters}, "", "  ")
		if err != nil {
			return a.fail(err)
		}
		_, _ = a.Stdout.Write(append(termsafe.JSON(doc), '\n'))
	} else {
		writeClusters(a.Stdout, clusters) // facts_topology.go
	}
	if a.readInterrupted(ctx) {
		return exitInterrupted
	}
	for _, h := range hosts {
		if h.Error != nil {
			return 1
		}
	}
	return 0
}

// writeFactsText prints one host's facts, one row each. Nearly all of it
// comes from the host (names, paths, sysctl files, errors): every row is
// escaped whole, so nothing in it can drive the terminal.
func writeFactsText(w io.Writer, h engine.HostFacts) {
	fmt.Fprintf(w, "%s:\n", termsafe.Line(h.Name))
	if h.Error != nil {
		fmt.Fprintf(w, "  error: %s\n\n", strings.Join(termsafe.Lines(*h.Error), "\n    "))
		return
	}
	f := h.Facts
	row := func(k, format string, args ...any) {
		fmt.Fprintf(w, "  %-22s %s\n", termsafe.Line(k+":"), termsafe.Line(fmt.Sprintf(format, args...)))
	}
	row("kernel", "%s (%s)", f.Kernel, f.Hostname)
	row("user", "%s (root: %t)", f.User, f.IsRoot)
	row("memory", "total %s, available %s", size(f.MemTotal), size(f.MemAvailable))
	row("huge pages", "%d × %s (free %d, reserved %d, surplus %d)", f.HugePagesTotal, size(f.HugePageSize), f.HugePagesFree, f.HugePagesRsvd, f.HugePagesSurp)
	row("commit", "limit %s, committed %s", size(f.CommitLimit), size(f.CommittedAS))
	row("page tables", "%s", size(f.PageTables))
	row("numa nodes", "%d", f.NUMANodes)
	keys := make([]string, 0, len(f.Sysctl))
	for k := range f.Sysctl {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		row(k, "%s", f.Sysctl[k])
	}
	if !f.SysctlWritable {
		row("sysctl", "/proc/sys is read-only")
	}
	for _, s := range f.SysctlFiles {
		row("sysctl file", "%s:%d %s = %s", s.File, s.Line, s.Key, s.Value)
	}
	writePostgres(w, f, row)
	writeTopology(f, row) // facts_topology.go
	for _, n := range f.PostgresIgnored {
		row("ignored", "%s", n)
	}
	fmt.Fprintln(w)
}

func writePostgres(w io.Writer, f *facts.Facts, row func(string, string, ...any)) {
	pg := f.Postgres
	if pg == nil {
		msg := engine.NoClusterNote
		if f.PostgresError != "" {
			msg = engine.ClusterUnknownNote + ": " + f.PostgresError
		}
		row("postgres", "%s", msg)
		return
	}
	state := "stopped"
	if pg.Running {
		state = fmt.Sprintf("running, pid %d", pg.PID)
	}
	row("postgres", "%s (%s, found via %s)", pg.Version, state, pg.Source)
	row("data directory", "%s (owner %s)", pg.DataDir, pg.Owner)
	row("config file", "%s", pg.ConfigFile)
	row("binaries", "%s", pg.BinDir)
	if pg.Running {
		row("on huge pages", "%t (HugetlbPages %s)", pg.HugetlbPages > 0, size(pg.HugetlbPages))
	}
}

// size renders bytes in binary units, exact where possible.
func size(b int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f := float64(b)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	s := fmt.Sprintf("%.1f", f)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + units[i]
}
