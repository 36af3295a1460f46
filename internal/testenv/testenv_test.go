package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

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
