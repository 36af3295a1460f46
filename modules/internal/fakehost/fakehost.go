// Package fakehost is an in-memory host for module unit tests: it answers
// the fixed scripts the engine and the modules run (read, write, remove a
// file, set a sysctl, prepare memory, list NUMA nodes, resolve links, list
// committers) and models the kernel rules the modules depend on: a pool
// the kernel may not fully give, overcommit_kbytes and overcommit_ratio
// zeroing each other, CommitLimit computed as mm/util.c does.
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
	"sync"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/transport"
)

// Host is the fake. Sizes are kB like /proc/meminfo.
type Host struct {
	mu sync.Mutex

	Files map[string]string
	Links map[string]string // symlink → target path

	Sysctl map[string]string

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

	// Log records one summary line per command, in order.
	Log []string

	// ExtraSizesKB are huge page sizes offered besides HugePageKB (e.g.
	// 1048576); NodeMax caps what a node's nr_hugepages write can give
	// (nil: no cap). See pools.go.
	ExtraSizesKB []int64
	NodeMax      func(node int) int64
	pools        map[int64]*pool
}

// New returns a 16 GiB single-node host with 2 MiB huge pages, no pool,
// default overcommit and no sysctl files.
func New() *Host {
	return &Host{
		Files: map[string]string{},
		Links: map[string]string{},
		Sysctl: map[string]string{
			"vm.nr_hugepages":      "0",
			"vm.overcommit_memory": "0",
			"vm.overcommit_kbytes": "0",
			"vm.overcommit_ratio":  "50",
		},
		MemTotalKB:     16 << 20,
		MemAvailableKB: 15 << 20,
		CommittedKB:    2 << 20,
		HugePageKB:     2048,
		MinFreeKB:      67584,
		SUnreclaimKB:   128 << 10,
		Nodes:          1,
	}
}

func (h *Host) resolve(p string) string {
	for i := 0; i < 10; i++ {
		t, ok := h.Links[p]
		if !ok {
			return p
		}
		if !path.IsAbs(t) {
			t = path.Join(path.Dir(p), t)
		}
		p = t
	}
	return p
}

func (h *Host) pages() int64 {
	n, _ := strconv.ParseInt(h.Sysctl["vm.nr_hugepages"], 10, 64)
	return n
}

// Meminfo renders /proc/meminfo.
func (h *Host) Meminfo() string {
	pages := h.pages()
	total, surp := pages, int64(0)
	if h.InUsePages > pages {
		total, surp = h.InUsePages, h.InUsePages-pages
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
		total, total-h.InUsePages, surp, h.HugePageKB)
	return b.String()
}

// Facts builds what Gather would report, with the real precedence rules.
func (h *Host) Facts() *facts.Facts {
	h.mu.Lock()
	defer h.mu.Unlock()
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
	for k, v := range h.Sysctl {
		sysctl[k] = v
	}
	f := &facts.Facts{
		Hostname: "fake", Kernel: "6.1.0-fake", User: "root", IsRoot: !h.NotRoot,
		MemTotal: mi["MemTotal"], MemAvailable: mi["MemAvailable"], HugePageSize: mi["Hugepagesize"],
		HugePagesTotal: mi["HugePages_Total"], HugePagesFree: mi["HugePages_Free"], HugePagesRsvd: mi["HugePages_Rsvd"],
		HugePagesSurp: mi["HugePages_Surp"], SwapTotal: mi["SwapTotal"], CommitLimit: mi["CommitLimit"],
		CommittedAS: mi["Committed_AS"], PageTables: mi["PageTables"],
		MinFree: h.MinFreeKB << 10, SUnreclaim: mi["SUnreclaim"],
		Sysctl: sysctl, SysctlWritable: !h.ReadOnly && !h.NotRoot, NUMANodes: h.Nodes,
		SysctlFiles: facts.SysctlSettings(facts.OrderSysctlFiles(files), facts.ManagedSysctls),
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
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func (h *Host) setSysctl(key, value string) error {
	if h.ReadOnly {
		return fmt.Errorf("sysctl: permission denied on key %q", key)
	}
	if _, ok := h.Sysctl[key]; !ok {
		return fmt.Errorf("sysctl: cannot stat /proc/sys/%s: No such file or directory", strings.ReplaceAll(key, ".", "/"))
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return fmt.Errorf("sysctl: setting key %q: Invalid argument", key)
	}
	switch key {
	case "vm.nr_hugepages":
		if h.MaxPages != nil {
			n = min(n, max(h.MaxPages(h.Compactions), h.pages()))
		}
		value = strconv.FormatInt(n, 10)
		defer h.syncDefaultPool()
	case "vm.overcommit_kbytes":
		h.Sysctl["vm.overcommit_ratio"] = "0"
	case "vm.overcommit_ratio":
		h.Sysctl["vm.overcommit_kbytes"] = "0"
	}
	h.Sysctl[key] = value
	return nil
}

// Run answers the fixed scripts by what they do.
func (h *Host) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return transport.Result{}, err
	}
	a := cmd.Args
	if len(a) < 3 || a[0] != "sh" || a[1] != "-c" {
		return h.fail(cmd, 127, "fakehost: unsupported command")
	}
	script, args := a[2], a[4:]
	ok := func(out string) (transport.Result, error) { return transport.Result{Stdout: []byte(out)}, nil }
	switch {
	case strings.Contains(script, "exec cat --"): // transport.ReadFile
		p := args[0]
		h.Log = append(h.Log, "read "+p)
		switch p {
		case "/proc/meminfo":
			return ok(h.Meminfo())
		}
		if v, found := h.readSysfs(p); found {
			return ok(v)
		}
		if strings.HasPrefix(p, "/proc/sys/") {
			k := strings.ReplaceAll(strings.TrimPrefix(p, "/proc/sys/"), "/", ".")
			if v, found := h.Sysctl[k]; found {
				return ok(v + "\n")
			}
		}
		data, found := h.Files[h.resolve(p)]
		if !found {
			return h.fail(cmd, 44, "")
		}
		return ok(data)
	case strings.Contains(script, "mktemp"): // transport.WriteFile
		p, backup := args[0], args[3]
		h.Log = append(h.Log, "write "+p)
		if old, found := h.Files[h.resolve(p)]; found && backup != "" {
			h.Files[backup] = old
		}
		h.Files[p] = string(cmd.Stdin)
		delete(h.Links, p) // rename replaces a link with a file
		return ok("")
	case strings.Contains(script, "rm -f --"): // transport.RemoveFile
		h.Log = append(h.Log, "remove "+args[0])
		delete(h.Files, args[0])
		delete(h.Links, args[0])
		return ok("")
	case strings.Contains(script, "sysctl -q -w"): // Target.SetSysctl
		h.Log = append(h.Log, "sysctl "+args[0]+"="+args[1])
		if err := h.setSysctl(args[0], args[1]); err != nil {
			return h.fail(cmd, 1, err.Error())
		}
		return ok("")
	case strings.Contains(script, "no such kernel setting"): // Target.SetSysfs
		h.Log = append(h.Log, "sysfs "+args[0]+"="+args[1])
		if err := h.writeSysfs(args[0], args[1]); err != nil {
			return h.fail(cmd, 1, err.Error())
		}
		return ok("")
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
	case strings.Contains(script, "readlink -f"):
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

func (h *Host) Close() error { return nil }

// Commands returns the log lines matching prefix.
func (h *Host) Commands(prefix string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range h.Log {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}
