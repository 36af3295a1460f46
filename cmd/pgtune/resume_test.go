package main

import (
	"bytes"
	"context"
	"errors"
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
	var stdout, stderr bytes.Buffer
	app := newApp()
	app.Modules = []engine.Module{m}
	app.Stdin = strings.NewReader("")
	app.Stdout, app.Stderr = &stdout, &stderr
	app.IsTerminal = func() bool { return false }
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
func TestResumeRefusals(t *testing.T) {
	const secret = "s3cret-Value"
	tests := []struct {
		name          string
		start, resume []string
		editBook      bool
		refused       string // "" when the resume goes through
	}{
		{"the same -e, given another way", []string{"-e", "pw=" + secret + " n=1"}, []string{"-e", "n=1", "-e", "pw=" + secret}, false, ""},
		{"no -e either time", nil, nil, false, ""},
		{"-e left out", []string{"-e", "pw=" + secret}, nil, false, "the extra vars (-e) are not the run's"},
		{"another value", []string{"-e", "pw=" + secret}, []string{"-e", "pw=other"}, false, "the extra vars (-e) are not the run's"},
		{"-e added", nil, []string{"-e", "n=1"}, false, "the extra vars (-e) are not the run's"},
		{"the playbook changed", nil, nil, true, "the playbook changed since the run started"},
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
			if strings.Contains(data, secret) || (len(tt.start) > 0) != (st.ExtraVarsSHA256 != "") {
				t.Errorf("state: extra_vars_sha256 %q; want one exactly with -e, and no value:\n%s", st.ExtraVarsSHA256, data)
			}
			if tt.editBook {
				writeFile(t, book, readString(t, book)+"# edited\n")
			}
			delete(m.fail, "h1")
			m.events = nil
			resume := append([]string{"apply", "--resume", "--yes"}, tt.resume...)
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
			if code, r, stderr := run(resume...); code != 0 || len(m.events) == 0 {
				t.Errorf("resume: exit %d, events %v, hosts %v\n%s", code, m.events, statuses(r), stderr)
			}
		})
	}
}
