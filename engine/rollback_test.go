package engine

import (
	"reflect"
	"testing"
)

func TestRestorePoint(t *testing.T) {
	journals := []JournalRecord{
		{RunID: "20261101T000000Z-aaaaaa", Entries: []JournalEntry{
			{Kind: "file", Module: "hugepages", Path: "/etc/sysctl.d/10-hugepages.conf", Backup: "/b1/h"},
			{Kind: "sysctl", Module: "hugepages", Key: "vm.nr_hugepages", Before: "0"},
			{Kind: "file", Module: "pgconf", Path: "/pg/conf.d/002-hugepages.conf", Backup: "/b1/p"},
			{Kind: "sysctl", Module: "overcommit", Key: "vm.overcommit_kbytes", Before: "0"},
			{Kind: "sysctl", Module: "overcommit", Key: "vm.overcommit_ratio", Before: "50"},
			{Kind: "sysctl", Module: "overcommit", Key: "vm.overcommit_memory", Before: "0"},
		}},
		{RunID: "20261102T000000Z-bbbbbb", Entries: []JournalEntry{
			{Kind: "sysctl", Module: "hugepages", Key: "vm.nr_hugepages", Before: "3013"},
			{Kind: "file", Module: "pgconf", Path: "/pg/conf.d/002-hugepages.conf", Backup: "/b2/p", Existed: true},
		}},
	}
	keys := func(es []JournalEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Path+e.Key+"="+e.Before+e.Backup)
		}
		return out
	}
	t.Run("before first run", func(t *testing.T) {
		got, err := restorePoint(journals, "")
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			"vm.overcommit_memory=0", "vm.overcommit_ratio=50", "vm.overcommit_kbytes=0",
			"/pg/conf.d/002-hugepages.conf=/b1/p",
			"vm.nr_hugepages=0", "/etc/sysctl.d/10-hugepages.conf=/b1/h",
		}
		if !reflect.DeepEqual(keys(got), want) {
			t.Fatalf("got  %q\nwant %q", keys(got), want)
		}
	})
	t.Run("before second run", func(t *testing.T) {
		got, err := restorePoint(journals, "20261102T000000Z-bbbbbb")
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"/pg/conf.d/002-hugepages.conf=/b2/p", "vm.nr_hugepages=3013"}
		if !reflect.DeepEqual(keys(got), want) {
			t.Fatalf("got  %q\nwant %q", keys(got), want)
		}
	})
	t.Run("unknown run", func(t *testing.T) {
		_, err := restorePoint(journals, "nope")
		if err == nil || err.Error() != `no run "nope" on this host (runs: 20261101T000000Z-aaaaaa, 20261102T000000Z-bbbbbb)` {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestLinkedZeroed(t *testing.T) {
	entries := []JournalEntry{
		{Kind: "sysctl", Module: "overcommit", Key: "vm.overcommit_kbytes", Before: "0"},
		{Kind: "sysctl", Module: "overcommit", Key: "vm.overcommit_ratio", Before: "50"},
	}
	// The module declares the pair (LinkedSysctls); the engine knows no key.
	pair := map[string][]string{"vm.overcommit_kbytes": {"vm.overcommit_ratio"}, "vm.overcommit_ratio": {"vm.overcommit_kbytes"}}
	u := &undoSet{entries: entries, links: func(module, key string) []string {
		if module != "overcommit" {
			return nil
		}
		return pair[key]
	}}
	if !u.linkedZeroed(entries[0]) {
		t.Error("kbytes=0 with ratio=50 before: restoring the ratio restores kbytes")
	}
	if u.linkedZeroed(entries[1]) {
		t.Error("the ratio itself must be restored")
	}
	if (&undoSet{entries: entries}).linkedZeroed(entries[0]) {
		t.Error("keys no module links are restored each")
	}
}

// An UndoEarly module's entries are undone before every other module's,
// in their own order, whatever order the modules ran in.
func TestUndoEarlyFirst(t *testing.T) {
	entries := []JournalEntry{
		{Module: "thp", Path: "/t"},
		{Module: "pgconf", Path: "/p"},
		{Module: "oom", Key: "oom_score_adj:postmaster:1:2"},
		{Module: "oom", Path: "/etc/systemd/system/u.service.d/pgtune-oom.conf"},
		{Module: "hugepages", Key: "vm.nr_hugepages"},
	}
	var got []string
	for _, e := range undoEarlyFirst(entries, map[string]bool{"oom": true}) {
		got = append(got, e.Module+":"+e.Path+e.Key)
	}
	want := []string{"oom:oom_score_adj:postmaster:1:2", "oom:/etc/systemd/system/u.service.d/pgtune-oom.conf",
		"thp:/t", "pgconf:/p", "hugepages:vm.nr_hugepages"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if got := undoEarlyFirst(entries, nil); !reflect.DeepEqual(got, entries) {
		t.Errorf("without early modules the order changed: %v", got)
	}
}
