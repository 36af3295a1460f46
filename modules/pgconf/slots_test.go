package pgconf

import (
	"context"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
)

func TestSlotLiteral(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"standby1", true},
		{"a", true},
		{"barman_slot_2", true},
		{strings.Repeat("x", 63), true},
		{strings.Repeat("x", 64), false}, // NAMEDATALEN-1
		{"", false},
		{"Standby1", false}, // upper case: PostgreSQL refuses it
		{"standby-1", false},
		{"s'); DROP TABLE t; --", false},
		{"s\\", false},
		{"s\x00", false},
		{"slöt", false},
		{"s t", false},
	} {
		lit, err := slotLiteral(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("slotLiteral(%q): err %v, want ok %v", tc.name, err, tc.ok)
			continue
		}
		if !tc.ok {
			continue
		}
		// Nothing of the name is SQL text: only its hex digits are.
		want := "convert_from(decode('" + hex.EncodeToString([]byte(tc.name)) + "', 'hex'), 'UTF8')"
		if lit != want {
			t.Errorf("slotLiteral(%q) = %s, want %s", tc.name, lit, want)
		}
	}
	if l, err := slotNameLine(""); err != nil || l != "primary_slot_name = ''" {
		t.Errorf("slotNameLine(\"\") = %q, %v", l, err)
	}
	if l, err := slotNameLine("standby1"); err != nil || l != "primary_slot_name = 'standby1'" {
		t.Errorf("slotNameLine(standby1) = %q, %v", l, err)
	}
	if _, err := slotNameLine("x' primary_conninfo = 'host=evil"); err == nil {
		t.Error("slotNameLine takes a name with a quote")
	}
}

func slotLine(name, typ, active string) string {
	return slotLineWAL(name, typ, active, "t", "reserved")
}

func slotLineWAL(name, typ, active, hasLSN, walStatus string) string {
	return "slot=" + hex.EncodeToString([]byte(name)) + " " + typ + " " + active + " " + hasLSN + " " + walStatus
}

func TestParseSlots(t *testing.T) {
	got, err := parseSlots([]string{slotLine("standby1", "physical", "t"), "", slotLine("barman", "physical", "f"), slotLine("cdc", "logical", "f"),
		slotLineWAL("fresh", "physical", "f", "f", "-"), slotLineWAL("gone", "physical", "f", "t", "lost"), slotLineWAL("old", "physical", "f", "t", "-")})
	want := []slotInfo{{"standby1", true, true, false}, {"barman", true, false, false}, {"cdc", false, false, false},
		{"fresh", true, false, true}, {"gone", true, false, true}, {"old", true, false, false}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("parseSlots = %v, %v; want %v", got, err, want)
	}
	for _, bad := range [][]string{
		{slotLine("Bad-Name", "physical", "f")},
		{slotLine("x'y", "physical", "f")},
		{slotLine("ok", "other", "f")},
		{slotLine("ok", "physical", "maybe")},
		{"slot=zz physical f"},
		{"slot=6f6b physical"},
		{"slot=6f6b physical f"},
		{slotLineWAL("ok", "physical", "f", "maybe", "reserved")},
		{slotLineWAL("ok", "physical", "f", "t", "gone")},
	} {
		if s, err := parseSlots(bad); err == nil {
			t.Errorf("parseSlots(%q) = %v, want an error", bad, s)
		}
	}
	var many []string
	for i := 0; i <= maxSlots; i++ {
		many = append(many, slotLine("s"+strings.Repeat("x", i%50)+string(rune('a'+i%26)), "physical", "f"))
	}
	if _, err := parseSlots(many); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("parseSlots of %d slots: %v", len(many), err)
	}
}

func TestPlanSlots(t *testing.T) {
	phys := func(names ...string) []slotInfo {
		var out []slotInfo
		for _, n := range names {
			out = append(out, slotInfo{name: n, physical: true})
		}
		return out
	}
	// streaming: in use on the old primary (its standby streams through it)
	streaming := func(names ...string) []slotInfo {
		out := phys(names...)
		for i := range out {
			out[i].active = true
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		cand      slotUser
		repointed []slotUser
		cascading []slotUser
		old, have []slotInfo
		want      slotPlan
		err       string
	}{
		{name: "no slots anywhere",
			cand: slotUser{"standby1", ""}, repointed: []slotUser{{"standby2", ""}}},
		{name: "every standby streams through a slot",
			cand: slotUser{"standby1", "standby1"}, repointed: []slotUser{{"standby2", "standby2"}},
			old:  streaming("standby1", "standby2"),
			want: slotPlan{create: []string{"standby1", "standby2"}, oldSlot: "standby1", drop: []string{"standby1", "standby2"}}},
		{name: "a backup tool's slot and a logical slot are left on the old primary",
			cand: slotUser{"standby1", "s1"}, repointed: []slotUser{{"standby2", "s2"}},
			old:  append(append(phys("barman"), streaming("s1", "s2")...), slotInfo{name: "cdc"}),
			want: slotPlan{create: []string{"s1", "s2"}, oldSlot: "s1", drop: []string{"s1", "s2"}, left: []string{"barman", "cdc"}}},
		{name: "a standby without a slot gets none; a slot named after it is no member's",
			cand: slotUser{"standby1", "standby1"}, repointed: []slotUser{{"standby2", ""}},
			old:  phys("standby1", "standby2"),
			want: slotPlan{create: []string{"standby1"}, oldSlot: "standby1", drop: []string{"standby1"}, left: []string{"standby2"}}},
		{name: "the candidate streams without a slot: the old primary streams without one",
			cand: slotUser{"standby1", ""}, repointed: []slotUser{{"standby2", "standby2"}},
			old:  streaming("standby2"),
			want: slotPlan{create: []string{"standby2"}, drop: []string{"standby2"}}},
		{name: "a slot the candidate has already is used, not made (nor dropped on a rollback)",
			cand: slotUser{"standby1", "standby1"}, repointed: []slotUser{{"standby2", "standby2"}},
			old: streaming("standby1", "standby2"), have: phys("standby2", "other"),
			want: slotPlan{create: []string{"standby1"}, reuse: []string{"standby2"}, oldSlot: "standby1", drop: []string{"standby1", "standby2"}}},
		{name: "the candidate's slot missing on the old primary is made, nothing to drop",
			cand: slotUser{"standby1", "standby1"}, repointed: []slotUser{{"standby2", "standby2"}},
			old:  streaming("standby2"),
			want: slotPlan{create: []string{"standby1", "standby2"}, oldSlot: "standby1", drop: []string{"standby2"}}},
		{name: "a logical slot of a member's name on the old primary is not dropped",
			cand: slotUser{"standby1", "standby1"}, old: []slotInfo{{name: "standby1"}},
			want: slotPlan{create: []string{"standby1"}, oldSlot: "standby1", left: []string{"standby1"}}},
		{name: "a standby streaming from the candidate without a slot changes nothing",
			cand: slotUser{"standby1", ""}, repointed: []slotUser{{"standby2", "s2"}}, cascading: []slotUser{{"standby3", ""}, {"standby4", "s4"}},
			old: streaming("s2"), have: phys("s4"),
			want: slotPlan{create: []string{"s2"}, drop: []string{"s2"}}},
		{name: "two members, one slot",
			cand: slotUser{"standby1", "s"}, repointed: []slotUser{{"standby2", "s"}},
			err: `primary and standby2 would both stream through replication slot "s"`},
		{name: "two standbys, one slot",
			cand: slotUser{"standby1", ""}, repointed: []slotUser{{"standby2", "s"}, {"standby3", "s"}},
			err: `standby2 and standby3 would both stream through replication slot "s"`},
		{name: "the candidate's slot of that name is logical",
			cand: slotUser{"standby1", ""}, repointed: []slotUser{{"standby2", "s"}}, old: streaming("s"), have: []slotInfo{{name: "s"}},
			err: `standby1 has a logical replication slot "s", which standby2 would stream through`},
		{name: "the candidate's slot of that name is in use",
			cand: slotUser{"standby1", ""}, repointed: []slotUser{{"standby2", "s"}}, old: streaming("s"), have: []slotInfo{{name: "s", physical: true, active: true}},
			err: `standby1's replication slot "s", which standby2 would stream through, is in use already`},
		{name: "a name PostgreSQL would not allow",
			cand: slotUser{"standby1", ""}, repointed: []slotUser{{"standby2", "x');--"}},
			err: "standby2: primary_slot_name \"x');--\" is not a replication slot name"},
		// A repointed standby not streaming through its slot: the WAL it
		// needs may be kept only there, and the new slot begins later.
		{name: "a repointed standby's slot is not in use on the old primary",
			cand: slotUser{"standby1", "standby1"}, repointed: []slotUser{{"standby2", "standby2"}},
			old: append(streaming("standby1"), phys("standby2")...),
			err: `standby2 is not streaming through its replication slot "standby2" on primary (not in use): the WAL it needs next may be kept only by that slot; the slot made for it on standby1 would reserve WAL only from now on, and after the promotion standby2 would ask for WAL standby1 no longer has (requested WAL segment has already been removed); bring standby2 back streaming, or choose primary: restart`},
		{name: "a repointed standby's slot is missing on the old primary",
			cand: slotUser{"standby1", ""}, repointed: []slotUser{{"standby2", "standby2"}},
			err: `standby2 streams through replication slot "standby2", which primary does not have: it is not streaming; the slot made for it on standby1`},
		// A slot of the candidate a standby cascading from it names.
		{name: "a standby streaming from the candidate names the slot to reuse",
			cand: slotUser{"standby1", ""}, repointed: []slotUser{{"standby2", "s"}}, cascading: []slotUser{{"standby3", "s"}},
			old: streaming("s"), have: phys("s"),
			err: `standby3 streams from standby1 through its replication slot "s", which standby2 would stream through too`},
		{name: "a standby streaming from the candidate names the slot the old primary would stream through",
			cand: slotUser{"standby1", "s1"}, cascading: []slotUser{{"standby3", "s1"}},
			old: streaming("s1"),
			err: `standby3 streams from standby1 through its replication slot "s1", which primary would stream through too`},
		{name: "the candidate's slot of that name reserves no WAL (restart_lsn NULL)",
			cand: slotUser{"standby1", ""}, repointed: []slotUser{{"standby2", "s"}}, old: streaming("s"), have: []slotInfo{{name: "s", physical: true, noWAL: true}},
			err: `standby1's replication slot "s", which standby2 would stream through, reserves no WAL (restart_lsn NULL, or wal_status lost): drop it on standby1 and run again`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := planSlots("primary", tc.cand, tc.repointed, tc.cascading, tc.old, tc.have)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestPlanRepointSlotName: the old primary's primary_slot_name becomes the
// slot the promoted standby streamed through, written in the file its
// primary_conninfo goes to: the line that sets it there replaced, else
// appended (postgresql.auto.conf is read last: a setting elsewhere loses
// to it); set in another file that would win, refused.
func TestPlanRepointSlotName(t *testing.T) {
	dir := t.TempDir()
	conf, auto := filepath.Join(dir, "postgresql.conf"), filepath.Join(dir, autoConfName)
	for _, tc := range []struct {
		name            string
		conf, auto      string
		file            string // where the old primary's primary_conninfo is set
		line            int
		slot, slotFile  string
		slotLine        int
		oldSlot         string
		wantConf, wantA string // the content planned for the file written ("" for no change of it)
		err             string
	}{
		{name: "set nowhere: appended with primary_conninfo to postgresql.auto.conf",
			auto: "# auto\n", oldSlot: "standby1",
			wantA: "# auto\nprimary_conninfo = 'host=/run/standby1 port=5433 user=rep'\nprimary_slot_name = 'standby1'\n"},
		{name: "no slot then, none now: no line",
			auto: "", oldSlot: "",
			wantA: "primary_conninfo = 'host=/run/standby1 port=5433 user=rep'\n"},
		{name: "a stale one in postgresql.auto.conf is replaced",
			auto: "# auto\nprimary_slot_name = 'stale'\n", slot: "stale", slotFile: auto, slotLine: 2, oldSlot: "standby1",
			wantA: "# auto\nprimary_slot_name = 'standby1'\nprimary_conninfo = 'host=/run/standby1 port=5433 user=rep'\n"},
		{name: "a stale one in postgresql.conf loses to postgresql.auto.conf",
			conf: "primary_slot_name = 'stale'\n", auto: "", slot: "stale", slotFile: conf, slotLine: 1, oldSlot: "standby1",
			wantA: "primary_conninfo = 'host=/run/standby1 port=5433 user=rep'\nprimary_slot_name = 'standby1'\n"},
		{name: "beside primary_conninfo in postgresql.conf, emptied when the new primary streamed without a slot",
			conf: "a = 1\nprimary_conninfo = 'host=old'\nprimary_slot_name = 'stale'\n", file: conf, line: 2, slot: "stale", slotFile: conf, slotLine: 3, oldSlot: "",
			wantConf: "a = 1\nprimary_conninfo = 'host=/run/standby1 port=5433 user=rep'\nprimary_slot_name = ''\n"},
		{name: "the same slot already: left as it is",
			conf: "primary_conninfo = 'host=old'\nprimary_slot_name = 'standby1'\n", file: conf, line: 1, slot: "standby1", slotFile: conf, slotLine: 2, oldSlot: "standby1",
			wantConf: "primary_conninfo = 'host=/run/standby1 port=5433 user=rep'\nprimary_slot_name = 'standby1'\n"},
		{name: "primary_conninfo in postgresql.conf, primary_slot_name in postgresql.auto.conf: refused",
			conf: "primary_conninfo = 'host=old'\n", auto: "primary_slot_name = 'stale'\n", file: conf, line: 1, slot: "stale", slotFile: auto, slotLine: 1, oldSlot: "standby1",
			err: "pgtune edits them in one file"},
		{name: "set on the command line (no file): a line in a file would lose to it, refused",
			auto: "", slot: "stale", oldSlot: "standby1",
			err: `primary: primary_slot_name "stale" is not set in a configuration file (the command line?): the line pgtune would write to "` + auto + `" loses to it`},
		{name: "the same slot on the command line: nothing to write",
			auto: "", slot: "standby1", oldSlot: "standby1",
			wantA: "primary_conninfo = 'host=/run/standby1 port=5433 user=rep'\n"},
		{name: "host text in the other file's name is quoted",
			conf: "primary_conninfo = 'host=old'\n", file: conf, line: 1, slot: "stale", slotFile: dir + "/x\n.conf", slotLine: 1, oldSlot: "standby1",
			err: `primary_slot_name is set in "` + dir + `/x\n.conf" and primary_conninfo goes to "` + conf + `"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			writeTestFile(t, conf, tc.conf)
			writeTestFile(t, auto, tc.auto)
			old := swStandby("primary", "m", "", 0, 0, "on")
			old.t.Transport = transport.NewLocal()
			old.pg.DataDir = dir
			old.file, old.line, old.slot, old.slotFile, old.slotLine = tc.file, tc.line, tc.slot, tc.slotFile, tc.slotLine
			if tc.file != "" {
				old.conninfo, _ = parseConninfo("host=old")
			}
			cand := swStandby("standby1", "m", "streaming", 0, 0, "on")
			cand.pg.Port = 5433
			cand.conninfo, _ = parseConninfo("host=/run/primary port=5432 user=rep application_name=standby1")
			sw := &switchover{old: old, direct: []*swMember{cand}}
			got, err := sw.planRepoint(context.Background(), cand, tc.oldSlot)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || len(got) != 1 {
				t.Fatalf("planRepoint = %v, %v", got, err)
			}
			want, wantFile := tc.wantA, auto
			if tc.wantConf != "" {
				want, wantFile = tc.wantConf, conf
			}
			if got[0].file != wantFile || string(got[0].content) != want {
				t.Errorf("planned %s:\n%s\nwant %s:\n%s", got[0].file, got[0].content, wantFile, want)
			}
		})
	}
}

func writeTestFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// slotServer answers the slot queries of slots.go as a server holding
// slots would; dropFails names slots whose drop fails, readFails makes
// reading the slots fail.
type slotServer struct {
	slots     []string
	dropFails map[string]bool
	readFails bool
	sql       []string
}

func (f *slotServer) Close() error { return nil }

func (f *slotServer) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	sql := cmd.Args[len(cmd.Args)-1]
	f.sql = append(f.sql, sql)
	switch {
	case sql == slotsSQL:
		if f.readFails {
			return transport.Result{}, errors.New("connection lost")
		}
		var out []string
		for _, n := range f.slots {
			out = append(out, slotLine(n, "physical", "f"))
		}
		return transport.Result{Stdout: []byte(strings.Join(out, "\n") + "\n")}, nil
	case strings.Contains(sql, "pg_drop_replication_slot("):
		i := strings.Index(sql, "decode('") + len("decode('")
		b, _ := hex.DecodeString(sql[i : i+strings.IndexByte(sql[i:], '\'')])
		if f.dropFails[string(b)] {
			return transport.Result{}, errors.New("ERROR: replication slot is active")
		}
		for i, n := range f.slots {
			if n == string(b) {
				f.slots = append(f.slots[:i], f.slots[i+1:]...)
				return transport.Result{Stdout: []byte("dropped=1\n")}, nil
			}
		}
		return transport.Result{}, errors.New("ERROR: replication slot does not exist")
	}
	return transport.Result{}, errors.New("unexpected query " + sql)
}

// TestUndoCreatedSlots: an abandoned switchover drops every slot of the
// plan's create list the standby has when it is read again, not only
// those psql confirmed (a creation cut short may have made its slot),
// and says which it dropped and which it could not.
func TestUndoCreatedSlots(t *testing.T) {
	for _, tc := range []struct {
		name      string
		has       []string
		dropFails map[string]bool
		readFails bool
		want      string
		left      []string
	}{
		{name: "a creation cut short made its slot: dropped too",
			has:  []string{"other", "s1", "s2"},
			want: `; the replication slots made on standby1 are dropped again ("s1", "s2")`, left: []string{"other"}},
		{name: "only the first was made",
			has:  []string{"s1"},
			want: `; the replication slots made on standby1 are dropped again ("s1")`},
		{name: "none was made",
			has:  []string{"other"},
			want: `; standby1 has none of the replication slots the switchover was to make on it ("s1", "s2")`, left: []string{"other"}},
		{name: "a drop fails: the others are dropped, the failure named",
			has: []string{"s1", "s2"}, dropFails: map[string]bool{"s1": true},
			want: `; the replication slots made on standby1 are dropped again ("s2"); dropping replication slots made on standby1 FAILED: "s1" (`, left: []string{"s1"}},
		{name: "the slots cannot be read again",
			has: []string{"s1"}, readFails: true,
			want: `; reading the replication slots of standby1 again FAILED (`, left: []string{"s1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &slotServer{slots: tc.has, dropFails: tc.dropFails, readFails: tc.readFails}
			m := swStandby("standby1", "m", "streaming", 0, 0, "on")
			m.t.Transport = srv
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // a second Ctrl-C: the undo runs all the same
			got := undoCreatedSlots(ctx, m, []string{"s1", "s2"})
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("undo says %q, want %q", got, tc.want)
			}
			if tc.readFails && !strings.Contains(got, `drop any of "s1", "s2" it has on it by hand`) {
				t.Errorf("undo says %q: names no slot to drop by hand", got)
			}
			if strings.Join(srv.slots, ",") != strings.Join(tc.left, ",") {
				t.Errorf("slots left %q, want %q", srv.slots, tc.left)
			}
		})
	}
	if got := undoCreatedSlots(context.Background(), swStandby("standby1", "m", "", 0, 0, "on"), nil); got != "" {
		t.Errorf("undo of nothing says %q", got)
	}
}

// TestStrandedSlots: after the promotion each slot on the new primary of
// a member that does not stream from it is named, with what to do.
func TestStrandedSlots(t *testing.T) {
	got := strandedSlots("standby1", []slotUser{{"primary", "standby1"}, {"standby2", "s2"}}, true)
	want := []string{
		`primary's replication slot "standby1" on standby1 retains WAL until primary streams; drop it if primary is to be rebuilt`,
		`standby2's replication slot "s2" on standby1 retains WAL until standby2 streams; drop it if standby2 is to be rebuilt`,
		`max_slot_wal_keep_size is -1 on standby1: nothing bounds the WAL those slots retain (pg_wal grows until they are used or dropped)`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("strandedSlots =\n%q\nwant\n%q", got, want)
	}
	if got := strandedSlots("standby1", []slotUser{{"standby2", "s2"}}, false); len(got) != 1 {
		t.Errorf("bounded: %q", got)
	}
	if got := strandedSlots("standby1", nil, true); got != nil {
		t.Errorf("no member failed: %q", got)
	}
}
