package pgconf

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/fakehost"
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
// reading the slots fail; active names slots in use, logical logical
// ones; primary says the server is not in recovery; onCreate runs as a
// slot is made.
type slotServer struct {
	slots     []string
	dropFails map[string]bool
	readFails bool
	active    map[string]bool
	logical   map[string]bool
	primary   bool
	onCreate  func(name string)
	sql       []string
}

func (f *slotServer) Close() error { return nil }

// slotArg is the slot name a query passes hex-encoded (slotLiteral).
func slotArg(sql string) string {
	i := strings.Index(sql, "decode('") + len("decode('")
	b, _ := hex.DecodeString(sql[i : i+strings.IndexByte(sql[i:], '\'')])
	return string(b)
}

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
			typ, active := "physical", "f"
			if f.logical[n] {
				typ = "logical"
			}
			if f.active[n] {
				active = "t"
			}
			out = append(out, slotLine(n, typ, active))
		}
		return transport.Result{Stdout: []byte(strings.Join(out, "\n") + "\n")}, nil
	case sql == "SELECT 'recovery=' || pg_is_in_recovery()":
		return transport.Result{Stdout: []byte(fmt.Sprintf("recovery=%t\n", !f.primary))}, nil
	case strings.Contains(sql, "pg_create_physical_replication_slot("):
		n := slotArg(sql)
		if f.onCreate != nil {
			f.onCreate(n)
		}
		f.slots = append(f.slots, n)
		return transport.Result{Stdout: []byte("made=" + n + "\n")}, nil
	case strings.Contains(sql, "pg_drop_replication_slot("):
		n := slotArg(sql)
		if f.dropFails[n] {
			return transport.Result{}, errors.New("ERROR: replication slot is active")
		}
		for i, s := range f.slots {
			if s == n {
				f.slots = append(f.slots[:i], f.slots[i+1:]...)
				return transport.Result{Stdout: []byte("dropped=1\n")}, nil
			}
		}
		return transport.Result{}, errors.New("ERROR: replication slot does not exist")
	}
	return transport.Result{}, errors.New("unexpected query " + sql)
}

// slotsRun is the run the tests' slot journal is saved as.
const slotsRun = "20261130T190000Z-a1b2c3-slots-5432"

// journaledStandby is a standby whose server is srv, on a fake host that
// keeps the journal of the slots made on it (slotJournal); journal reads
// that journal's entries back as "key settled" lines.
func journaledStandby(t *testing.T, srv *slotServer) (*swMember, *slotJournal, func() []string) {
	t.Helper()
	h := fakehost.New()
	h.StateDir = "/var/lib/pgtune/runs"
	h.Other = srv.Run
	m := swStandby("standby1", "m", "streaming", 0, 0, "on")
	m.t.Transport = h
	m.t.StateDir = h.StateDir
	m.t.Journal = engine.NewKeptJournal("20261130T190000Z-a1b2c3"+switchoverSuffix, "standby1", h.StateDir, h, false, engine.KeptRoleChanges)
	j := newSlotJournal(m)
	if j == nil || j.t.RunID() != slotsRun {
		t.Fatalf("slot journal %+v, want run %s", j, slotsRun)
	}
	journal := func() []string {
		h.Lock()
		defer h.Unlock()
		body, ok := h.Files[h.StateDir+"/"+slotsRun+"/journal.json"]
		if !ok {
			return nil
		}
		var rec engine.JournalRecord
		if err := json.Unmarshal([]byte(body), &rec); err != nil {
			t.Fatalf("journal: %v", err)
		}
		var out []string
		for _, e := range rec.Entries {
			if e.Kind != "created" || e.Module != Name || rec.Kept != "" {
				t.Errorf("journal entry %+v of run kept %q", e, rec.Kept)
			}
			out = append(out, strings.TrimSpace(e.Key+" "+e.Settled))
		}
		return out
	}
	return m, j, journal
}

// TestSlotsBack: an abandoned switchover drops every slot of the plan's
// create list the standby has when it is read again, not only those psql
// confirmed (a creation cut short may have made its slot), says which it
// dropped and which it could not, and settles in the journal those
// dropped and those never made; one whose drop failed stays unsettled,
// for rollback.
func TestSlotsBack(t *testing.T) {
	const dropped = "dropped again: the switchover was abandoned before the promotion"
	const never = "never made: the switchover was abandoned before"
	for _, tc := range []struct {
		name      string
		has       []string
		dropFails map[string]bool
		readFails bool
		want      string
		left      []string
		journal   []string
	}{
		{name: "a creation cut short made its slot: dropped too",
			has:  []string{"other", "s1", "s2"},
			want: `; the replication slots made on standby1 are dropped again ("s1", "s2")`, left: []string{"other"},
			journal: []string{"replication_slot:5432:s1 " + dropped, "replication_slot:5432:s2 " + dropped}},
		{name: "only the first was made",
			has:     []string{"s1"},
			want:    `; the replication slots made on standby1 are dropped again ("s1")`,
			journal: []string{"replication_slot:5432:s1 " + dropped, "replication_slot:5432:s2 " + never}},
		{name: "none was made",
			has:  []string{"other"},
			want: `; standby1 has none of the replication slots the switchover was to make on it ("s1", "s2")`, left: []string{"other"},
			journal: []string{"replication_slot:5432:s1 " + never, "replication_slot:5432:s2 " + never}},
		{name: "a drop fails: the others are dropped, the failure named",
			has: []string{"s1", "s2"}, dropFails: map[string]bool{"s1": true},
			want: `; the replication slots made on standby1 are dropped again ("s2"); dropping replication slots made on standby1 FAILED: "s1" (`, left: []string{"s1"},
			journal: []string{"replication_slot:5432:s1", "replication_slot:5432:s2 " + dropped}},
		{name: "the slots cannot be read again",
			has: []string{"s1"}, readFails: true,
			want: `; reading the replication slots of standby1 again FAILED (`, left: []string{"s1"},
			journal: []string{"replication_slot:5432:s1", "replication_slot:5432:s2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &slotServer{slots: tc.has, dropFails: tc.dropFails, readFails: tc.readFails}
			m, j, journal := journaledStandby(t, srv)
			for _, n := range []string{"s1", "s2"} {
				if err := j.record(context.Background(), n); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // a second Ctrl-C: the undo runs all the same
			err := slotsBack(ctx, errors.New("abandoned"), m, []string{"s1", "s2"}, j)
			if got, want := err.Error(), "abandoned"+tc.want; !strings.HasPrefix(got, want) {
				t.Errorf("undo says %q, want %q", got, want)
			}
			if tc.readFails && !strings.Contains(err.Error(), `drop any of "s1", "s2" it has on it by hand`) {
				t.Errorf("undo says %q: names no slot to drop by hand", err)
			}
			if strings.Join(srv.slots, ",") != strings.Join(tc.left, ",") {
				t.Errorf("slots left %q, want %q", srv.slots, tc.left)
			}
			if got := journal(); !reflect.DeepEqual(got, tc.journal) {
				t.Errorf("journal\n%q\nwant\n%q", got, tc.journal)
			}
		})
	}
	base := errors.New("abandoned")
	if got := slotsBack(context.Background(), base, swStandby("standby1", "m", "", 0, 0, "on"), nil, nil); got != base {
		t.Errorf("undo of nothing says %v", got)
	}
}

// TestCreateSlotsJournalsFirst: each slot is in the journal on the
// standby before it is made, unsettled: a controller killed right after
// leaves it to rollback.
func TestCreateSlotsJournalsFirst(t *testing.T) {
	srv := &slotServer{}
	m, j, journal := journaledStandby(t, srv)
	srv.onCreate = func(n string) {
		if got := journal(); !slices.Contains(got, "replication_slot:5432:"+n) {
			t.Errorf("slot %q made before it was journaled: journal %q", n, got)
		}
	}
	made, err := createSlots(context.Background(), m, []string{"primary", "standby2"}, j)
	if err != nil || strings.Join(made, ",") != "primary,standby2" {
		t.Fatalf("made %q, %v", made, err)
	}
	want := []string{"replication_slot:5432:primary", "replication_slot:5432:standby2"}
	if got := journal(); !reflect.DeepEqual(got, want) {
		t.Errorf("journal %q, want %q", got, want)
	}
	// Without a journal (check mode, tests driving modules) nothing is
	// journaled, and the slots are made all the same.
	plain := swStandby("standby1", "m", "streaming", 0, 0, "on")
	plain.t.Transport = &slotServer{}
	if newSlotJournal(plain) != nil {
		t.Error("a slot journal without the run's journal")
	}
	if made, err := createSlots(context.Background(), plain, []string{"s1"}, nil); err != nil || len(made) != 1 {
		t.Errorf("without a journal: made %q, %v", made, err)
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
