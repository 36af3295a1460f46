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
			got, err := Resume(dir, tt.id, Match{})
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

// TestResumeMatch: --resume alone picks the newest unfinished run of the
// inventory, shard and limit given, past newer runs of others, and
// refuses when none is, naming the unfinished runs; a run named is
// refused with another inventory or shard than its own, not with
// another limit (a resume of part of the run).
func TestResumeMatch(t *testing.T) {
	const (
		us    = "20261130T100000Z-aaaaaa"
		usS1  = "20261130T110000Z-bbbbbb"
		eu    = "20261130T120000Z-cccccc"
		usFin = "20261130T130000Z-dddddd"
	)
	dir := t.TempDir()
	for _, r := range []struct{ id, status, inv, shard, limit string }{
		{us, Stopped, "/inv/us.yml", "", "db*"},
		{usS1, Interrupted, "/inv/us.yml", "1/2", ""},
		{eu, Partial, "/inv/eu.yml", "", ""},
		{usFin, Finished, "/inv/us.yml", "", ""},
	} {
		s := NewState(dir, r.id, time.Now())
		s.Status, s.Inventory, s.Shard, s.Limit = r.status, r.inv, r.shard, r.limit
		s.Host("db1").State = Failed
		if err := s.Save(); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		id   string
		want Match
		run  string // the run picked
		err  string
	}{
		{"nothing given: the newest unfinished, partial included", "", Match{}, eu, ""},
		{"an inventory: its newest unfinished run", "", Match{Inventory: "/inv/us.yml"}, usS1, ""},
		{"an inventory and a shard", "", Match{Inventory: "/inv/us.yml", Shard: " 1/2"}, usS1, ""},
		{"a limit", "", Match{Limit: "db*"}, us, ""},
		{"a shard no run has", "", Match{Shard: "2/2"}, "", "no unfinished run was started with --shard 2/2 in " + dir + "; the unfinished runs there: " +
			eu + " (partial, -i /inv/eu.yml), " + usS1 + " (interrupted, -i /inv/us.yml --shard 1/2), " + us + " (stopped, -i /inv/us.yml --limit db*)"},
		{"an inventory no unfinished run has", "", Match{Inventory: "/inv/ap.yml"}, "", "no unfinished run was started with -i /inv/ap.yml"},
		{"named, another inventory", eu, Match{Inventory: "/inv/us.yml"}, "", "--resume " + eu + ": the run was started with -i /inv/eu.yml, not -i /inv/us.yml"},
		{"named, another shard", usS1, Match{Shard: "2/2"}, "", "the run was started with --shard 1/2, not --shard 2/2"},
		{"named, a shard the run had none of", us, Match{Shard: "1/2"}, "", "the run was started with no --shard, not --shard 1/2"},
		{"named, another limit", us, Match{Inventory: "/inv/us.yml", Limit: "db1"}, us, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Resume(dir, tt.id, tt.want)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Resume = %v, %v; want error %q", got, err, tt.err)
				}
				return
			}
			if err != nil || got.ID != tt.run {
				t.Fatalf("Resume = %v, %v; want run %s", got, err, tt.run)
			}
		})
	}
}
