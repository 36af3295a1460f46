package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/transport"
)

// TestFactsStreamAsHostsFinish: db2 cannot connect until db1's facts are
// on stdout, so facts succeeds only if each host is shown as soon as it
// is done; the clusters section, which needs every host, comes last.
func TestFactsStreamAsHostsFinish(t *testing.T) {
	dir := t.TempDir()
	inv := filepath.Join(dir, "inv.yml")
	writeFile(t, inv, "all:\n  hosts:\n    db1:\n      connection: local\n    db2:\n      connection: local\n")
	transcript := []byte(profiles[0].transcript())
	log := &commandLog{path: filepath.Join(dir, "host.log")}
	out := &watchWriter{want: "db1:\n", seen: make(chan struct{})}
	var errOut bytes.Buffer
	app := newApp()
	app.Stdout, app.Stderr = out, &errOut
	app.Dial = func(ctx context.Context, h *inventory.Host) (transport.Transport, error) {
		if h.Name == "db2" {
			select {
			case <-out.seen:
			case <-ctx.Done():
				return nil, errors.New("db1's facts were not shown while db2 was still running")
			}
		}
		return &fakeHost{name: h.Name, transcript: transcript, log: log}, nil
	}
	if code := app.Run([]string{"facts", "-i", inv, "--forks", "2", "--timeout", "2m"}); code != 0 {
		t.Fatalf("facts: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.buf.String(), errOut.String())
	}
	got := out.buf.String()
	db1, db2 := strings.Index(got, "db1:\n"), strings.Index(got, "db2:\n")
	if db1 < 0 || db2 < db1 || strings.Count(got, "db1:\n") != 1 || strings.Count(got, "db2:\n") != 1 {
		t.Errorf("want db1's facts once, then db2's once:\n%s", got)
	}
	if errOut.Len() > 0 {
		t.Errorf("progress line on a stderr that is not a terminal:\n%q", errOut.String())
	}
}
