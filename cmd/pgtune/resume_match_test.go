package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/rollout"
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

func hostStates(st *rollout.State) map[string]string {
	out := map[string]string{}
	for _, h := range st.Hosts {
		out[h.Name] = h.State
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
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
	if code != 1 || !slices.Equal(sorted(m.applied), []string{"h1", "h2"}) {
		t.Errorf("resume --limit h1,h2: exit %d, applied %v, %v; want exit 1 (the run is not finished), h1 h2\n%s", code, m.applied, statuses(r), stderr)
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
// not added to it. With the hosts back, --resume finishes the run.
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
	code, r, stderr := run("apply", "--resume", "--yes")
	if code != 1 || !slices.Equal(sorted(m.applied), []string{"h1", "h2", "h3"}) {
		t.Errorf("resume: exit %d, applied %v, %v; want exit 1, h1 h2 h3 alone\n%s", code, m.applied, statuses(r), stderr)
	}
	st := loadRun(t, id)
	hs := hostStates(st)
	if st.Status != "partial" || len(hs) != 5 || hs["h4"] != rollout.NotReached || hs["h5"] != rollout.NotReached {
		t.Errorf("run: %s %v; want partial, h1..h5 alone, h4 h5 not reached", st.Status, hs)
	}
	for _, want := range []string{"h4, h5", "h5x, h6"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not name %s:\n%s", want, stderr)
		}
	}
	writeFile(t, inv, full)
	m.applied = nil
	code, r, stderr = run("apply", "--resume", "--yes")
	if code != 0 || !slices.Equal(sorted(m.applied), []string{"h4", "h5"}) {
		t.Errorf("resume with the hosts back: exit %d, applied %v, %v; want exit 0, h4 h5\n%s", code, m.applied, statuses(r), stderr)
	}
	if st := loadRun(t, id); st.Status != rollout.Finished {
		t.Errorf("run: %s %v, want finished", st.Status, hostStates(st))
	}
}
