package engine

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/transport"
)

const patroniYML = "/etc/patroni/patroni.yml"

// Two secrets: the first sits under a key that names it (mask.Config
// hides it too), the second under one that does not, so only the
// journal's Sensitive mark keeps it out of the report.
const (
	oldSecretYML = "restapi:\n  password: 0ldRestPw\nnote: 0ldOpaqueToken\npostgresql:\n  parameters:\n    shared_buffers: 128MB\n"
	newSecretYML = "restapi:\n  password: NewRestPw\nnote: NewOpaqueToken\npostgresql:\n  parameters:\n    shared_buffers: 4GB\n"
)

var ymlSecrets = []string{"0ldRestPw", "0ldOpaqueToken", "NewRestPw", "NewOpaqueToken"}

// renderRollback renders a rollback plan as the text and JSON reports and
// fails if any secret shows.
func renderRollback(t *testing.T, p *plan.ModulePlan) {
	t.Helper()
	r := &report.Report{Mode: report.ModeRollback, Hosts: []report.Host{{Name: "fake", Status: report.Drift, Changes: report.FromPlan(p.Changes), Notes: p.Notes}}}
	r.Summarize()
	var text, js bytes.Buffer
	if err := report.WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"text": text.String(), "json": js.String()} {
		if !strings.Contains(out, patroniYML) {
			t.Errorf("%s report does not name %s:\n%s", name, patroniYML, out)
		}
		for _, s := range ymlSecrets {
			if strings.Contains(out, s) {
				t.Errorf("%s report shows the secret %q:\n%s", name, s, out)
			}
		}
	}
}

// TestRollbackOfSecretFileShowsNoContent: a file written with
// WriteSecretFile is journaled sensitive; rolling it back plans a
// Sensitive change, and neither the text nor the JSON report shows its
// content; the rollback's own write of it is journaled sensitive too.
func TestRollbackOfSecretFileShowsNoContent(t *testing.T) {
	ctx := context.Background()
	h := newFakeHost()
	h.Files[patroniYML] = oldSecretYML
	h.Modes[patroniYML] = "600 postgres:postgres"
	tg := fakeTarget(h, "20261101T000000Z-aaaaaa")
	if err := tg.WriteSecretFile(ctx, patroniYML, []byte(newSecretYML), transport.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if es := tg.Journal.Entries; len(es) != 1 || !es[0].Sensitive {
		t.Fatalf("journal entries %+v, want one sensitive file entry", es)
	}
	if saved := h.Files[testState+"/20261101T000000Z-aaaaaa/journal.json"]; !strings.Contains(saved, `"sensitive": true`) {
		t.Fatalf("the saved journal lost the mark:\n%s", saved)
	}

	m := rollback{managers: map[string]TargetManager{"linker": linker{}}}
	rt := fakeTarget(h, "20261102T000000Z-bbbbbb")
	p, err := m.Check(ctx, rt, &rollbackParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Changes) != 1 || p.Changes[0].Target != patroniYML || !p.Changes[0].Sensitive {
		t.Fatalf("rollback plan %+v, want one sensitive change of %s", p.Changes, patroniYML)
	}
	renderRollback(t, p)

	if err := m.Apply(ctx, rt, p); err != nil {
		t.Fatal(err)
	}
	if h.Files[patroniYML] != oldSecretYML {
		t.Fatalf("not rolled back: %q", h.Files[patroniYML])
	}
	if es := rt.Journal.Entries; len(es) != 1 || !es[0].Sensitive {
		t.Errorf("rollback journaled its write as %+v, want it sensitive", es)
	}
	// Rolling the rollback back is hidden as well.
	p, err = m.Check(ctx, fakeTarget(h, "r-check"), &rollbackParams{To: "20261102T000000Z-bbbbbb"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Changes {
		if !c.Sensitive {
			t.Errorf("change %s not sensitive", c.Target)
		}
	}
}

// TestSecretWriteMarksEarlierEntry: a file first written plainly, then
// as a secret in the same run, ends up sensitive.
func TestSecretWriteMarksEarlierEntry(t *testing.T) {
	ctx := context.Background()
	h := newFakeHost()
	h.Files[patroniYML] = oldSecretYML
	tg := fakeTarget(h, "20261101T000000Z-aaaaaa")
	if err := tg.WriteFile(ctx, patroniYML, []byte("x\n"), transport.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := tg.WriteSecretFile(ctx, patroniYML, []byte(newSecretYML), transport.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if es := tg.Journal.Entries; len(es) != 1 || !es[0].Sensitive {
		t.Fatalf("journal entries %+v, want one sensitive file entry", es)
	}
	if saved := h.Files[testState+"/20261101T000000Z-aaaaaa/journal.json"]; !strings.Contains(saved, `"sensitive": true`) {
		t.Fatalf("the saved journal lost the mark:\n%s", saved)
	}
}

// TestOldJournalWithoutSensitiveMark: a journal written before the mark
// existed still loads and rolls back; its patroni.yml change is Sensitive
// all the same (journal_secrets.go); when a later run marked the same
// file sensitive, the older run's entry is hidden too.
func TestOldJournalWithoutSensitiveMark(t *testing.T) {
	const run1, run2 = "20261101T000000Z-aaaaaa", "20261102T000000Z-bbbbbb"
	ctx := context.Background()
	h := newFakeHost()
	b1 := testState + "/" + run1 + "/files" + patroniYML
	// Exactly what an older pgtune saved: no "sensitive" key.
	h.Files[testState+"/"+run1+"/journal.json"] = `{"run_id":"` + run1 + `","host":"fake","started":"2026-11-01T00:00:00Z","entries":[` +
		`{"kind":"file","module":"linker","path":"` + patroniYML + `","backup":"` + b1 + `","existed":true}]}`
	h.Files[b1] = oldSecretYML
	h.Files[patroniYML] = newSecretYML
	m := rollback{managers: map[string]TargetManager{"linker": linker{}}}
	p, err := m.Check(ctx, fakeTarget(h, "r-check"), &rollbackParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Changes) != 1 || p.Changes[0].Target != patroniYML || !p.Changes[0].Sensitive || p.Changes[0].After != oldSecretYML {
		t.Fatalf("old journal planned %+v", p.Changes)
	}
	renderRollback(t, p)

	b2 := testState + "/" + run2 + "/files" + patroniYML
	writeJournal(t, h, JournalRecord{RunID: run2, Host: "fake", Entries: []JournalEntry{
		{Kind: "file", Module: "linker", Path: patroniYML, Backup: b2, Existed: true, Sensitive: true}}})
	h.Files[b2] = oldSecretYML
	p, err = m.Check(ctx, fakeTarget(h, "r-check"), &rollbackParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Changes) != 1 || !p.Changes[0].Sensitive {
		t.Fatalf("plan %+v, want the run-1 change sensitive since run 2 marked the file", p.Changes)
	}
	renderRollback(t, p)
}

// TestOldJournalFixtureHidesSecretFiles loads a journal in the format
// pgtune saved before the Sensitive mark (testdata/journal-before-sensitive)
// with four unmarked file entries: the Patroni configuration named
// patroni.yml, one with no telling name (recognised by its content), one
// in JSON that only the facts name as Patroni's, and a plain drop-in.
// Rollback hides the first three in text and JSON, journals their writes
// back as sensitive, and still shows the drop-in's diff.
func TestOldJournalFixtureHidesSecretFiles(t *testing.T) {
	const run = "20261101T000000Z-aaaaaa"
	const (
		member   = "/etc/patroni/member"
		jsonConf = "/srv/pg/cluster-settings"
		dropIn   = "/etc/postgresql/15/main/conf.d/pgtune.conf"
	)
	// Secrets under keys that do not name them, and in a multi-line value.
	memberOld := "scope: demo\nrestapi:\n  listen: 127.0.0.1:8008\npostgresql:\n  pg_hba:\n  - host all all 0/0 md5\n  custom_conf: |\n    M3mberBlockSecret\n"
	memberNew := strings.Replace(memberOld, "M3mberBlockSecret", "M3mberNewSecret", 1)
	jsonOld := `{"scope":"demo","etcd3":{"hosts":"127.0.0.1:2379","credential":"JsonOldSecret"}}` + "\n"
	jsonNew := strings.Replace(jsonOld, "JsonOldSecret", "JsonNewSecret", 1)
	secrets := append([]string{"M3mberBlockSecret", "M3mberNewSecret", "JsonOldSecret", "JsonNewSecret"}, ymlSecrets...)

	fixture, err := os.ReadFile("testdata/journal-before-sensitive/journal.json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(fixture), "sensitive") {
		t.Fatal("the fixture must be in the old format, without the sensitive mark")
	}
	ctx := context.Background()
	h := newFakeHost()
	h.Files[testState+"/"+run+"/journal.json"] = string(fixture)
	for p, c := range map[string][2]string{patroniYML: {oldSecretYML, newSecretYML}, member: {memberOld, memberNew},
		jsonConf: {jsonOld, jsonNew}, dropIn: {"shared_buffers = '128MB'\n", "shared_buffers = '4GB'\n"}} {
		h.Files[testState+"/"+run+"/files"+p] = c[0]
		h.Files[p] = c[1]
	}
	m := rollback{managers: map[string]TargetManager{"linker": linker{}}}
	rt := fakeTarget(h, "20261201T000000Z-cccccc")
	rt.Facts = &facts.Facts{Topology: &facts.Topology{Patroni: &facts.Patroni{ConfigFile: jsonConf}}}
	p, err := m.Check(ctx, rt, &rollbackParams{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{patroniYML: true, member: true, jsonConf: true, dropIn: false}
	if len(p.Changes) != len(want) {
		t.Fatalf("plan %+v, want a change for each of %v", p.Changes, want)
	}
	for _, c := range p.Changes {
		if c.Sensitive != want[c.Target] {
			t.Errorf("%s: Sensitive = %v, want %v", c.Target, c.Sensitive, want[c.Target])
		}
	}
	out := renderBoth(t, p)
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("the reports show the secret %q:\n%s", s, out)
		}
	}
	if !strings.Contains(out, "+shared_buffers = '128MB'") {
		t.Errorf("the drop-in's diff is hidden too:\n%s", out)
	}

	if err := m.Apply(ctx, rt, p); err != nil {
		t.Fatal(err)
	}
	if h.Files[member] != memberOld || h.Files[jsonConf] != jsonOld {
		t.Fatal("not rolled back")
	}
	for _, e := range rt.Journal.Entries {
		if e.Sensitive != want[e.Path] {
			t.Errorf("rollback journaled %s with Sensitive = %v, want %v", e.Path, e.Sensitive, want[e.Path])
		}
	}
}

// renderBoth is a rollback plan's text and JSON reports, concatenated.
func renderBoth(t *testing.T, p *plan.ModulePlan) string {
	t.Helper()
	r := &report.Report{Mode: report.ModeRollback, Hosts: []report.Host{{Name: "fake", Status: report.Drift, Changes: report.FromPlan(p.Changes), Notes: p.Notes}}}
	r.Summarize()
	var text, js bytes.Buffer
	if err := report.WriteText(&text, r); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	return text.String() + js.String()
}
