package engine

import (
	"context"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/plan"
)

// maker is a module that creates things (Remover): things says which
// exist, kept why one must stay; removed lists what it removed.
type maker struct {
	panicky
	things  map[string]bool
	kept    map[string]string
	fail    bool
	removed *[]string
	hooked  *int
}

func (maker) Name() string { return "maker" }
func (m maker) AfterRollback(context.Context, *Target) error {
	*m.hooked++
	return nil
}
func (maker) Manages(_ *Target, kind, _ string) bool { return kind == "created" }
func (m maker) Removable(_ context.Context, _ *Target, key string) (bool, string, error) {
	if m.fail {
		return false, "", errors.New("cannot read it")
	}
	return m.things[key], m.kept[key], nil
}
func (m maker) Remove(_ context.Context, _ *Target, key string) error {
	delete(m.things, key)
	*m.removed = append(*m.removed, key)
	return nil
}

// TestRecordAndSettleCreated: a created thing is journaled unsettled
// before it is made and settled once its work is done with it; a key the
// engine would refuse to read back is refused up front.
func TestRecordAndSettleCreated(t *testing.T) {
	ctx := context.Background()
	h := newFakeHost()
	tg := fakeTarget(h, "20261130T190000Z-a1b2c3-slots-5432")
	tg.Module = "maker"
	for _, k := range []string{"thing:a", "thing:b", "thing:a"} {
		if err := tg.RecordCreated(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := tg.SettleCreated(ctx, "thing:b", "dropped again"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range tg.Journal.Entries {
		got = append(got, e.Kind+" "+e.Module+" "+e.Key+" "+e.Settled)
	}
	want := []string{"created maker thing:a ", "created maker thing:b dropped again"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("journal %q, want %q", got, want)
	}
	if !strings.Contains(h.Files[testState+"/20261130T190000Z-a1b2c3-slots-5432/journal.json"], `"settled": "dropped again"`) {
		t.Error("the settlement is not saved on the host")
	}
	for _, bad := range []string{"thing:../x", "thing a", ""} {
		if err := tg.RecordCreated(ctx, bad); err == nil {
			t.Errorf("RecordCreated(%q) accepted", bad)
		}
	}
	if err := tg.SettleCreated(ctx, "thing:c", "kept"); err == nil {
		t.Error("settled a thing never recorded")
	}
	if err := tg.SettleCreated(ctx, "thing:a", "kept\x1b[2J"); err == nil {
		t.Error("settled with a control character")
	}
	if err := (&Target{}).RecordCreated(ctx, "thing:a"); err != nil {
		t.Errorf("without a journal: %v", err)
	}
}

// TestRollbackCreated: rollback removes what a run made and never settled
// when the module says it may go, says what it leaves and why otherwise,
// and leaves settled entries alone, even when a later run left the same
// thing unsettled (that one is undone).
func TestRollbackCreated(t *testing.T) {
	const run1, run2 = "20261101T000000Z-aaaaaa-slots-5432", "20261102T000000Z-bbbbbb-slots-5432"
	h := newFakeHost()
	writeJournal(t, h, JournalRecord{RunID: run1, Entries: []JournalEntry{
		{Kind: "created", Module: "maker", Key: "slot:pending"},
		{Kind: "created", Module: "maker", Key: "slot:settled", Settled: "kept: promoted"},
		{Kind: "created", Module: "maker", Key: "slot:again", Settled: "dropped again"},
		{Kind: "created", Module: "maker", Key: "slot:inuse"},
		{Kind: "created", Module: "maker", Key: "slot:gone"},
	}})
	writeJournal(t, h, JournalRecord{RunID: run2, Entries: []JournalEntry{
		{Kind: "created", Module: "maker", Key: "slot:again"},
	}})
	var removed []string
	hooked := 0
	mk := maker{things: map[string]bool{"slot:pending": true, "slot:settled": true, "slot:again": true, "slot:inuse": true},
		kept: map[string]string{"slot:inuse": "in use"}, removed: &removed, hooked: &hooked}
	mods, _ := Registry(mk)
	target := func() *Target {
		return &Target{Name: "fake", Transport: h, Journal: NewJournal("r-check", "fake", testState, h, false),
			StateDir: testState, modules: mods}
	}
	m := rollback{managers: map[string]TargetManager{"maker": mk}, hooks: map[string]RollbackHook{"maker": mk}}
	p, err := m.Check(context.Background(), target(), &rollbackParams{})
	if err != nil {
		t.Fatal(err)
	}
	var changes []string
	for _, c := range p.Changes {
		if c.Kind != plan.KindAction || c.After != "(removed)" {
			t.Errorf("change %+v", c)
		}
		changes = append(changes, c.Target)
	}
	sort.Strings(changes)
	if want := []string{"slot:again", "slot:pending"}; !reflect.DeepEqual(changes, want) {
		t.Errorf("plan removes %q, want %q", changes, want)
	}
	if !hasNoteWith(p.Notes, "slot:inuse: made by a run that did not finish with it, left: in use") {
		t.Errorf("notes %q do not say why slot:inuse stays", p.Notes)
	}
	tg := target()
	if err := m.Apply(context.Background(), tg, p); err != nil {
		t.Fatal(err)
	}
	sort.Strings(removed)
	if want := []string{"slot:again", "slot:pending"}; !reflect.DeepEqual(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	if err := m.Verify(context.Background(), tg, p); err != nil {
		t.Errorf("verify: %v", err)
	}
	// Removing what it made is no reason for the module's hook (pgconf's
	// restarts PostgreSQL).
	if hooked != 0 {
		t.Errorf("the module's rollback hook ran %d time(s) for removals alone", hooked)
	}
	if !mk.things["slot:settled"] || !mk.things["slot:inuse"] {
		t.Errorf("removed a settled or kept thing: %v", mk.things)
	}
	// A module that cannot read the thing fails the host's rollback.
	mk.fail = true
	mods, _ = Registry(mk)
	if _, err := (rollback{managers: map[string]TargetManager{"maker": mk}}).Check(context.Background(), target(), &rollbackParams{}); err == nil || !strings.Contains(err.Error(), "cannot read it") {
		t.Errorf("err = %v", err)
	}
}

func hasNoteWith(notes []string, s string) bool {
	for _, n := range notes {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// TestUnsettledCreated: what a module made and never settled is listed
// from the host's journals, once per key, kept runs and other modules'
// entries left out; a journal rollback would refuse fails the listing.
func TestUnsettledCreated(t *testing.T) {
	const run1, run2 = "20261101T000000Z-aaaaaa-slots-5432", "20261102T000000Z-bbbbbb-slots-5432"
	h := newFakeHost()
	tg := fakeTarget(h, "")
	tg.Journal = nil // check mode
	if got, err := tg.UnsettledCreated(context.Background(), "maker"); err != nil || len(got) != 0 {
		t.Fatalf("no journals: %v, %v", got, err)
	}
	writeJournal(t, h, JournalRecord{RunID: run1, Entries: []JournalEntry{
		{Kind: "created", Module: "maker", Key: "slot:a"},
		{Kind: "created", Module: "maker", Key: "slot:b", Settled: "dropped again"},
		{Kind: "created", Module: "other", Key: "slot:c"},
	}})
	writeJournal(t, h, JournalRecord{RunID: run2, Entries: []JournalEntry{
		{Kind: "created", Module: "maker", Key: "slot:a"},
		{Kind: "created", Module: "maker", Key: "slot:d"},
	}})
	writeJournal(t, h, JournalRecord{RunID: "20261103T000000Z-cccccc-switchover", Kept: KeptRoleChanges, Entries: []JournalEntry{
		{Kind: "created", Module: "maker", Key: "slot:e"},
	}})
	got, err := tg.UnsettledCreated(context.Background(), "maker")
	want := []CreatedLeft{{Run: run1, Key: "slot:a"}, {Run: run2, Key: "slot:d"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("UnsettledCreated = %v, %v; want %v", got, err, want)
	}
	writeJournal(t, h, JournalRecord{RunID: "20261104T000000Z-dddddd", Entries: []JournalEntry{
		{Kind: "created", Module: "maker", Key: "slot:../x"}}})
	if _, err := tg.UnsettledCreated(context.Background(), "maker"); err == nil || !strings.Contains(err.Error(), "not a created key") {
		t.Errorf("a forged journal: err = %v", err)
	}
}
