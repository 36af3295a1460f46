package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/fakehost"
)

const (
	testState = "/var/lib/pgtune/runs"
	thpPath   = "/sys/kernel/mm/transparent_hugepage/enabled"
)

// linker is a module that declares a linked pair of kernel keys, as
// overcommit does, and manages everything (rollback asks).
type linker struct{ panicky }

func (linker) Name() string { return "linker" }
func (linker) LinkedSysctls() map[string][]string {
	return map[string][]string{"vm.overcommit_kbytes": {"vm.overcommit_ratio"}, "vm.overcommit_ratio": {"vm.overcommit_kbytes"}}
}
func (linker) Manages(*Target, string, string) bool { return true }

// newFakeHost is a host with a config file, the overcommit pair (the
// kernel zeroes one when the other is written) and a THP setting.
func newFakeHost() *fakehost.Host {
	h := fakehost.New()
	h.StateDir = testState
	h.Files["/etc/a.conf"] = "old a\n"
	h.Modes["/etc/a.conf"] = "600 postgres:postgres"
	h.Files["/etc/before.conf"] = "before\n"
	h.Sysctl["vm.overcommit_kbytes"] = "0"
	h.Sysctl["vm.overcommit_ratio"] = "50"
	h.Sysfs[thpPath] = "always madvise [never]"
	h.OnSysctl = func(sysctl map[string]string, key, value string) (string, error) {
		switch key {
		case "vm.overcommit_kbytes":
			sysctl["vm.overcommit_ratio"] = "0"
		case "vm.overcommit_ratio":
			sysctl["vm.overcommit_kbytes"] = "0"
		}
		return value, nil
	}
	return h
}

func fakeTarget(h *fakehost.Host, run string) *Target {
	mods, _ := Registry(linker{})
	return &Target{Name: "fake", Transport: h, Journal: NewJournal(run, "fake", testState, h, false),
		StateDir: testState, Module: "linker", modules: mods}
}

// changeAll makes one change of every kind through the target's journaled
// operations. The sysfs write stands for Target.SetSysfs: it records the
// entry as that operation does.
func changeAll(t *testing.T, ctx context.Context, h *fakehost.Host, tg *Target) {
	t.Helper()
	steps := []func() error{
		func() error { return tg.WriteFile(ctx, "/etc/a.conf", []byte("new a\n"), transport.WriteOptions{}) },
		func() error { return tg.WriteFile(ctx, "/etc/new.conf", []byte("x\n"), transport.WriteOptions{}) },
		func() error { return tg.SetSysctl(ctx, "vm.overcommit_kbytes", "1000") },
		func() error {
			if err := tg.Journal.record(ctx, JournalEntry{Kind: "sysfs", Module: tg.Module, Path: thpPath, Before: "never"}); err != nil {
				return err
			}
			h.Lock()
			h.Sysfs[thpPath] = "always [madvise] never"
			h.Unlock()
			return nil
		},
		func() error { return tg.Service(ctx, "", "daemon-reload") },
		// Second changes of the same targets are not recorded again.
		func() error { return tg.WriteFile(ctx, "/etc/a.conf", []byte("newer a\n"), transport.WriteOptions{}) },
		func() error { return tg.SetSysctl(ctx, "vm.overcommit_kbytes", "2000") },
		func() error { return tg.Service(ctx, "", "daemon-reload") },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("change %d: %v", i+1, err)
		}
	}
}

// changes returns the host's log lines that change something, from line
// from on.
func changes(h *fakehost.Host, from int) []string {
	h.Lock()
	defer h.Unlock()
	var out []string
	for _, l := range h.Log[from:] {
		for _, p := range []string{"write ", "remove ", "sysctl ", "sysfs ", "service "} {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
			}
		}
	}
	return out
}

func TestJournalRecordsOncePerTarget(t *testing.T) {
	ctx := context.Background()
	h := newFakeHost()
	tg := fakeTarget(h, "20261130T190000Z-a1b2c3")
	changeAll(t, ctx, h, tg)
	want := []JournalEntry{
		{Kind: "file", Module: "linker", Path: "/etc/a.conf", Backup: testState + "/20261130T190000Z-a1b2c3/files/etc/a.conf", Existed: true},
		{Kind: "file", Module: "linker", Path: "/etc/new.conf", Backup: testState + "/20261130T190000Z-a1b2c3/files/etc/new.conf"},
		{Kind: "sysctl", Module: "linker", Key: "vm.overcommit_kbytes", Before: "0"},
		{Kind: "sysctl", Module: "linker", Key: "vm.overcommit_ratio", Before: "50"},
		{Kind: "sysfs", Module: "linker", Path: thpPath, Before: "never"},
		{Kind: "service", Module: "linker", Action: "daemon-reload"},
	}
	if !reflect.DeepEqual(tg.Journal.Entries, want) {
		t.Fatalf("entries:\n%+v\nwant\n%+v", tg.Journal.Entries, want)
	}
	// What is saved on the host is what is in memory, and valid.
	var saved JournalRecord
	if err := json.Unmarshal([]byte(h.Files[tg.Journal.Dir()+"/journal.json"]), &saved); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(saved.Entries, want) || saved.RunID != tg.RunID() {
		t.Errorf("saved %+v", saved)
	}
	if err := validateJournal(saved, "20261130T190000Z-a1b2c3", testState, func(JournalEntry) error { return nil }); err != nil {
		t.Errorf("own journal refused: %v", err)
	}
	if got := h.Files[want[0].Backup]; got != "old a\n" {
		t.Errorf("backup of a.conf: %q", got)
	}
}

func TestUndoSince(t *testing.T) {
	ctx := context.Background()
	h := newFakeHost()
	tg := fakeTarget(h, "20261130T190000Z-a1b2c3")
	// Changed before the mark: stays changed.
	if err := tg.WriteFile(ctx, "/etc/before.conf", []byte("changed\n"), transport.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	mark := tg.Mark()
	changeAll(t, ctx, h, tg)
	from := len(h.Log)
	if err := tg.UndoSince(ctx, mark); err != nil {
		t.Fatal(err)
	}
	// Newest first; kbytes, zero before while the ratio was not, comes
	// back with the ratio; the daemon-reload runs once the files are back.
	want := []string{
		"sysfs " + thpPath + "=never",
		"sysctl vm.overcommit_ratio=50",
		"remove /etc/new.conf",
		"write /etc/a.conf",
		"service daemon-reload",
	}
	if got := changes(h, from); !reflect.DeepEqual(got, want) {
		t.Errorf("undo ran\n%q\nwant\n%q", got, want)
	}
	for p, want := range map[string]string{"/etc/a.conf": "old a\n", "/etc/before.conf": "changed\n"} {
		if got := h.Files[p]; got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	if m := h.Modes["/etc/a.conf"]; m != "600 postgres:postgres" {
		t.Errorf("a.conf restored with %s", m)
	}
	if _, ok := h.Files["/etc/new.conf"]; ok {
		t.Error("a file that did not exist is still there")
	}
	if k, r := h.Sysctl["vm.overcommit_kbytes"], h.Sysctl["vm.overcommit_ratio"]; k != "0" || r != "50" {
		t.Errorf("kbytes=%s ratio=%s, want 0 and 50", k, r)
	}
	if tg.Module != "linker" {
		t.Errorf("undo left the target's module at %q", tg.Module)
	}
	// Undoing again finds everything as before and changes nothing.
	from = len(h.Log)
	if err := tg.UndoSince(ctx, mark); err != nil {
		t.Fatal(err)
	}
	if got := changes(h, from); len(got) != 0 {
		t.Errorf("second undo changed %q", got)
	}
}

func TestUndoGoesOnPastFailures(t *testing.T) {
	ctx := context.Background()
	h := newFakeHost()
	tg := fakeTarget(h, "r1")
	mark := tg.Mark()
	changeAll(t, ctx, h, tg)
	h.Fail = func(op transport.Op, args []string) string {
		if op == fakehost.OpSetSysctl {
			return "sysctl: permission denied"
		}
		return ""
	}
	err := tg.UndoSince(ctx, mark)
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("err = %v", err)
	}
	if h.Files["/etc/a.conf"] != "old a\n" {
		t.Error("a failed kernel value stopped the files from coming back")
	}
}

func TestUndoWithoutJournal(t *testing.T) {
	tg := &Target{Name: "fake", Transport: newFakeHost()}
	if err := tg.UndoSince(context.Background(), tg.Mark()); err == nil || !strings.Contains(err.Error(), "no journal") {
		t.Fatalf("err = %v", err)
	}
}

// TestFakeKnowsEngineOps keeps the fake's names of the engine's operations
// in step with the engine's.
func TestFakeKnowsEngineOps(t *testing.T) {
	pairs := [][2]transport.Op{
		{OpRecordFile, fakehost.OpRecordFile}, {OpRunDir, fakehost.OpRunDir}, {OpReadJournals, fakehost.OpReadJournals},
		{OpSetSysctl, fakehost.OpSetSysctl}, {OpWriteSysfs, fakehost.OpWriteSysfs}, {OpStat, fakehost.OpStat}, {OpService, fakehost.OpService},
		{OpStateDir, fakehost.OpStateDir}, {OpLockFifo, fakehost.OpLockFifo}, {OpLockHold, fakehost.OpLockHold},
		{OpLockAnswer, fakehost.OpLockAnswer}, {OpLockCleanup, fakehost.OpLockCleanup},
	}
	for _, p := range pairs {
		if p[0] != p[1] {
			t.Errorf("engine names %q, the fake %q", p[0], p[1])
		}
	}
}

// writeJournal saves a journal on the fake host as a run would.
func writeJournal(t *testing.T, h *fakehost.Host, j JournalRecord) {
	t.Helper()
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	h.Files[testState+"/"+j.RunID+"/journal.json"] = string(b)
}

func TestRollbackCheck(t *testing.T) {
	const run1, run2 = "20261101T000000Z-aaaaaa", "20261102T000000Z-bbbbbb"
	backup := func(run, p string) string { return testState + "/" + run + "/files" + p }
	h := newFakeHost()
	// Run 1 wrote a.conf and created new.conf, set the pair and THP; run 2
	// changed a.conf again.
	writeJournal(t, h, JournalRecord{RunID: run1, Entries: []JournalEntry{
		{Kind: "file", Module: "linker", Path: "/etc/a.conf", Backup: backup(run1, "/etc/a.conf"), Existed: true},
		{Kind: "file", Module: "linker", Path: "/etc/new.conf", Backup: backup(run1, "/etc/new.conf")},
		{Kind: "sysctl", Module: "linker", Key: "vm.overcommit_kbytes", Before: "0"},
		{Kind: "sysctl", Module: "linker", Key: "vm.overcommit_ratio", Before: "50"},
		{Kind: "sysfs", Module: "linker", Path: thpPath, Before: "never"},
		{Kind: "service", Module: "linker", Action: "daemon-reload"},
	}})
	writeJournal(t, h, JournalRecord{RunID: run2, Entries: []JournalEntry{
		{Kind: "file", Module: "linker", Path: "/etc/a.conf", Backup: backup(run2, "/etc/a.conf"), Existed: true},
	}})
	h.Files[backup(run1, "/etc/a.conf")] = "old a\n"
	h.Files[backup(run2, "/etc/a.conf")] = "run1 a\n"
	h.Files["/etc/a.conf"] = "run2 a\n"
	h.Files["/etc/new.conf"] = "x\n"
	h.Sysctl["vm.overcommit_kbytes"], h.Sysctl["vm.overcommit_ratio"] = "1000", "0"
	h.Sysfs[thpPath] = "always [madvise] never"

	m := rollback{managers: map[string]TargetManager{"linker": linker{}}}
	describe := func(p *plan.ModulePlan) []string {
		var out []string
		for _, c := range p.Changes {
			after := c.After
			if c.Kind == plan.KindFile && after != "(removed)" {
				after = strings.TrimSpace(after)
			}
			out = append(out, fmt.Sprintf("%s %s→%s", c.Target, strings.TrimSpace(c.Before), after))
		}
		return out
	}
	for _, tc := range []struct {
		to   string
		want []string
	}{
		{to: "", want: []string{
			"/sys/kernel/mm/transparent_hugepage/enabled madvise→never",
			"vm.overcommit_ratio 0→50", // kbytes comes back with it
			"/etc/new.conf x→(removed)",
			"/etc/a.conf run2 a→old a",
			"systemctl daemon-reload →run again once the above is back",
		}},
		{to: run2, want: []string{"/etc/a.conf run2 a→run1 a"}},
	} {
		t.Run("to "+tc.to, func(t *testing.T) {
			p, err := m.Check(context.Background(), fakeTarget(h, "r-check"), &rollbackParams{To: tc.to})
			if err != nil {
				t.Fatal(err)
			}
			if got := describe(p); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
	t.Run("apply then nothing left", func(t *testing.T) {
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
		if h.Files["/etc/a.conf"] != "old a\n" || h.Sysctl["vm.overcommit_kbytes"] != "0" || h.Sysctl["vm.overcommit_ratio"] != "50" {
			t.Errorf("host after rollback: a.conf %q, kbytes %s, ratio %s", h.Files["/etc/a.conf"], h.Sysctl["vm.overcommit_kbytes"], h.Sysctl["vm.overcommit_ratio"])
		}
		if got := h.Services; !reflect.DeepEqual(got, []string{"daemon-reload"}) {
			t.Errorf("services run: %q", got)
		}
	})
	t.Run("forged entry refused", func(t *testing.T) {
		writeJournal(t, h, JournalRecord{RunID: "20261104T000000Z-dddddd", Entries: []JournalEntry{
			{Kind: "service", Module: "linker", Unit: "x.service", Action: "stop"}}})
		_, err := m.Check(context.Background(), fakeTarget(h, "r-check"), &rollbackParams{})
		if err == nil || !strings.Contains(err.Error(), `service action "stop" is not one pgtune runs: refusing to roll back; nothing was changed`) {
			t.Fatalf("err = %v", err)
		}
	})
}
