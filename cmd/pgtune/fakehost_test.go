package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/modules/registry"
)

// TestHostEnv names a facts transcript (the output format of the facts
// gathering round trip, see facts.ParseGather). When it is set, the test
// binary's pgtune reaches every host as a fakeHost serving that
// transcript, so acceptance scripts see the same MemTotal, page size and
// kernel values on every machine.
//
// Only this _test.go file reads the variable: the pgtune binary has no
// way to be pointed at made-up facts, so nothing in production can be
// fooled into planning from them.
const TestHostEnv = "PGTUNE_TEST_HOST"

// testDial returns the dial function the test binary's pgtune uses: the
// fake host when TestHostEnv is set, the real transports otherwise.
func testDial() (engine.DialFunc, error) {
	path := os.Getenv(TestHostEnv)
	if path == "" {
		return engine.Dial, nil
	}
	transcript, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", TestHostEnv, err)
	}
	log := &commandLog{path: path + ".log"}
	return func(ctx context.Context, h *inventory.Host) (transport.Transport, error) {
		return &fakeHost{name: h.Name, transcript: transcript, log: log}, nil
	}, nil
}

// fakeHost answers the facts round trip with its transcript and refuses
// PostgreSQL discovery with "no cluster here", and refuses every other
// command (exit 127), so that nothing a module tries can reach this
// machine. Each command is appended to a log next to the transcript
// ("HOST: facts", "HOST: postgres discovery", "HOST: refused: CMD"), so a
// script can check what reached the host.
type fakeHost struct {
	name       string
	transcript []byte
	log        *commandLog
}

func (h *fakeHost) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	if err := ctx.Err(); err != nil {
		return transport.Result{}, err
	}
	switch {
	case isGather(cmd):
		h.log.add(h.name + ": facts")
		return transport.Result{Stdout: h.transcript}, nil
	case isDiscovery(cmd):
		// A host without PostgreSQL: the discovery finds nothing.
		h.log.add(h.name + ": postgres discovery")
		return transport.Result{}, nil
	}
	h.log.add(h.name + ": refused: " + cmd.String())
	res := transport.Result{ExitCode: 127, Stderr: []byte("fake host " + h.name + " runs no commands")}
	return res, &transport.ExitError{Command: cmd.String(), Result: res}
}

func (h *fakeHost) Close() error { return nil }

// isGather recognises facts.Gather's round trip for the registry's modules:
// their gather script given their sysctl keys as arguments. Should Gather
// ever call differently, the fake host refuses it and the scripts fail on
// the "refused" line rather than pass on made-up facts.
func isGather(cmd transport.Command) bool {
	mods, _ := engine.Registry(registry.All()...)
	sets := engine.FactSets(mods)
	a := cmd.Args
	keys := facts.SysctlKeys(sets)
	return len(a) == 4+len(keys) && a[0] == "sh" && a[1] == "-c" &&
		a[2] == facts.GatherScript(sets) && slices.Equal(a[4:], keys)
}

// isDiscovery recognises facts.DiscoverPostgres's round trip: an inline
// script given the pg_data and pg_bin overrides, a mode and the trusted
// pg_bin.
func isDiscovery(cmd transport.Command) bool {
	a := cmd.Args
	return len(a) == 8 && a[0] == "sh" && a[1] == "-c" && a[3] == "sh" && strings.Contains(a[2], "want_data=$1")
}

// commandLog appends lines to a file; hosts run in parallel.
type commandLog struct {
	mu   sync.Mutex
	path string
}

func (l *commandLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fake host log: %v\n", err)
		return
	}
	defer f.Close()
	fmt.Fprintln(f, strings.ReplaceAll(line, "\n", " "))
}

// hostProfile is a made-up machine for the acceptance scripts.
type hostProfile struct {
	name         string
	memTotalKB   int64
	hugePageKB   int64 // 0: a kernel without hugetlb
	nrHugePages  int64
	swapTotalKB  int64
	overcommit   string // vm.overcommit_memory
	overcommitKB string // vm.overcommit_kbytes
}

// profiles cover small and large machines, odd MemTotal values (so that
// `mem_total * 0.8` is never whole), 2 MB and 1 GB huge pages, and a
// kernel without huge page support.
var profiles = []hostProfile{
	{name: "24GiB-odd", memTotalKB: 24684093, hugePageKB: 2048, overcommit: "0", overcommitKB: "0"},
	{name: "2GiB", memTotalKB: 2 << 20, hugePageKB: 2048, swapTotalKB: 1 << 20, overcommit: "0", overcommitKB: "0"},
	{name: "512GiB-1G-pages", memTotalKB: 528280977, hugePageKB: 1 << 20, nrHugePages: 16, overcommit: "2", overcommitKB: "1048576"},
	{name: "3GiB-no-hugetlb", memTotalKB: 3145727, overcommit: "0", overcommitKB: "0"},
}

// transcript renders the profile as the facts round trip prints it.
func (p hostProfile) transcript() string {
	var b strings.Builder
	m := func(k string, v int64, unit string) { fmt.Fprintf(&b, "M %s: %d%s\n", k, v, unit) }
	m("MemTotal", p.memTotalKB, " kB")
	m("MemFree", p.memTotalKB*9/10, " kB")
	m("MemAvailable", p.memTotalKB*9/10, " kB")
	m("SwapTotal", p.swapTotalKB, " kB")
	m("CommitLimit", p.memTotalKB/2+p.swapTotalKB, " kB")
	m("Committed_AS", p.memTotalKB/20, " kB")
	m("PageTables", 2836, " kB")
	if p.hugePageKB > 0 {
		m("HugePages_Total", p.nrHugePages, "")
		m("HugePages_Free", p.nrHugePages, "")
		m("HugePages_Rsvd", 0, "")
		m("HugePages_Surp", 0, "")
		m("Hugepagesize", p.hugePageKB, " kB")
	}
	fmt.Fprintf(&b, "H fake-%s\nK 6.1.0-fake\nU root\nI 0\n", p.name)
	if p.hugePageKB > 0 {
		fmt.Fprintf(&b, "S vm.nr_hugepages %d\n", p.nrHugePages)
	}
	fmt.Fprintf(&b, "S vm.overcommit_memory %s\nS vm.overcommit_kbytes %s\nS vm.overcommit_ratio 0\n", p.overcommit, p.overcommitKB)
	b.WriteString("W 1\nN 0 0\n")
	// The thp module's facts: transparent huge pages in madvise mode.
	b.WriteString("X thp\nY v enabled always [madvise] never\nY w enabled\nY v defrag always defer defer+madvise [madvise] never\nY w defrag\n")
	return b.String()
}

// env is what the scripts may assert about the profile: MemTotal in
// bytes and the policy sizes derived from it.
func (p hostProfile) env() map[string]string {
	mem := p.memTotalKB * 1024
	return map[string]string{
		"FAKE_PROFILE":    p.name,
		"FAKE_MEM_TOTAL":  fmt.Sprint(mem),
		"FAKE_POOL_80PCT": fmt.Sprint(mem * 4 / 5), // floor(mem_total * 0.8)
		"FAKE_MAX_POOL":   fmt.Sprint(mem * 3 / 4), // floor(mem_total * 0.75)
	}
}
