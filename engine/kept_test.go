package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/fakehost"
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

func TestCarryEdit(t *testing.T) {
	for _, tc := range []struct {
		name, base, before, after, want string
		ok                              bool
	}{
		{"a line replaced between the same neighbours",
			"a\nconninfo=old\nb\n", "a\nconninfo=old\nb\ninclude\n", "a\nconninfo=new\nb\ninclude\n", "a\nconninfo=new\nb\n", true},
		{"a line appended at the end",
			"a\n", "a\ninclude\n", "a\ninclude\nconninfo=new\n", "", false},
		{"appended after a last line the base ends with too",
			"a\ninclude\n", "a\ninclude\n", "a\ninclude\nconninfo=new\n", "a\ninclude\nconninfo=new\n", true},
		{"no change", "x\n", "y\n", "y\n", "x\n", true},
		{"the old line is not in the base", "a\nconninfo=other\nb\n", "a\nconninfo=old\nb\n", "a\nconninfo=new\nb\n", "", false},
		{"twice in the base", "a\nc=1\nb\na\nc=1\nb\n", "a\nc=1\nb\n", "a\nc=2\nb\n", "", false},
		{"first line", "c=1\nb\n", "c=1\nb\nx\n", "c=2\nb\nx\n", "c=2\nb\n", true},
	} {
		got, ok := carryEdit(tc.base, tc.before, tc.after)
		if ok != tc.ok || ok && got != tc.want {
			t.Errorf("%s: got %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// TestRollbackCarriesKeptEdit: a standby's postgresql.conf, changed by
// the settings run (an include line) and then by the switchover (kept:
// primary_conninfo repointed), is put back without the include line but
// with the new primary_conninfo; a kept edit that does not fit makes the
// rollback refuse, nothing done.
func TestRollbackCarriesKeptEdit(t *testing.T) {
	const run, side = "20261101T000000Z-aaaaaa", "20261101T000000Z-aaaaaa-switchover"
	const conf = "/data/postgresql.conf"
	backup := func(run, p string) string { return testState + "/" + run + "/files" + p }
	h := newFakeHost()
	writeJournal(t, h, JournalRecord{RunID: run, Entries: []JournalEntry{
		{Kind: "file", Module: "pgconf", Path: conf, Backup: backup(run, conf), Existed: true}}})
	writeJournal(t, h, JournalRecord{RunID: side, Kept: KeptRoleChanges, Entries: []JournalEntry{
		{Kind: "file", Module: "pgconf", Path: conf, Backup: backup(side, conf), Existed: true, Sensitive: true}}})
	h.Files[backup(run, conf)] = "port = 5433\nprimary_conninfo = 'host=old'\ncluster_name = 's2'\n"
	h.Files[backup(side, conf)] = "port = 5433\nprimary_conninfo = 'host=old'\ncluster_name = 's2'\ninclude_dir = 'conf.d'\n"
	h.Files[conf] = "port = 5433\nprimary_conninfo = 'host=new'\ncluster_name = 's2'\ninclude_dir = 'conf.d'\n"
	m := rollback{managers: map[string]TargetManager{"pgconf": confOnly{}}}
	tg := fakeTarget(h, "20261103T000000Z-cccccc")
	p, err := m.Check(context.Background(), tg, &rollbackParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Changes) != 1 || !p.Changes[0].Sensitive {
		t.Fatalf("plan %+v: want the one file, sensitive", p.Changes)
	}
	if err := m.Apply(context.Background(), tg, p); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(context.Background(), tg, p); err != nil {
		t.Fatal(err)
	}
	if want := "port = 5433\nprimary_conninfo = 'host=new'\ncluster_name = 's2'\n"; h.Files[conf] != want {
		t.Errorf("after rollback:\n%s\nwant\n%s", h.Files[conf], want)
	}

	h.Files[conf] = "port = 5433\nprimary_conninfo = 'host=new'\ncluster_name = 's2'\ninclude_dir = 'conf.d'\n"
	h.Files[backup(run, conf)] = "port = 5433\nprimary_conninfo = 'host=elsewhere'\ncluster_name = 's2'\n"
	_, err = m.Check(context.Background(), fakeTarget(h, "r-check"), &rollbackParams{})
	if err == nil || !strings.Contains(err.Error(), "/data/postgresql.conf: kept run "+side+" changed it since, and its change does not fit") {
		t.Fatalf("an edit that does not fit: %v", err)
	}
}

// TestCarryKeptReadErrors: a kept run's backup that is gone, or that
// cannot be read, fails the rollback's check with the file named once
// ("read FILE: …"), never "<nil>" for a missing file.
func TestCarryKeptReadErrors(t *testing.T) {
	const run, side = "20261101T000000Z-aaaaaa", "20261101T000000Z-aaaaaa-switchover"
	const conf = "/data/postgresql.conf"
	backup := func(run, p string) string { return testState + "/" + run + "/files" + p }
	kept := backup(side, conf)
	for _, tc := range []struct {
		name string
		host func(h *fakehost.Host)
		want string
	}{
		{"missing", func(h *fakehost.Host) { delete(h.Files, kept) }, "read " + kept + ": no such file"},
		{"unreadable", func(h *fakehost.Host) {
			h.Fail = func(op transport.Op, args []string) string {
				if op == transport.OpReadFile && len(args) > 0 && args[0] == kept {
					return "cat: Permission denied"
				}
				return ""
			}
		}, "read " + kept + ": "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost()
			writeJournal(t, h, JournalRecord{RunID: run, Entries: []JournalEntry{
				{Kind: "file", Module: "pgconf", Path: conf, Backup: backup(run, conf), Existed: true}}})
			writeJournal(t, h, JournalRecord{RunID: side, Kept: KeptRoleChanges, Entries: []JournalEntry{
				{Kind: "file", Module: "pgconf", Path: conf, Backup: kept, Existed: true}}})
			h.Files[backup(run, conf)] = "port = 5433\n"
			h.Files[kept] = "port = 5433\ninclude_dir = 'conf.d'\n"
			h.Files[conf] = "port = 5433\ninclude_dir = 'conf.d'\n"
			tc.host(h)
			m := rollback{managers: map[string]TargetManager{"pgconf": confOnly{}}}
			_, err := m.Check(context.Background(), fakeTarget(h, "20261103T000000Z-cccccc"), &rollbackParams{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Count(err.Error(), "read "+kept) != 1 || strings.Contains(err.Error(), "<nil>") {
				t.Errorf("check: %v\nwant %q, the file named once", err, tc.want)
			}
		})
	}
}
