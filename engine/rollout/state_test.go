package rollout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestStateSaveLoad(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir, err := Dir()
	if err != nil || !strings.HasSuffix(dir, filepath.Join("pgtune", "runs")) {
		t.Fatalf("Dir() = %q, %v", dir, err)
	}
	older := NewState(dir, "20261130T100000Z-aaaaaa", time.Now())
	newer := NewState(dir, "20261130T110000Z-bbbbbb", time.Now())
	newer.Host("db1").State = Verified
	newer.Host("db2").State = Failed
	for _, s := range []*State{newer, older} {
		if err := s.Save(); err != nil {
			t.Fatal(err)
		}
	}
	info, err := os.Stat(newer.Path())
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("state file mode %v, %v; want 0600", info.Mode(), err)
	}
	if d, err := os.Stat(dir); err != nil || d.Mode().Perm() != 0o700 {
		t.Fatalf("state directory mode %v, %v; want 0700", d.Mode(), err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("the directory holds %d entries, want the 2 state files (no temporary left)", len(entries))
	}
	got, err := Load(dir, "")
	if err != nil || got.ID != newer.ID {
		t.Fatalf("Load(latest) = %v, %v; want run %s", got, err, newer.ID)
	}
	if !got.Host("db1").Done() || got.Host("db2").Done() || got.Host("db3").State != NotReached {
		t.Errorf("hosts: %+v", got.Hosts)
	}
	if _, err := Load(dir, "../etc/passwd"); err == nil {
		t.Error("a run id with a path was accepted")
	}
	if _, err := Load(dir, "20990101T000000Z-000000"); err == nil || !strings.Contains(err.Error(), "no run") {
		t.Errorf("missing run: %v", err)
	}
	if _, err := Load(t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "no run to resume") {
		t.Errorf("empty directory: %v", err)
	}
}
