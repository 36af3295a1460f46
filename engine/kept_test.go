package engine

import (
	"context"
	"strings"
	"testing"
)

// confOnly manages *.conf files only, as pgconf does (never a data
// directory's standby.signal).
type confOnly struct{}

func (confOnly) Manages(_ *Target, kind, target string) bool {
	return kind == "file" && strings.HasSuffix(target, ".conf")
}

// TestRollbackKeptRuns: a run of role changes (a switchover's, kept) is
// never undone: rollback plans only the settings run, says which run it
// keeps, refuses --run naming the kept run, and accepts the kept run's
// standby.signal, which no module manages.
func TestRollbackKeptRuns(t *testing.T) {
	const run, side = "20261101T000000Z-aaaaaa", "20261101T000000Z-aaaaaa-switchover"
	backup := func(run, p string) string { return testState + "/" + run + "/files" + p }
	h := newFakeHost()
	writeJournal(t, h, JournalRecord{RunID: run, Entries: []JournalEntry{
		{Kind: "file", Module: "pgconf", Path: "/etc/a.conf", Backup: backup(run, "/etc/a.conf"), Existed: true},
	}})
	writeJournal(t, h, JournalRecord{RunID: side, Kept: KeptRoleChanges, Entries: []JournalEntry{
		{Kind: "file", Module: "pgconf", Path: "/data/postgresql.auto.conf", Backup: backup(side, "/data/postgresql.auto.conf"), Existed: true, Sensitive: true},
		{Kind: "file", Module: "pgconf", Path: "/data/standby.signal", Backup: backup(side, "/data/standby.signal")},
	}})
	h.Files[backup(run, "/etc/a.conf")] = "old a\n"
	h.Files["/etc/a.conf"] = "new a\n"
	h.Files[backup(side, "/data/postgresql.auto.conf")] = "# auto\n"
	h.Files["/data/postgresql.auto.conf"] = "# auto\nprimary_conninfo = 'host=db2 password=x'\n"
	h.Files["/data/standby.signal"] = ""
	m := rollback{managers: map[string]TargetManager{"pgconf": confOnly{}}}

	for _, to := range []string{"", run} {
		p, err := m.Check(context.Background(), fakeTarget(h, "r-check"), &rollbackParams{To: to})
		if err != nil {
			t.Fatalf("to %q: %v", to, err)
		}
		if len(p.Changes) != 1 || p.Changes[0].Target != "/etc/a.conf" {
			t.Errorf("to %q: plan %+v, want /etc/a.conf only", to, p.Changes)
		}
		notes := strings.Join(p.Notes, "\n")
		if !strings.Contains(notes, "run "+side+" is kept, not undone: "+KeptRoleChanges) || !strings.Contains(notes, "undoing run(s) "+run+"\n") && !strings.HasSuffix(notes, "undoing run(s) "+run) {
			t.Errorf("to %q: notes %q", to, p.Notes)
		}
	}
	_, err := m.Check(context.Background(), fakeTarget(h, "r-check"), &rollbackParams{To: side})
	if err == nil || !strings.Contains(err.Error(), "run "+side+" is kept: "+KeptRoleChanges+"; pgtune rollback never undoes it") {
		t.Fatalf("--run on the kept run: %v", err)
	}
	_, err = m.Check(context.Background(), fakeTarget(h, "r-check"), &rollbackParams{To: "nope"})
	if err == nil || !strings.Contains(err.Error(), "(runs: "+run+")") {
		t.Fatalf("an unknown run lists the kept one: %v", err)
	}

	tg := fakeTarget(h, "20261103T000000Z-cccccc")
	p, err := m.Check(context.Background(), tg, &rollbackParams{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(context.Background(), tg, p); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(context.Background(), tg, p); err != nil {
		t.Fatal(err)
	}
	if _, ok := h.Files["/data/standby.signal"]; !ok || !strings.Contains(h.Files["/data/postgresql.auto.conf"], "primary_conninfo") || h.Files["/etc/a.conf"] != "old a\n" {
		t.Errorf("after rollback: standby.signal there %v, auto.conf %q, a.conf %q", ok, h.Files["/data/postgresql.auto.conf"], h.Files["/etc/a.conf"])
	}

	// Only kept runs: nothing to roll back.
	h2 := newFakeHost()
	writeJournal(t, h2, JournalRecord{RunID: side, Kept: KeptRoleChanges, Entries: []JournalEntry{
		{Kind: "file", Module: "pgconf", Path: "/data/standby.signal", Backup: backup(side, "/data/standby.signal")}}})
	p, err = m.Check(context.Background(), fakeTarget(h2, "r-check"), &rollbackParams{})
	if err != nil || p.HasChanges() || !strings.Contains(strings.Join(p.Notes, "\n"), "every run pgtune made here is kept: nothing to roll back") {
		t.Fatalf("only kept: %v %+v", err, p)
	}
}
