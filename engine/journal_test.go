package engine

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateJournal(t *testing.T) {
	const state = "/var/lib/pgtune/runs"
	const run = "20261130T190000Z-a1b2c3"
	managed := map[string]bool{
		"hugepages sysctl vm.nr_hugepages":                      true,
		"hugepages file /etc/sysctl.d/10-hugepages.conf":        true,
		"overcommit sysctl vm.overcommit_memory":                true,
		"pgconf file /etc/postgresql/15/main/conf.d/002.conf":   true,
		"pgconf file /etc/postgresql/15/main/postgresql.conf":   true,
		"overcommit file /etc/sysctl.d/99-overcommit.conf":      true,
		"overcommit sysctl vm.overcommit_ratio":                 true,
		"hugepages file /etc/sysctl.d/../../etc/passwd":         true, // never asked: not clean
		"pgconf file /etc/postgresql/15/main/conf.d/x\n.conf":   true, // never asked: control character
		"overcommit sysctl vm.overcommit_kbytes":                true,
		"hugepages file /etc/sysctl.d/10-hugepages.conf.extra":  false,
		"thp sysfs /sys/kernel/mm/transparent_hugepage/enabled": true,
		"thp sysfs /sys/../etc/passwd":                          true, // never asked: not clean
		"oom service daemon-reload":                             true,
		"oom service postgresql@15-main.service":                true,
		"pgconf created replication_slot:5432:standby1":         true,
	}
	manages := func(e JournalEntry) error {
		target := e.Path + e.Key
		if k := kindOf(e.Kind); k != nil {
			target = k.target(e)
		}
		if !managed[e.Module+" "+e.Kind+" "+target] {
			return errors.New("module " + e.Module + " does not manage it on this host")
		}
		return nil
	}
	file := func(module, p string) JournalEntry {
		return JournalEntry{Kind: "file", Module: module, Path: p, Backup: state + "/" + run + "/files" + p, Existed: true}
	}
	sysctl := func(module, key, before string) JournalEntry {
		return JournalEntry{Kind: "sysctl", Module: module, Key: key, Before: before}
	}
	good := []JournalEntry{
		file("hugepages", "/etc/sysctl.d/10-hugepages.conf"),
		sysctl("hugepages", "vm.nr_hugepages", "0"),
		file("pgconf", "/etc/postgresql/15/main/conf.d/002.conf"),
		sysctl("overcommit", "vm.overcommit_memory", "0"),
	}
	sysfs := func(p, before string) JournalEntry {
		return JournalEntry{Kind: "sysfs", Module: "thp", Path: p, Before: before}
	}
	service := func(unit, action string) JournalEntry {
		return JournalEntry{Kind: "service", Module: "oom", Unit: unit, Action: action}
	}
	created := func(key, settled string) JournalEntry {
		return JournalEntry{Kind: "created", Module: "pgconf", Key: key, Settled: settled}
	}
	with := func(e ...JournalEntry) []JournalEntry { return append(append([]JournalEntry(nil), good...), e...) }

	tests := []struct {
		name    string
		dir     string
		journal JournalRecord
		want    string // "" = valid; else a substring of the error
	}{
		{name: "as pgtune writes it", dir: run, journal: JournalRecord{RunID: run, Entries: good}},
		{name: "empty", dir: run, journal: JournalRecord{RunID: run}},
		{name: "run id of another directory", dir: "20261130T190000Z-ffffff", journal: JournalRecord{RunID: run, Entries: good},
			want: `run id ` + run + ` does not match its directory "20261130T190000Z-ffffff"`},
		{name: "run id with a slash", dir: "x", journal: JournalRecord{RunID: "../x"}, want: `run id "../x" is not a run id`},
		{name: "no run id", dir: run, journal: JournalRecord{}, want: `run id "" is not a run id`},
		{name: "kernel.core_pattern", dir: run, journal: JournalRecord{RunID: run, Entries: with(sysctl("overcommit", "kernel.core_pattern", "|/tmp/x"))},
			want: `entry 5 (sysctl kernel.core_pattern = |/tmp/x by module overcommit): module overcommit does not manage it`},
		{name: "/etc/passwd", dir: run, journal: JournalRecord{RunID: run, Entries: with(file("pgconf", "/etc/passwd"))},
			want: `entry 5 (file /etc/passwd by module pgconf): module pgconf does not manage it`},
		{name: "a key of another module", dir: run, journal: JournalRecord{RunID: run, Entries: with(sysctl("hugepages", "vm.overcommit_memory", "0"))},
			want: `entry 5 (sysctl vm.overcommit_memory = 0 by module hugepages): module hugepages does not manage it`},
		{name: "unclean path", dir: run, journal: JournalRecord{RunID: run, Entries: with(file("hugepages", "/etc/sysctl.d/../../etc/passwd"))},
			want: "entry 5 (file /etc/sysctl.d/../../etc/passwd by module hugepages): the path is not a clean absolute path"},
		{name: "relative path", dir: run, journal: JournalRecord{RunID: run, Entries: with(JournalEntry{Kind: "file", Module: "pgconf", Path: "etc/x.conf", Backup: state + "/" + run + "/files/etc/x.conf"})},
			want: "the path is not a clean absolute path"},
		{name: "control character in a path", dir: run, journal: JournalRecord{RunID: run, Entries: with(file("pgconf", "/etc/postgresql/15/main/conf.d/x\n.conf"))},
			want: `(file "/etc/postgresql/15/main/conf.d/x\n.conf" by module pgconf): the path is not a clean absolute path`},
		{name: "backup outside the run", dir: run, journal: JournalRecord{RunID: run, Entries: with(JournalEntry{Kind: "file", Module: "pgconf",
			Path: "/etc/postgresql/15/main/postgresql.conf", Backup: "/etc/shadow", Existed: true})},
			want: `its backup "/etc/shadow" is not where pgtune keeps it (` + state + "/" + run + `/files/etc/postgresql/15/main/postgresql.conf)`},
		{name: "backup of another run", dir: run, journal: JournalRecord{RunID: run, Entries: with(JournalEntry{Kind: "file", Module: "pgconf",
			Path: "/etc/postgresql/15/main/postgresql.conf", Backup: state + "/other/files/etc/postgresql/15/main/postgresql.conf", Existed: true})},
			want: "is not where pgtune keeps it"},
		{name: "bad kernel key", dir: run, journal: JournalRecord{RunID: run, Entries: with(sysctl("overcommit", "vm/../../etc", "0"))},
			want: "not a kernel key"},
		{name: "multi-line value", dir: run, journal: JournalRecord{RunID: run, Entries: with(sysctl("overcommit", "vm.overcommit_kbytes", "1\nkernel.core_pattern=|/x"))},
			want: "the previous value is not a kernel value"},
		{name: "file entry with a key", dir: run, journal: JournalRecord{RunID: run, Entries: with(JournalEntry{Kind: "file", Module: "hugepages",
			Path: "/etc/sysctl.d/10-hugepages.conf", Backup: state + "/" + run + "/files/etc/sysctl.d/10-hugepages.conf", Key: "kernel.core_pattern"})},
			want: "a file entry with a kernel key or value"},
		{name: "sysctl entry with a path", dir: run, journal: JournalRecord{RunID: run, Entries: with(JournalEntry{Kind: "sysctl", Module: "overcommit",
			Key: "vm.overcommit_ratio", Before: "50", Path: "/etc/passwd"})},
			want: "a kernel entry with a file"},
		{name: "unknown kind", dir: run, journal: JournalRecord{RunID: run, Entries: with(JournalEntry{Kind: "exec", Module: "pgconf", Path: "/bin/sh"})},
			want: "entry 5 (exec  by module pgconf): unknown kind"},
		{name: "sysfs value", dir: run, journal: JournalRecord{RunID: run, Entries: with(sysfs("/sys/kernel/mm/transparent_hugepage/enabled", "madvise"))}},
		{name: "sysfs outside /sys", dir: run, journal: JournalRecord{RunID: run, Entries: with(sysfs("/sys/../etc/passwd", "x"))},
			want: "not a clean path under /sys/"},
		{name: "sysfs not managed", dir: run, journal: JournalRecord{RunID: run, Entries: with(sysfs("/sys/kernel/mm/ksm/run", "1"))},
			want: "module thp does not manage it"},
		{name: "sysfs with a backup", dir: run, journal: JournalRecord{RunID: run, Entries: with(JournalEntry{Kind: "sysfs", Module: "thp",
			Path: "/sys/kernel/mm/transparent_hugepage/enabled", Backup: state + "/" + run + "/files/x"})},
			want: "a sysfs entry with a kernel key or a file backup"},
		{name: "sysfs multi-line value", dir: run, journal: JournalRecord{RunID: run, Entries: with(sysfs("/sys/kernel/mm/transparent_hugepage/enabled", "never\nx"))},
			want: "the previous value is not a kernel value"},
		{name: "service actions", dir: run, journal: JournalRecord{RunID: run, Entries: with(service("", "daemon-reload"), service("postgresql@15-main.service", "restart"))}},
		{name: "service action pgtune never runs", dir: run, journal: JournalRecord{RunID: run, Entries: with(service("postgresql@15-main.service", "stop"))},
			want: `service action "stop" is not one pgtune runs`},
		{name: "service unit that is an option", dir: run, journal: JournalRecord{RunID: run, Entries: with(service("--root=/tmp/x.service", "restart"))},
			want: "is not a systemd unit name"},
		{name: "daemon-reload with a unit", dir: run, journal: JournalRecord{RunID: run, Entries: with(service("postgresql@15-main.service", "daemon-reload"))},
			want: "daemon-reload names no unit"},
		{name: "service with a file", dir: run, journal: JournalRecord{RunID: run, Entries: with(JournalEntry{Kind: "service", Module: "oom", Action: "daemon-reload", Path: "/etc/passwd"})},
			want: "a service entry with a file"},
		{name: "file entry with a service action", dir: run, journal: JournalRecord{RunID: run, Entries: with(JournalEntry{Kind: "file", Module: "hugepages",
			Path: "/etc/sysctl.d/10-hugepages.conf", Backup: state + "/" + run + "/files/etc/sysctl.d/10-hugepages.conf", Action: "restart"})},
			want: "a file entry with a service action"},
		{name: "created thing", dir: run, journal: JournalRecord{RunID: run, Entries: with(created("replication_slot:5432:standby1", ""))}},
		{name: "created thing settled", dir: run, journal: JournalRecord{RunID: run, Entries: with(created("replication_slot:5432:standby1", "dropped again"))}},
		{name: "created thing not managed", dir: run, journal: JournalRecord{RunID: run, Entries: with(created("replication_slot:6543:standby1", ""))},
			want: "entry 5 (created replication_slot:6543:standby1 by module pgconf): module pgconf does not manage it"},
		{name: "created key with a path", dir: run, journal: JournalRecord{RunID: run, Entries: with(created("replication_slot:5432:../x", ""))},
			want: "not a created key"},
		{name: "created with a file", dir: run, journal: JournalRecord{RunID: run, Entries: with(JournalEntry{Kind: "created", Module: "pgconf",
			Key: "replication_slot:5432:standby1", Path: "/etc/passwd"})},
			want: "a created entry with a file"},
		{name: "created with a previous value", dir: run, journal: JournalRecord{RunID: run, Entries: with(JournalEntry{Kind: "created", Module: "pgconf",
			Key: "replication_slot:5432:standby1", Before: "x"})},
			want: "a created entry with a previous value"},
		{name: "created settled with a control character", dir: run, journal: JournalRecord{RunID: run, Entries: with(created("replication_slot:5432:standby1", "kept\x1b[2J"))},
			want: "its settlement is not a text"},
		{name: "another kind settled", dir: run, journal: JournalRecord{RunID: run, Entries: with(JournalEntry{Kind: "sysctl", Module: "overcommit",
			Key: "vm.overcommit_ratio", Before: "50", Settled: "kept"})},
			want: "only a created entry is settled"},
		{name: "first bad entry is named", dir: run, journal: JournalRecord{RunID: run, Entries: []JournalEntry{
			sysctl("overcommit", "kernel.core_pattern", "core"), file("pgconf", "/etc/passwd")}},
			want: "entry 1 (sysctl kernel.core_pattern = core by module overcommit)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := validateJournal(tc.journal, tc.dir, state, manages)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted; want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseLocked(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"recorded", `{"run_id":"20261130T190000Z-a1b2c3","pid":4242,"controller":"laptop","since":"2026-11-30T19:00:00Z"}` + "\nholder=977\n",
			"locked by run 20261130T190000Z-a1b2c3 (pid 4242 on controller laptop) since 2026-11-30T19:00:00Z; nothing was changed (if that run is gone, its lock holder is pid 977 on the host)"},
		{"no holder line", `{"run_id":"r1","pid":1,"controller":"ci","since":"2026-11-30T19:00:00Z"}`,
			"locked by run r1 (pid 1 on controller ci) since 2026-11-30T19:00:00Z; nothing was changed"},
		{"escape sequence in a name", `{"run_id":"r1","pid":1,"controller":"a\u001b[2Kb","since":"2026-11-30T19:00:00Z"}` + "\nholder=x\n",
			`locked by run r1 (pid 1 on controller "a\x1b[2Kb") since 2026-11-30T19:00:00Z; nothing was changed`},
		{"not written yet", "", "locked by another pgtune run (it has not recorded who it is yet); nothing was changed"},
		{"garbage", "\x00\x01", "locked by another pgtune run (it has not recorded who it is yet); nothing was changed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseLocked(tc.content).Error(); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
