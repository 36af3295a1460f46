package pgconf

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/internal/fakehost"
)

func TestParseSlotKey(t *testing.T) {
	for _, tc := range []struct {
		key  string
		port int
		name string
		ok   bool
	}{
		{key: "replication_slot:5432:standby1", port: 5432, name: "standby1", ok: true},
		{key: slotKey(6543, "s_2"), port: 6543, name: "s_2", ok: true},
		// Host input: the name is checked as every slot name read.
		{key: "replication_slot:5432:Standby1"},
		{key: "replication_slot:5432:a-b"},
		{key: "replication_slot:5432:" + strings.Repeat("a", 64)},
		{key: "replication_slot:5432:"},
		{key: "replication_slot:05432:s1"},
		{key: "replication_slot:0:s1"},
		{key: "replication_slot:65536:s1"},
		{key: "replication_slot:5432:s1:x"},
		{key: "oom_score_adj:5432:s1"},
	} {
		port, name, ok := parseSlotKey(tc.key)
		if ok != tc.ok || port != tc.port || name != tc.name {
			t.Errorf("parseSlotKey(%q) = %d, %q, %v; want %d, %q, %v", tc.key, port, name, ok, tc.port, tc.name, tc.ok)
		}
	}
}

// slotTarget is a host whose server (port 5432) is srv, as rollback
// sees it.
func slotTarget(srv *slotServer, running bool) *engine.Target {
	return &engine.Target{Name: "standby1", Transport: srv, Facts: &facts.Facts{
		Postgres: &facts.Postgres{DataDir: "/pg", ConfigFile: "/pg/postgresql.conf", SocketDir: "/run/pg", Port: 5432, Running: running}}}
}

// TestSlotRemovable: rollback drops a slot a killed switchover left only
// when it is still there, physical, unused, on a server still a standby;
// otherwise it says why it leaves it. A key naming another server or a
// name PostgreSQL would not allow is refused.
func TestSlotRemovable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		srv     slotServer
		stopped bool
		key     string
		present bool
		keep    string // a part of it
		err     string
		left    string // the slots after Remove
	}{
		{name: "unused on a standby: dropped", srv: slotServer{slots: []string{"other", "s1"}}, present: true, left: "other"},
		{name: "gone already", srv: slotServer{slots: []string{"other"}}, left: "other"},
		{name: "in use", srv: slotServer{slots: []string{"s1"}, active: map[string]bool{"s1": true}}, present: true, keep: "in use", left: "s1"},
		{name: "promoted", srv: slotServer{slots: []string{"s1"}, primary: true}, present: true, keep: "a primary now", left: "s1"},
		{name: "logical", srv: slotServer{slots: []string{"s1"}, logical: map[string]bool{"s1": true}}, present: true, keep: "logical", left: "s1"},
		{name: "server stopped", srv: slotServer{slots: []string{"s1"}}, stopped: true, present: true, keep: "not running", left: "s1"},
		{name: "another server's", srv: slotServer{slots: []string{"s1"}}, key: "replication_slot:6543:s1", err: "port 6543", left: "s1"},
		{name: "a name PostgreSQL would not allow", srv: slotServer{slots: []string{"s1"}}, key: "replication_slot:5432:S1", err: "not a replication slot pgtune makes", left: "s1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := tc.key
			if key == "" {
				key = slotKey(5432, "s1")
			}
			srv := tc.srv
			tg := slotTarget(&srv, !tc.stopped)
			present, keep, err := (&Module{}).Removable(context.Background(), tg, key)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
			} else if err != nil || present != tc.present || !strings.Contains(keep, tc.keep) || (tc.keep == "") != (keep == "") {
				t.Fatalf("Removable = %v, %q, %v; want %v, %q", present, keep, err, tc.present, tc.keep)
			}
			rerr := (&Module{}).Remove(context.Background(), tg, key)
			if (rerr != nil) != (tc.err != "" || tc.keep != "") {
				t.Errorf("Remove: %v", rerr)
			}
			if got := strings.Join(srv.slots, ","); got != tc.left {
				t.Errorf("slots after Remove %q, want %q", got, tc.left)
			}
		})
	}
}

// TestManagesSlots: rollback acts on a created entry of pgconf only when
// it names a slot of the host's own server by a name PostgreSQL allows.
func TestManagesSlots(t *testing.T) {
	tg := slotTarget(&slotServer{}, true)
	for key, want := range map[string]bool{
		"replication_slot:5432:standby1": true,
		"replication_slot:6543:standby1": false,
		"replication_slot:5432:Standby1": false,
		"oom_score_adj:5432:standby1":    false,
	} {
		if got := (&Module{}).Manages(tg, "created", key); got != want {
			t.Errorf("Manages(created, %q) = %v, want %v", key, got, want)
		}
	}
	if (&Module{}).Manages(tg, "live", "replication_slot:5432:standby1") {
		t.Error("manages a live value")
	}
	if !(&Module{}).Manages(tg, "file", "/pg/postgresql.conf") {
		t.Error("no longer manages its configuration file")
	}
}

// TestNoteLeftSlots: check says, on a running standby, which slots a
// killed switchover left there unused (journaled, never settled); not
// those gone, in use, settled, or of another server, and nothing on a
// primary (no journal is even read there).
func TestNoteLeftSlots(t *testing.T) {
	const state = "/var/lib/pgtune/runs"
	const run = "20261130T190000Z-a1b2c3-slots-5432"
	journal := engine.JournalRecord{RunID: run, Host: "standby1", Entries: []engine.JournalEntry{
		{Kind: "created", Module: Name, Key: slotKey(5432, "left")},
		{Kind: "created", Module: Name, Key: slotKey(5432, "inuse")},
		{Kind: "created", Module: Name, Key: slotKey(5432, "gone")},
		{Kind: "created", Module: Name, Key: slotKey(5432, "settled"), Settled: "dropped again: the switchover was abandoned before the promotion"},
		{Kind: "created", Module: Name, Key: slotKey(6543, "other")},
	}}
	body, err := json.Marshal(journal)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		role string
		want []string
	}{
		{role: "standby", want: []string{`replication slot "left" was made on this standby by switchover run ` + run + `, which was interrupted before it was done with it: it is unused and retains WAL here; pgtune rollback drops it (or drop it by hand: pg_drop_replication_slot)`}},
		{role: "primary"},
	} {
		t.Run(tc.role, func(t *testing.T) {
			h := fakehost.New()
			h.StateDir = state
			h.Files[state+"/"+run+"/journal.json"] = string(body)
			srv := &slotServer{slots: []string{"inuse", "left", "settled", "other"}, active: map[string]bool{"inuse": true}}
			h.Other = srv.Run
			tg := slotTarget(srv, true)
			tg.Transport, tg.StateDir = h, state
			tg.Facts.Topology = &facts.Topology{Role: tc.role}
			p := &plan.ModulePlan{Module: Name}
			(&Module{}).noteLeftSlots(context.Background(), tg, p)
			if !reflect.DeepEqual(p.Notes, tc.want) {
				t.Errorf("notes\n%q\nwant\n%q", p.Notes, tc.want)
			}
			h.Lock()
			read := slices.Contains(h.Log, "journals "+state)
			h.Unlock()
			if read != (tc.role == "standby") {
				t.Errorf("journals read: %v", read)
			}
		})
	}
}
