package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/rollout"
	"github.com/pgtune/pgtune/internal/clitest"
)

// writeInventory writes an inventory of hosts beside inv (each with its
// own state directory there, as fleetApp's) and returns its path.
func writeInventory(t *testing.T, inv, name string, hosts ...string) string {
	t.Helper()
	work := filepath.Dir(inv)
	var b strings.Builder
	b.WriteString("all:\n  hosts:\n")
	for _, h := range hosts {
		fmt.Fprintf(&b, "    %s:\n      pgtune_state_dir: %s\n", h, filepath.Join(work, h))
	}
	p := filepath.Join(work, name)
	writeFile(t, p, b.String())
	return p
}

// latestRun is the state of the newest run.
func latestRun(t *testing.T) *rollout.State {
	t.Helper()
	dir, _ := rollout.Dir()
	st, err := rollout.Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func loadRun(t *testing.T, id string) *rollout.State {
	t.Helper()
	dir, _ := rollout.Dir()
	st, err := rollout.Load(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// hostStates is internal/clitest's, shared by the two CLI test suites.
var hostStates = clitest.HostStates

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestResumePicksTheRunOfItsInventory: two stopped runs, one per
// inventory; --resume with -i continues the run of that inventory, not
// the newest one (which would take the other inventory's hosts into it).
// An -i no unfinished run was started with is refused, naming the runs
// there are; so is -i with a run named that was started with another.
func TestResumePicksTheRunOfItsInventory(t *testing.T) {
	m := newMark("h1", "e1")
	run, us, book := fleetApp(t, m)
	eu := writeInventory(t, us, "eu.yml", "e1", "e2", "e3")
	if code, r, stderr := run("apply", "-i", us, "--yes", "--serial", "1,100%", book); code != 1 {
		t.Fatalf("us: exit %d, %v\n%s", code, statuses(r), stderr)
	}
	usRun := latestRun(t)
	if code, r, stderr := run("apply", "-i", eu, "--yes", "--serial", "1,100%", book); code != 1 {
		t.Fatalf("eu: exit %d, %v\n%s", code, statuses(r), stderr)
	}
	euRun := latestRun(t)
	if euRun.ID == usRun.ID {
		t.Fatal("one run for both inventories")
	}
	delete(m.fail, "h1")
	delete(m.fail, "e1")
	m.applied = nil
	code, r, stderr := run("apply", "-i", us, "--resume", "--yes")
	if code != 0 || !slices.Equal(sorted(m.applied), []string{"h1", "h2", "h3", "h4", "h5"}) {
		t.Errorf("resume -i us: exit %d, applied %v, %v; want exit 0, h1..h5\n%s", code, m.applied, statuses(r), stderr)
	}
	if st := loadRun(t, usRun.ID); st.Status != rollout.Finished || len(st.Attempts) != 2 {
		t.Errorf("us run: %s after %d attempts, want finished after 2: %v", st.Status, len(st.Attempts), hostStates(st))
	}
	if st := loadRun(t, euRun.ID); st.Status != rollout.Stopped || len(st.Hosts) != 3 || len(st.Attempts) != 1 {
		t.Errorf("eu run: %s, %d attempts, hosts %v; want stopped, untouched, e1..e3 alone", st.Status, len(st.Attempts), hostStates(st))
	}

	// An inventory no unfinished run was started with: refused, with the
	// runs there are.
	other := writeInventory(t, us, "other.yml", "h1")
	m.events = nil
	code, stderr = runBare(m, "apply", "-i", other, "--resume", "--yes")
	if code != 1 || len(m.events) != 0 || !strings.Contains(stderr, "no unfinished run was started with -i "+other) ||
		!strings.Contains(stderr, euRun.ID) || !strings.Contains(stderr, eu) {
		t.Errorf("resume -i other: exit %d, events %v; want refused naming run %s (%s)\n%s", code, m.events, euRun.ID, eu, stderr)
	}
	// The EU run named with the US inventory: refused.
	code, stderr = runBare(m, "apply", "-i", us, "--resume", euRun.ID, "--yes")
	if code != 1 || len(m.events) != 0 || !strings.Contains(stderr, "was started with -i "+eu) {
		t.Errorf("resume %s -i us: exit %d, events %v; want refused\n%s", euRun.ID, code, m.events, stderr)
	}
	if st := loadRun(t, euRun.ID); st.Status != rollout.Stopped || len(st.Attempts) != 1 {
		t.Errorf("eu run after the refusals: %s, %d attempts", st.Status, len(st.Attempts))
	}
}

// TestResumePicksTheRunOfItsShard: shard 1/2 (h1 h3 h5) and shard 2/2
// (h2 h4) each stopped by their canary; --resume --shard 1/2 continues
// shard 1's run, not the newer one of shard 2. A run named with another
// shard than its own is refused.
func TestResumePicksTheRunOfItsShard(t *testing.T) {
	m := newMark("h1", "h2", "h3", "h4", "h5")
	run, inv, book := fleetApp(t, m)
	var runs []*rollout.State
	for _, s := range []string{"1/2", "2/2"} {
		if code, r, stderr := run("apply", "-i", inv, "--yes", "--serial", "1,100%", "--shard", s, book); code != 1 {
			t.Fatalf("shard %s: exit %d, %v\n%s", s, code, statuses(r), stderr)
		}
		runs = append(runs, latestRun(t))
	}
	first, two := runs[0], runs[1]
	if first.ID == two.ID || first.Shard != "1/2" || two.Shard != "2/2" {
		t.Fatalf("runs: %s (shard %s), %s (shard %s)", first.ID, first.Shard, two.ID, two.Shard)
	}
	m.fail = map[string]bool{}
	m.applied = nil
	code, r, stderr := run("apply", "--resume", "--shard", "1/2", "--yes")
	if code != 0 || !slices.Equal(sorted(m.applied), []string{"h1", "h3", "h5"}) {
		t.Errorf("resume --shard 1/2: exit %d, applied %v, %v; want exit 0, h1 h3 h5\n%s", code, m.applied, statuses(r), stderr)
	}
	if st := loadRun(t, first.ID); st.Status != rollout.Finished {
		t.Errorf("shard 1's run: %s %v, want finished", st.Status, hostStates(st))
	}
	if st := loadRun(t, two.ID); st.Status != rollout.Stopped || len(st.Hosts) != 2 || len(st.Attempts) != 1 {
		t.Errorf("shard 2's run: %s, %d attempts, %v; want stopped, untouched, h2 h4 alone", st.Status, len(st.Attempts), hostStates(st))
	}
	m.events = nil
	code, stderr = runBare(m, "apply", "--resume", two.ID, "--shard", "1/2", "--yes")
	if code != 1 || len(m.events) != 0 || !strings.Contains(stderr, "was started with --shard 2/2") {
		t.Errorf("resume %s --shard 1/2: exit %d, events %v; want refused\n%s", two.ID, code, m.events, stderr)
	}
	// A shard no unfinished run has: refused, naming shard 2's run.
	code, stderr = runBare(m, "apply", "--resume", "--shard", "1/3", "--yes")
	if code != 1 || len(m.events) != 0 || !strings.Contains(stderr, "--shard 1/3") || !strings.Contains(stderr, two.ID) {
		t.Errorf("resume --shard 1/3: exit %d, events %v; want refused naming %s\n%s", code, m.events, two.ID, stderr)
	}
}

// TestResumeNarrowerLimitLeavesTheRunPartial: a resume of part of a run
// (--limit narrower than the run's) does not finish it: the run is left
// partial, the hosts left are named with how to finish them, and a later
// --resume alone picks it and finishes it.
func TestResumeNarrowerLimitLeavesTheRunPartial(t *testing.T) {
	m := newMark("h1")
	run, inv, book := fleetApp(t, m)
	if code, r, stderr := run("apply", "-i", inv, "--yes", "--serial", "1,100%", book); code != 1 {
		t.Fatalf("first run: exit %d, %v\n%s", code, statuses(r), stderr)
	}
	id := latestRun(t).ID
	delete(m.fail, "h1")
	m.applied = nil
	code, r, stderr := run("apply", "--resume", id, "--limit", "h1,h2", "--yes")
	if code != 0 || !slices.Equal(sorted(m.applied), []string{"h1", "h2"}) {
		t.Errorf("resume --limit h1,h2: exit %d, applied %v, %v; want exit 0 (the hosts asked for are verified), h1 h2\n%s", code, m.applied, statuses(r), stderr)
	}
	st := loadRun(t, id)
	if st.Status != "partial" || hostStates(st)["h3"] != rollout.NotReached {
		t.Errorf("run: %s %v; want partial, h3..h5 not reached", st.Status, hostStates(st))
	}
	if !strings.Contains(stderr, "h3, h4, h5") || !strings.Contains(stderr, "pgtune apply --resume "+id) {
		t.Errorf("stderr does not name the hosts left and how to finish them:\n%s", stderr)
	}
	m.applied = nil
	code, r, stderr = run("apply", "--resume", "--yes")
	if code != 0 || !slices.Equal(sorted(m.applied), []string{"h3", "h4", "h5"}) {
		t.Errorf("second resume: exit %d, applied %v, %v; want exit 0, h3 h4 h5\n%s", code, m.applied, statuses(r), stderr)
	}
	if st := loadRun(t, id); st.Status != rollout.Finished {
		t.Errorf("run after the second resume: %s %v, want finished", st.Status, hostStates(st))
	}
}

// TestResumeEditedInventory: hosts of the run gone from the inventory
// (h4 removed, h5 renamed h5x) are named and leave the run partial;
// inventory hosts the run never had (h5x, h6) are named and left out,
// not added to it. With the hosts back, --resume finishes the run. An
// edited inventory is taken only when -i names it: --resume alone, which
// would take it from the run state, is refused before any host is touched.
func TestResumeEditedInventory(t *testing.T) {
	m := newMark("h1")
	run, inv, book := fleetApp(t, m)
	if code, r, stderr := run("apply", "-i", inv, "--yes", "--serial", "1,100%", book); code != 1 {
		t.Fatalf("first run: exit %d, %v\n%s", code, statuses(r), stderr)
	}
	id := latestRun(t).ID
	full := readString(t, inv)
	writeInventory(t, inv, filepath.Base(inv), "h1", "h2", "h3", "h5x", "h6")
	delete(m.fail, "h1")
	m.applied = nil
	if code, stderr := runBare(m, "apply", "--resume", "--yes"); code != 1 || len(m.applied) != 0 ||
		!strings.Contains(stderr, "changed since the run started") || !strings.Contains(stderr, "pgtune apply --resume "+id+" -i "+inv) {
		t.Errorf("resume without -i: exit %d, applied %v; want refused, naming the inventory to give\n%s", code, m.applied, stderr)
	}
	code, r, stderr := run("apply", "--resume", "--yes", "-i", inv)
	if code != 1 || !slices.Equal(sorted(m.applied), []string{"h1", "h2", "h3"}) {
		t.Errorf("resume: exit %d, applied %v, %v; want exit 1, h1 h2 h3 alone\n%s", code, m.applied, statuses(r), stderr)
	}
	st := loadRun(t, id)
	hs := hostStates(st)
	if st.Status != "partial" || len(hs) != 5 || hs["h4"] != rollout.NotReached || hs["h5"] != rollout.NotReached {
		t.Errorf("run: %s %v; want partial, h1..h5 alone, h4 h5 not reached", st.Status, hs)
	}
	// The report says why the exit status is 1: the hosts the inventory
	// lost are in it, unreachable.
	if got := statuses(r); got["h4"] != "unreachable" || got["h5"] != "unreachable" || got["h5x"] != "" || got["h6"] != "" {
		t.Errorf("report statuses %v: want h4 and h5 unreachable, h5x and h6 absent", got)
	}
	for _, want := range []string{"h4, h5", "h5x, h6"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not name %s:\n%s", want, stderr)
		}
	}
	writeFile(t, inv, full)
	m.applied = nil
	code, r, stderr = run("apply", "--resume", "--yes", "-i", inv)
	if code != 0 || !slices.Equal(sorted(m.applied), []string{"h4", "h5"}) {
		t.Errorf("resume with the hosts back: exit %d, applied %v, %v; want exit 0, h4 h5\n%s", code, m.applied, statuses(r), stderr)
	}
	if st := loadRun(t, id); st.Status != rollout.Finished {
		t.Errorf("run: %s %v, want finished", st.Status, hostStates(st))
	}
}
