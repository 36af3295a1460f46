// Package fakehost is an in-memory host for module unit tests: the
// engine's typed operations are answered by internal/fakehost (files,
// kernel values, the journal), the modules' own scripts (prepare memory,
// list NUMA nodes, resolve links, list committers) here, and it models the
// kernel rules the modules depend on: a pool the kernel may not fully
// give, overcommit_kbytes and overcommit_ratio zeroing each other,
// CommitLimit computed as mm/util.c does.
package fakehost

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/transport"
	base "github.com/pgtune/pgtune/internal/fakehost"
	"github.com/pgtune/pgtune/modules/internal/sysctlconf"
)

// StateDir and RunID name the journal of the targets the host hands out.
const (
	StateDir = "/var/lib/pgtune/runs"
	RunID    = "20261130T000000Z-fake00"
)

// Host is the fake. Sizes are kB like /proc/meminfo.
type Host struct {
	// Host holds the files (Files, Links), the kernel values (Sysctl) and
	// the Log; its Log lines for the journal's own files start with
	// "journal".
	*base.Host

	MemTotalKB, MemAvailableKB, SwapKB, CommittedKB, HugePageKB int64
	InUsePages                                                  int64
	ReadOnly                                                    bool
	NotRoot                                                     bool // the login is not root and become is off
	Nodes                                                       int

	// MinFreeKB is vm.min_free_kbytes; SUnreclaimKB the unreclaimable slab.
	MinFreeKB, SUnreclaimKB int64

	// MaxPages returns how many pages the kernel can hold after the given
	// number of compactions; nil means unlimited.
	MaxPages    func(compactions int) int64
	Compactions int
	Drops       int

	// Committers is the output of the committers script.
	Committers string

	// ExtraSizesKB are huge page sizes offered besides HugePageKB (e.g.
	// 1048576); NodeMax caps what a node's nr_hugepages write can give
	// (nil: no cap). See pools.go.
	ExtraSizesKB []int64
	NodeMax      func(node int) int64
	pools        map[int64]*pool

	// Server, when set, is a PostgreSQL stand-in on the pools (server.go).
	Server *Server
}

// New returns a 16 GiB single-node host with 2 MiB huge pages, no pool,
// default overcommit and no sysctl files.
func New() *Host {
	h := &Host{
		Host:           base.New(),
		MemTotalKB:     16 << 20,
		MemAvailableKB: 15 << 20,
		CommittedKB:    2 << 20,
		HugePageKB:     2048,
		MinFreeKB:      67584,
		SUnreclaimKB:   128 << 10,
		Nodes:          1,
	}
	h.Sysctl["vm.nr_hugepages"] = "0"
	h.Sysctl["vm.overcommit_memory"] = "0"
	h.Sysctl["vm.overcommit_kbytes"] = "0"
	h.Sysctl["vm.overcommit_ratio"] = "50"
	h.OnSysctl = h.setSysctl
	h.StateDir = StateDir
	h.Generated = func(p string) (string, bool) {
		if p == "/proc/meminfo" {
			return h.Meminfo(), true
		}
		return h.readSysfs(p) // huge page pools, per size and node
	}
	h.OnSysfs = h.writeSysfs
	h.Other = h.runScript
	return h
}

func (h *Host) resolve(p string) string { return h.Resolve(p) }

func (h *Host) pages() int64 {
	n, _ := strconv.ParseInt(h.Sysctl["vm.nr_hugepages"], 10, 64)
	return n
}

// Meminfo renders /proc/meminfo.
func (h *Host) Meminfo() string {
	pages := h.pages()
	total, surp := pages, int64(0)
	if used := h.inUse(h.HugePageKB); used > pages {
		total, surp = used, used-pages
	}
	kb, _ := strconv.ParseInt(h.Sysctl["vm.overcommit_kbytes"], 10, 64)
	ratio, _ := strconv.ParseInt(h.Sysctl["vm.overcommit_ratio"], 10, 64)
	var limit int64
	if kb > 0 {
		limit = kb / 4 * 4
	} else {
		limit = (h.MemTotalKB - total*h.HugePageKB) * ratio / 100
	}
	limit += h.SwapKB
	var b strings.Builder
	fmt.Fprintf(&b, "MemTotal:       %d kB\nMemFree:        %d kB\nMemAvailable:   %d kB\n", h.MemTotalKB, h.MemAvailableKB, h.MemAvailableKB)
	fmt.Fprintf(&b, "SwapTotal:      %d kB\nSUnreclaim:     %d kB\nPageTables:     1904 kB\nCommitLimit:    %d kB\nCommitted_AS:   %d kB\n", h.SwapKB, h.SUnreclaimKB, limit, h.CommittedKB)
	fmt.Fprintf(&b, "HugePages_Total: %d\nHugePages_Free:  %d\nHugePages_Rsvd:  0\nHugePages_Surp:  %d\nHugepagesize:    %d kB\n",
		total, total-h.inUse(h.HugePageKB), surp, h.HugePageKB)
	return b.String()
}

// Facts builds what Gather would report, with the real precedence rules.
func (h *Host) Facts() *facts.Facts {
	h.Lock()
	defer h.Unlock()
	mi := map[string]int64{}
	for _, line := range strings.Split(h.Meminfo(), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			if len(f) > 2 {
				n *= 1024
			}
			mi[strings.TrimSuffix(f[0], ":")] = n
		}
	}
	var files []facts.SysctlFile
	names := make([]string, 0, len(h.Files)+len(h.Links))
	for p := range h.Files {
		names = append(names, p)
	}
	for p := range h.Links {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		data, ok := h.Files[h.resolve(p)]
		if !ok {
			continue
		}
		files = append(files, facts.SysctlFile{Path: p, Lines: strings.Split(strings.TrimSuffix(data, "\n"), "\n")})
	}
	sysctl := map[string]string{}
	var keys []string // the keys the modules declare are the fake's keys
	for k, v := range h.Sysctl {
		sysctl[k] = v
		keys = append(keys, k)
	}
	sort.Strings(keys)
	f := &facts.Facts{
		Hostname: "fake", Kernel: "6.1.0-fake", User: "root", IsRoot: !h.NotRoot,
		MemTotal: mi["MemTotal"], MemAvailable: mi["MemAvailable"], HugePageSize: mi["Hugepagesize"],
		HugePagesTotal: mi["HugePages_Total"], HugePagesFree: mi["HugePages_Free"], HugePagesRsvd: mi["HugePages_Rsvd"],
		HugePagesSurp: mi["HugePages_Surp"], SwapTotal: mi["SwapTotal"], CommitLimit: mi["CommitLimit"],
		CommittedAS: mi["Committed_AS"], PageTables: mi["PageTables"],
		MinFree: h.MinFreeKB << 10, SUnreclaim: mi["SUnreclaim"],
		Sysctl: sysctl, SysctlWritable: !h.ReadOnly && !h.NotRoot, NUMANodes: h.Nodes,
		SysctlFiles: facts.SysctlSettings(facts.OrderSysctlFiles(files), keys),
	}
	if h.Nodes > 1 {
		f.NodeHugePages = map[int]int64{}
		for i := 0; i < h.Nodes; i++ {
			f.NodeHugePages[i] = h.pages() / int64(h.Nodes)
		}
	}
	h.addPools(f)
	return f
}

// Target returns a module's view of the host with facts bound in the
// scope, as the runner does.
func (h *Host) Target(name string) *engine.Target {
	f := h.Facts()
	scope := expr.NewScope("policy.yml")
	vars, err := f.ScopeVars()
	if err != nil {
		panic(err)
	}
	if err := scope.Set("facts", vars); err != nil {
		panic(err)
	}
	return &engine.Target{
		Name: name, Transport: h, Facts: f, Scope: scope,
		Log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		Journal:  engine.NewJournal(RunID, name, StateDir, h, false),
		StateDir: StateDir,
	}
}

// Backup returns what the run's journal kept of p before it changed.
func (h *Host) Backup(p string) (string, bool) {
	h.Lock()
	defer h.Unlock()
	b, ok := h.Files[path.Join(StateDir, RunID, "files", p)]
	return b, ok
}

// setSysctl is the kernel's rule for a write (base.Host.OnSysctl).
func (h *Host) setSysctl(sysctl map[string]string, key, value string) (string, error) {
	if h.ReadOnly {
		return "", fmt.Errorf("sysctl: permission denied on key %q", key)
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return "", fmt.Errorf("sysctl: setting key %q: Invalid argument", key)
	}
	switch key {
	case "vm.nr_hugepages":
		if h.MaxPages != nil {
			n = min(n, max(h.MaxPages(h.Compactions), h.pages()))
		}
		value = strconv.FormatInt(n, 10)
		sysctl[key] = value
		h.syncDefaultPool() // the nodes' shares follow the pool
	case "vm.overcommit_kbytes":
		sysctl["vm.overcommit_ratio"] = "0"
	case "vm.overcommit_ratio":
		sysctl["vm.overcommit_kbytes"] = "0"
	}
	return value, nil
}

// runScript answers the modules' own scripts: sysctlconf's by its Op,
// the hugepages and overcommit scripts (which carry none yet) by what
// they do.
func (h *Host) runScript(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	h.Lock()
	defer h.Unlock()
	a := cmd.Args
	if len(a) < 4 || a[0] != "sh" || a[1] != "-c" {
		return h.fail(cmd, 127, "fakehost: unsupported command")
	}
	script, args := a[2], a[4:]
	ok := func(out string) (transport.Result, error) { return transport.Result{Stdout: []byte(out)}, nil }
	switch {
	case strings.Contains(script, "printf 'H %s"): // the engine's facts gather (gather.go)
		h.Log = append(h.Log, "gather")
		return ok(h.gather(args))
	case strings.Contains(script, "drop_caches"): // hugepages prepare
		h.Log = append(h.Log, "prepare "+args[0])
		if args[0] == "full" {
			h.Drops++
		}
		h.Compactions++
		return ok("")
	case strings.Contains(script, "/sys/devices/system/node"):
		h.Log = append(h.Log, "nodes")
		var b strings.Builder
		for i := 0; i < h.Nodes; i++ {
			fmt.Fprintf(&b, "%d %d\n", i, h.pages()/int64(h.Nodes))
		}
		return ok(b.String())
	case cmd.Op == sysctlconf.OpResolve:
		h.Log = append(h.Log, "resolve "+strings.Join(args, " "))
		var b strings.Builder
		for _, p := range args {
			b.WriteString(h.resolve(p) + "\n")
		}
		return ok(b.String())
	case strings.Contains(script, "VmData"):
		h.Log = append(h.Log, "committers")
		return ok(h.Committers)
	}
	return h.fail(cmd, 127, "fakehost: unknown script")
}

func (h *Host) fail(cmd transport.Command, code int, msg string) (transport.Result, error) {
	res := transport.Result{ExitCode: code, Stderr: []byte(msg)}
	return res, &transport.ExitError{Command: cmd.String(), Result: res}
}
