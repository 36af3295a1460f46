package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/transport"
)

// TestDemoAuditsThisMachine runs the Makefile's demo command, as written
// there, against a machine with no PostgreSQL (a recorded host's facts):
// it must audit this machine's kernel side, not skip it (a host that only
// an inventory's "all" reaches is skipped when no cluster runs there), and
// an ansible.cfg in the working directory must not send it elsewhere.
func TestDemoAuditsThisMachine(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^demo:.*\n\t@((?:[A-Z_]+=\S+ )*)\./\$\(BIN\) (check[^;]*);`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("no pgtune check command in the Makefile's demo target")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, filepath.Join(dir, "ansible.cfg"), "[defaults]\ninventory = fleet.ini\n")
	writeFile(t, filepath.Join(dir, "fleet.ini"), "db1 ansible_host=10.0.0.1\n")
	for _, kv := range strings.Fields(string(m[1])) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	transcript := []byte(profiles[0].transcript())
	log := &commandLog{path: filepath.Join(dir, "host.log")}
	var mu sync.Mutex
	var dialed []string
	app := newApp()
	var out, errOut bytes.Buffer
	app.Stdout, app.Stderr = &out, &errOut
	app.IsTerminal = func() bool { return false }
	app.Dial = func(_ context.Context, h *inventory.Host) (transport.Transport, error) {
		mu.Lock()
		dialed = append(dialed, h.Name)
		mu.Unlock()
		return &fakeHost{name: h.Name, transcript: transcript, log: log}, nil
	}
	// Its paths are the project's (make runs it from the root).
	args := strings.Fields(string(m[2]))
	for i := 1; i < len(args); i++ {
		if (args[i-1] == "-i" || args[i-1] == "--inventory") && !filepath.IsAbs(args[i]) {
			args[i] = filepath.Join(root, args[i])
		}
	}
	code := app.Run(args)
	got := out.String()
	if !slices.Equal(dialed, []string{"localhost"}) {
		t.Fatalf("pgtune %s reached %v, want localhost alone\n%s%s", m[2], dialed, got, errOut.String())
	}
	if strings.Contains(got, "skipped") || !strings.Contains(got, "hugepages") {
		t.Errorf("pgtune %s (exit %d) did not audit this machine's kernel side:\n%s%s", m[2], code, got, errOut.String())
	}
}
