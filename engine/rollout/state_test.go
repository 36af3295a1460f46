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

// TestResume: --resume alone continues the newest run that did not finish,
// never a finished one; a finished run named by its id is resumed only
// when a host is left to retry.
func TestResume(t *testing.T) {
	type run struct {
		id, status string
		hosts      map[string]string // name → state
	}
	const (
		old   = "20261130T100000Z-aaaaaa"
		mid   = "20261130T110000Z-bbbbbb"
		newer = "20261130T120000Z-cccccc"
	)
	done := map[string]string{"db1": Verified, "db2": PendingRestart}
	failed := map[string]string{"db1": Verified, "db2": Failed}
	tests := []struct {
		name    string
		runs    []run
		corrupt string // a run whose file is not a state
		id      string
		want    string // the run picked
		err     string
	}{
		{"the newest run when it is interrupted", []run{{old, Stopped, failed}, {mid, Interrupted, failed}}, "", "", mid, ""},
		{"an interrupted run behind a newer finished one", []run{{old, Interrupted, failed}, {mid, Finished, done}, {newer, Finished, failed}}, "", "", old, ""},
		{"stopped by the budget", []run{{old, Finished, done}, {mid, Stopped, failed}}, "", "", mid, ""},
		{"killed: its status stayed running", []run{{old, Running, failed}, {mid, Finished, done}}, "", "", old, ""},
		{"every run finished, the newest with a failed host", []run{{old, Finished, done}, {mid, Finished, done}, {newer, Finished, failed}}, "", "", "",
			"left 1 host not verified: --resume " + newer + " retries them"},
		{"every run finished, every host verified", []run{{old, Finished, failed}, {mid, Finished, done}}, "", "", "",
			"nothing to resume in"},
		{"no run at all", nil, "", "", "", "no run to resume"},
		{"an unreadable newer run is not skipped", []run{{old, Interrupted, failed}}, mid, "", "", "name the run to resume"},
		{"a finished run named, a host to retry", []run{{old, Finished, failed}, {mid, Interrupted, failed}}, "", old, old, ""},
		{"a finished run named, every host verified", []run{{old, Finished, done}}, "", old, "", "--resume " + old + ": nothing to resume"},
		{"an interrupted run named", []run{{old, Interrupted, failed}, {mid, Interrupted, failed}}, "", old, old, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, r := range tt.runs {
				s := NewState(dir, r.id, time.Now())
				s.Status = r.status
				for name, state := range r.hosts {
					s.Host(name).State = state
				}
				if err := s.Save(); err != nil {
					t.Fatal(err)
				}
			}
			if tt.corrupt != "" {
				if err := os.WriteFile(filepath.Join(dir, tt.corrupt+".json"), []byte("{"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Resume(dir, tt.id)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Resume = %v, %v; want error %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got.ID != tt.want {
				t.Fatalf("Resume = %v, %v; want run %s", got, err, tt.want)
			}
		})
	}
}
