package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/internal/safedir"
	"github.com/pgtune/pgtune/internal/syspaths"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

// TestIsolated: the tests see an empty home of their own, an empty
// ansible.cfg and a state directory in it, no agent, no system file.
func TestIsolated(t *testing.T) {
	home := os.Getenv("HOME")
	if !strings.HasPrefix(filepath.Base(home), "pgtune-test-home-") {
		t.Fatalf("HOME %s", home)
	}
	entries, err := os.ReadDir(home)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"ansible.cfg", "state"}) {
		t.Errorf("home holds %v", names)
	}
	if cfg := os.Getenv("ANSIBLE_CONFIG"); cfg != filepath.Join(home, "ansible.cfg") {
		t.Errorf("ANSIBLE_CONFIG %s", cfg)
	} else if fi, err := os.Stat(cfg); err != nil || fi.Size() != 0 {
		t.Errorf("ansible.cfg: %v %v", fi, err)
	}
	if s := os.Getenv("XDG_STATE_HOME"); s != filepath.Join(home, "state") {
		t.Errorf("XDG_STATE_HOME %s", s)
	}
	// Run states go under t.TempDir and XDG_STATE_HOME: both must pass the
	// run state directory's rule, whatever the machine's TMPDIR.
	for _, d := range []string{t.TempDir(), os.Getenv("XDG_STATE_HOME")} {
		if level, why, err := safedir.Above(d); err != nil || why != "" {
			t.Errorf("%s: %s %s %v", d, level, why, err)
		}
	}
	for _, k := range AnsibleEnv {
		if s, ok := os.LookupEnv(k); ok {
			t.Errorf("%s %s", k, s)
		}
	}
	if syspaths.SSHConfig != "" || syspaths.AnsibleConfig != "" {
		t.Errorf("system files %q %q", syspaths.SSHConfig, syspaths.AnsibleConfig)
	}
	if _, err := exec.LookPath("go"); err == nil {
		for _, k := range goDirs {
			if v := os.Getenv(k); v == "" || strings.HasPrefix(v, home) {
				t.Errorf("%s=%q, want the real home's", k, v)
			}
		}
	}
}

// TestLDFlags: a binary linked with LDFlags reads neither system file.
func TestLDFlags(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := filepath.Join(t.TempDir(), "syspaths")
	if out, err := exec.Command("go", "build", "-buildvcs=false", "-ldflags", LDFlags, "-o", bin, "./testdata/syspaths").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil || string(out) != "\"\" \"\"\n" {
		t.Errorf("linked with LDFlags: %q %v", out, err)
	}
}

// TestIsolatedUnderAnOpenTMPDIR: with TMPDIR a directory anyone may write
// and not sticky, the tests still get scratch directories that pass the
// run state directory's rule (TestIsolated, run again under it).
func TestIsolatedUnderAnOpenTMPDIR(t *testing.T) {
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestIsolated$", "-test.count", "1")
	cmd.Env = append(os.Environ(), "TMPDIR="+open)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("TestIsolated with TMPDIR %s (0777): %v\n%s", open, err, out)
	}
	if ents, _ := os.ReadDir(open); len(ents) != 0 {
		t.Errorf("left in TMPDIR: %v", ents)
	}
}
