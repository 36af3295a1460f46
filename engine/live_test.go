package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/transport"
)

func TestValidLiveEntry(t *testing.T) {
	good := JournalEntry{Kind: "live", Module: "oom", Key: "oom_score_adj:postmaster:4242:777", Before: "-900"}
	if err := validEntry(good, "/run/x"); err != nil {
		t.Errorf("good entry: %v", err)
	}
	for name, e := range map[string]JournalEntry{
		"path in key":      {Kind: "live", Key: "oom_score_adj:/etc/passwd", Before: "0"},
		"space in key":     {Kind: "live", Key: "oom score", Before: "0"},
		"empty key":        {Kind: "live", Before: "0"},
		"control in value": {Kind: "live", Key: "oom_score_adj:postmaster:1:2", Before: "0\n1"},
		"with a file":      {Kind: "live", Key: "oom_score_adj:postmaster:1:2", Path: "/etc/passwd"},
	} {
		if err := validEntry(e, "/run/x"); err == nil {
			t.Errorf("%s: accepted %+v", name, e)
		}
	}
}

// fakeKeeper keeps live values in a map; a missing key is gone.
type fakeKeeper struct {
	Module
	values map[string]string
}

func (f *fakeKeeper) ReadLive(_ context.Context, _ *Target, key string) (string, bool, error) {
	v, ok := f.values[key]
	return v, ok, nil
}

func (f *fakeKeeper) WriteLive(_ context.Context, _ *Target, key, value string) error {
	f.values[key] = value
	return nil
}

type plainModule struct{ Module }

func TestRollbackLiveValues(t *testing.T) {
	ctx := context.Background()
	k := &fakeKeeper{values: map[string]string{"a:1": "-1000", "b:2": "0"}}
	tg := &Target{modules: map[string]Module{"keeper": k, "plain": plainModule{}}}
	p := &plan.ModulePlan{Module: RollbackModuleName}
	for _, key := range []string{"a:1", "b:2", "gone:3"} {
		s, err := liveKind{}.plan(ctx, tg, JournalEntry{Kind: "live", Module: "keeper", Key: key, Before: "0"}, nil)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if s.change != nil {
			p.Add(*s.change)
		}
		if s.note != "" {
			p.Note(s.note)
		}
	}
	// Only a:1 differs from its previous value; the gone one is a note.
	if len(p.Changes) != 1 || p.Changes[0].Target != "a:1" || p.Changes[0].Before != "-1000" || p.Changes[0].After != "0" {
		t.Fatalf("changes %+v", p.Changes)
	}
	if len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "gone:3") {
		t.Errorf("notes %q", p.Notes)
	}
	e := JournalEntry{Kind: "live", Module: "keeper", Key: "a:1", Before: "0"}
	if err := (liveKind{}).undo(ctx, tg, undoStep{entry: e}); err != nil || k.values["a:1"] != "0" {
		t.Errorf("apply: %v, value %q", err, k.values["a:1"])
	}
	// A module that keeps no live values cannot have journaled one.
	if _, err := (liveKind{}).plan(ctx, tg, JournalEntry{Kind: "live", Module: "plain", Key: "a:1"}, nil); err == nil {
		t.Error("a live entry of a module that keeps none was accepted")
	}
}

// TestSetLiveJournalsFirstValue: the journal on disk holds the value
// before the first change of the run, written before the change.
func TestSetLiveJournalsFirstValue(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	tr := transport.NewLocal()
	tg := &Target{Transport: tr, Module: "oom", Journal: NewJournal("run-1", "h", dir, tr, false)}
	value := "0"
	set := func(v string) func(context.Context) error {
		return func(context.Context) error {
			b, err := os.ReadFile(filepath.Join(dir, "run-1", "journal.json"))
			if err != nil || !strings.Contains(string(b), `"before": "0"`) {
				t.Errorf("journal not saved before the change: %v %s", err, b)
			}
			value = v
			return nil
		}
	}
	if err := tg.SetLive(ctx, "oom_score_adj:postmaster:1:2", value, set("-1000")); err != nil {
		t.Fatal(err)
	}
	if err := tg.SetLive(ctx, "oom_score_adj:postmaster:1:2", value, set("-900")); err != nil {
		t.Fatal(err)
	}
	es := tg.Journal.Entries
	if len(es) != 1 || es[0].Kind != "live" || es[0].Module != "oom" || es[0].Before != "0" || value != "-900" {
		t.Errorf("entries %+v, value %s", es, value)
	}
	if err := tg.SetLive(ctx, "../etc/passwd", "0", set("1")); err == nil {
		t.Error("a key that is not a key was accepted")
	}
}
