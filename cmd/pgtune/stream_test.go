package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/playbooks"
)

// watchWriter closes seen once what was written holds want.
type watchWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	had := strings.Contains(w.buf.String(), w.want)
	n, err := w.buf.Write(p)
	if !had && strings.Contains(w.buf.String(), w.want) {
		close(w.seen)
	}
	return n, err
}

// TestResultsStreamAsHostsFinish: db2 cannot even connect until db1's
// result is on stdout, so the check only succeeds if each host is shown
// as soon as it is done. The recap and the exit code stay as they were;
// each error is shown once; stderr, not a terminal, gets no progress line
// and no error log line.
func TestResultsStreamAsHostsFinish(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "inv.yml")
	writeFile(t, inv, "all:\n  hosts:\n    db1:\n      connection: local\n    db2:\n      connection: local\n  vars:\n    sysctl_dir: "+dir+"/sysctl.d\n")
	transcript := []byte(profiles[0].transcript())
	log := &commandLog{path: filepath.Join(dir, "host.log")}
	out := &watchWriter{want: "db1: FAILED", seen: make(chan struct{})}
	var errOut bytes.Buffer
	app := newApp()
	app.Stdout, app.Stderr = out, &errOut
	app.Dial = func(ctx context.Context, h *inventory.Host) (transport.Transport, error) {
		if h.Name == "db2" {
			select {
			case <-out.seen:
			case <-ctx.Done():
				return nil, errors.New("db1's result was not shown while db2 was still running")
			}
		}
		return &fakeHost{name: h.Name, transcript: transcript, log: log}, nil
	}
	// The fake host runs no commands: the modules fail on both hosts
	// (reading their sysctl files), after the facts; what counts here is
	// when each result is shown.
	// The fake host has no PostgreSQL: the play names the hosts, or they
	// are skipped (reached only through all).
	book := namedDefaultPlaybook(t, dir)
	if code := app.Run([]string{"check", "-i", inv, "--forks", "2", "--timeout", "2m", book}); code != 1 {
		t.Fatalf("check: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out.buf.String(), errOut.String())
	}
	got := out.buf.String()
	db1, db2, recap := strings.Index(got, "db1: FAILED"), strings.Index(got, "db2: FAILED"), strings.Index(got, "RECAP check")
	if db1 < 0 || db2 < db1 || recap < db2 {
		t.Errorf("want db1's plan, then db2's, then the recap:\n%s", got)
	}
	if strings.Count(got, "fake host db1 runs no commands") != 1 {
		t.Errorf("db1's error is not shown exactly once:\n%s", got)
	}
	if errOut.Len() > 0 {
		t.Errorf("progress line on a stderr that is not a terminal:\n%q", errOut.String())
	}
}

// TestNoDiffFlag: --no-diff shows changed files by name only; --diff (the
// default) with their diff. JSON keeps the diff either way.
func TestNoDiffFlag(t *testing.T) {
	for _, tc := range []struct {
		flags    []string
		wantDiff bool
	}{{nil, true}, {[]string{"--diff"}, true}, {[]string{"--no-diff"}, false}} {
		app, out, errOut, args := hostileApp(t, "", false)
		if code := app.Run(append(append([]string{"check"}, tc.flags...), args...)); code != 2 {
			t.Fatalf("check %v: exit %d\n%s", tc.flags, code, errOut.String())
		}
		if got := strings.Contains(out.String(), "@@ -1,3 +1,2 @@"); got != tc.wantDiff {
			t.Errorf("check %v: diff shown %t, want %t:\n%s", tc.flags, got, tc.wantDiff, out.String())
		}
		if !strings.Contains(out.String(), "postgresql.auto.conf (+0 -1)") {
			t.Errorf("check %v: the file's line is missing:\n%s", tc.flags, out.String())
		}
	}
}

// namedDefaultPlaybook writes the built-in policy with its plays naming
// the inventory's ungrouped hosts instead of all, so hosts without
// PostgreSQL are worked on rather than skipped.
func namedDefaultPlaybook(t *testing.T, dir string) string {
	t.Helper()
	src := string(playbooks.Default)
	if !strings.Contains(src, "hosts: all") {
		t.Fatal("the built-in playbook's plays no longer say hosts: all")
	}
	book := filepath.Join(dir, "named.yml")
	writeFile(t, book, strings.ReplaceAll(src, "hosts: all", "hosts: ungrouped"))
	return book
}
