package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/rollout"
	"github.com/pgtune/pgtune/engine/transport"
)

// runBare runs the CLI in-process with module m and no host reachable:
// for the commands that must stop before contacting any (refusals). The
// run state is wherever XDG_STATE_HOME points (fleetApp sets it).
func runBare(m engine.Module, args ...string) (int, string) {
	app, _, stderr := testApp(m)
	app.Dial = func(context.Context, *inventory.Host) (transport.Transport, error) {
		return nil, errors.New("runBare: no host is reachable")
	}
	code := app.Run(args)
	return code, stderr.String()
}

// TestResumeRefusals: a resume with -e vars other than the run's, or after
// the playbook changed, is refused before any host is touched (its verified
// hosts were verified under other inputs); the same vars, however given,
// resume. The state file keeps a fingerprint of the vars, never a value.
// An inventory edited since the run started is refused when the resume
// takes it from the run state, and taken (with a note) when -i names it.
func TestResumeRefusals(t *testing.T) {
	const secret = "s3cret-Value"
	tests := []struct {
		name          string
		start, resume []string
		editBook      bool
		editInv       bool
		refused       string // "" when the resume goes through
		note          string // said on stderr when the resume goes through
	}{
		{"the same -e, given another way", []string{"-e", "pw=" + secret + " n=1"}, []string{"-e", "n=1", "-e", "pw=" + secret}, false, false, "", ""},
		{"no -e either time", nil, nil, false, false, "", ""},
		{"-e left out", []string{"-e", "pw=" + secret}, nil, false, false, "the extra vars (-e) are not the run's", ""},
		{"another value", []string{"-e", "pw=" + secret}, []string{"-e", "pw=other"}, false, false, "the extra vars (-e) are not the run's", ""},
		{"-e added", nil, []string{"-e", "n=1"}, false, false, "the extra vars (-e) are not the run's", ""},
		{"the playbook changed", nil, nil, true, false, "the playbook changed since the run started", ""},
		{"the inventory changed, taken from the run", nil, nil, false, true, "inventory.yml changed since the run started", ""},
		{"the inventory changed, named with -i", nil, []string{"-i", "INV"}, false, true, "", "inventory.yml changed since run "},
		{"the inventory named with -i, unchanged", nil, []string{"-i", "INV"}, false, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMark("h1")
			run, inv, book := fleetApp(t, m)
			start := append([]string{"apply", "-i", inv, "--yes", "--serial", "1,100%", book}, tt.start...)
			if code, _, stderr := run(start...); code != 1 || !strings.Contains(stderr, "--resume") {
				t.Fatalf("failed canary: exit %d\n%s", code, stderr)
			}
			dir, _ := rollout.Dir()
			st, err := rollout.Load(dir, "")
			if err != nil {
				t.Fatal(err)
			}
			data := readString(t, st.Path())
			if strings.Contains(data, secret) || (len(tt.start) > 0) != (st.ExtraVarsFingerprint != "") {
				t.Errorf("state: extra_vars_fingerprint %q; want one exactly with -e, and no value:\n%s", st.ExtraVarsFingerprint, data)
			}
			if tt.editBook {
				writeFile(t, book, readString(t, book)+"# edited\n")
			}
			if tt.editInv {
				writeFile(t, inv, strings.Replace(readString(t, inv), "    h1:\n", "    h1:\n      edited: yes\n", 1))
			}
			delete(m.fail, "h1")
			m.events = nil
			resume := append([]string{"apply", "--resume", "--yes"}, tt.resume...)
			for i, a := range resume {
				if a == "INV" {
					resume[i] = inv
				}
			}
			if tt.refused != "" {
				code, stderr := runBare(m, resume...)
				if code != 1 || !strings.Contains(stderr, tt.refused) || len(m.events) != 0 {
					t.Errorf("resume: exit %d, events %v; want refused with %q\n%s", code, m.events, tt.refused, stderr)
				}
				if strings.Contains(stderr, secret) {
					t.Errorf("the refusal shows the secret:\n%s", stderr)
				}
				return
			}
			code, r, stderr := run(resume...)
			if code != 0 || len(m.events) == 0 {
				t.Errorf("resume: exit %d, events %v, hosts %v\n%s", code, m.events, statuses(r), stderr)
			}
			if tt.note == "" && strings.Contains(stderr, "changed since") || !strings.Contains(stderr, tt.note) {
				t.Errorf("resume: stderr without the note %q:\n%s", tt.note, stderr)
			}
		})
	}
}

// TestResumeBudgetOverTheRun: on resume the failure budget is counted over
// every host of the run, and a host counts as failed while its latest state
// is failed: a failure of an earlier attempt counts until the host is
// retried, then as the retry went (once, if it fails again).
func TestResumeBudgetOverTheRun(t *testing.T) {
	tests := []struct {
		name        string
		first, fail []string
		fixed       []string // hosts that apply after the first run
		resume      []string // flags of the resume (--resume ID)
		wantApplied []string // by the resume
		wantStopped string   // "" when the resume runs to its end
	}{{
		// First run: h1 fails in [h1 h2] (1 of 5, at the budget), h3 in
		// [h3 h4] (2 of 5) stops it; h5 not reached. The resume's batches
		// are [h1 h3] [h5]: h3 now applies, h1 fails again and counts once:
		// 1 of 5, so h5 is applied (counted over the 3 hosts left it was
		// 1 of 3, over the budget; h1 counted per attempt, 3 of 5).
		name:  "the run's hosts, a retried host counted once",
		first: []string{"--serial", "2", "--max-fail-percentage", "20"}, fail: []string{"h1", "h3"},
		fixed:       []string{"h3"},
		wantApplied: []string{"h1", "h3", "h5"},
	}, {
		// First run: h1 and h2 fail, the run finishes. The resume retries
		// them one by one with a budget of 0%: h1 applies, and h2's failure
		// of the first run does not stop the resume before h2's retry (a
		// stale failure is no reason not to retry it).
		name:  "an earlier failure counts only once its retry fails",
		first: []string{"--serial", "3", "--max-fail-percentage", "100"}, fail: []string{"h1", "h2"},
		fixed:       []string{"h1"},
		resume:      []string{"--serial", "1", "--max-fail-percentage", "0"},
		wantApplied: []string{"h1", "h2"},
	}, {
		// First run: h1, h2 and h3 fail, an all-failed batch stops it.
		// The resume's first batch [h1 h2]: h2 applies, h1 fails again:
		// 1 of 5 this attempt, over 0%: h3 is not retried.
		name:  "a retry that fails again counts",
		first: []string{"--serial", "3", "--max-fail-percentage", "100"}, fail: []string{"h1", "h2", "h3"},
		fixed:       []string{"h2", "h3"},
		resume:      []string{"--serial", "2", "--max-fail-percentage", "0"},
		wantApplied: []string{"h1", "h2"},
		wantStopped: "1 of 5 hosts failed (20.0%), more than max_fail_percentage 0%",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMark(tt.fail...)
			run, inv, book := fleetApp(t, m)
			if code, r, stderr := run(append([]string{"apply", "-i", inv, "--yes", "--forks", "1", book}, tt.first...)...); code != 1 {
				t.Fatalf("first run: exit %d, %v\n%s", code, statuses(r), stderr)
			}
			dir, _ := rollout.Dir()
			st, err := rollout.Load(dir, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range tt.fixed {
				delete(m.fail, h)
			}
			m.applied = nil
			code, r, stderr := run(append([]string{"apply", "--resume", st.ID, "--yes", "--forks", "1"}, tt.resume...)...)
			if code != 1 || !slices.Equal(m.applied, tt.wantApplied) {
				t.Errorf("resume: exit %d, applied %v; want exit 1, applied %v\n%s", code, m.applied, tt.wantApplied, stderr)
			}
			if tt.wantStopped == "" && strings.Contains(stderr, "rollout stopped") || !strings.Contains(stderr, tt.wantStopped) {
				t.Errorf("stderr does not say %q:\n%s", tt.wantStopped, stderr)
			}
			if got := r.Summary["hosts"]; got != 5 {
				t.Errorf("the resume reports %d hosts, want the run's 5: %v", got, statuses(r))
			}
		})
	}
}

// TestResumeWhileRunning: a run another pgtune still applies (it holds
// the run's lock) is not continued by a second one, which touches no host.
func TestResumeWhileRunning(t *testing.T) {
	m := newMark("h1")
	run, inv, book := fleetApp(t, m)
	if code, r, stderr := run("apply", "-i", inv, "--yes", "--serial", "5", book); code != 1 {
		t.Fatalf("first run: exit %d, %v\n%s", code, statuses(r), stderr)
	}
	dir, _ := rollout.Dir()
	st, err := rollout.Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	unlock, err := st.Lock() // the other pgtune
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	code, stderr := runBare(m, "apply", "--resume", st.ID, "--yes") // no host reachable: refused before any
	if code != 1 || !strings.Contains(stderr, "is being applied by another pgtune right now") {
		t.Errorf("resume: exit %d\n%s", code, stderr)
	}
}

// TestResumeRefusesBadStateFile: apply --resume from a state file with a
// host state pgtune never writes, or a host listed twice, is refused with
// the file and the line named, before any host is checked, and the file
// is left as it was.
func TestResumeRefusesBadStateFile(t *testing.T) {
	tests := []struct {
		name, old, new, refused string
	}{
		{"unknown host state", `"state": "failed"`, `"state": "half-done"`, `: host "h1": unknown state "half-done"`},
		{"a host twice", `"name": "h2"`, `"name": "h1"`, `: host "h1" is listed twice (first at line `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMark("h1")
			raw, inv, book := fleetAppWith(t, m, nil)
			if code, _, stderr := raw("apply", "-i", inv, "--yes", "--serial", "1,100%", book); code != 1 || !strings.Contains(stderr, "--resume") {
				t.Fatalf("failed canary: exit %d\n%s", code, stderr)
			}
			dir, _ := rollout.Dir()
			st, err := rollout.Load(dir, "")
			if err != nil {
				t.Fatal(err)
			}
			data := readString(t, st.Path())
			edited := strings.Replace(data, tt.old, tt.new, 1)
			if edited == data {
				t.Fatalf("no %s in the state:\n%s", tt.old, data)
			}
			writeFile(t, st.Path(), edited)
			delete(m.fail, "h1")
			m.events = nil
			for _, args := range [][]string{{"apply", "--resume", "--yes"}, {"apply", "--resume", st.ID, "--yes"}} {
				code, _, stderr := raw(args...)
				if code != 1 || !strings.Contains(stderr, "run state "+st.Path()+": line ") || !strings.Contains(stderr, tt.refused) || len(m.events) != 0 {
					t.Errorf("%v: exit %d, events %v; want refused with the file, a line and %q\n%s", args, code, m.events, tt.refused, stderr)
				}
			}
			if got := readString(t, st.Path()); got != edited {
				t.Errorf("the refused resume rewrote the state file:\n%s", got)
			}
		})
	}
}
