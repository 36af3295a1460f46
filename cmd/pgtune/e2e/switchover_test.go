package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/internal/testhost"
)

// TestSwitchoverStreaming: a real primary and two standbys (pg_basebackup,
// primary_conninfo in postgresql.conf with a password), each behind a
// real sshd, taken to the policy
// with primary: switchover, while a prober writes a row every 100 ms
// through target_session_attrs=read-write: both standbys are restarted
// before the primary goes down; one of them is promoted; the old primary
// and the other standby stream from it on the new timeline; no
// acknowledged row is lost; every member runs the new shared_buffers on
// huge pages. The longest write gap is logged. Then rollback: --run on
// the switchover's run is refused (it is kept); a rollback of the
// settings puts every member back on its old shared_buffers and keeps
// the roles: the promoted standby stays the one primary, the old primary
// keeps its standby.signal, and both others stream from the new primary
// (the other standby's postgresql.conf, changed by both runs, keeps its
// repointed primary_conninfo); no acknowledged row is lost.
func TestSwitchoverStreaming(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: three PostgreSQL servers and the kernel")
	}
	f := newStreamingFixture(t, "60s", nil)
	set, members, inv, book := f.set, f.members, f.inv, f.book
	code, planned, stderr := pgtune(t, "check", "-i", inv, book)
	if code != 2 {
		t.Fatalf("check: exit %d: %s\n%s", code, hostErrors(planned), stderr)
	}
	for _, h := range planned.Hosts {
		if h.Name == "primary" && !strings.Contains(strings.Join(h.Notes, "\n"), "primary: switchover: apply switches over") {
			t.Errorf("check does not say the primary is switched over: %q", h.Notes)
		}
	}
	started := map[string]string{}
	for name, c := range members {
		started[name] = c.Query(t, "SELECT pg_postmaster_start_time()")
	}

	probe := testhost.StartProber(t, set.Members()...)
	begin := time.Now()
	code, applied, stderr := pgtune(t, "apply", "--yes", "-i", inv, book)
	took := time.Since(begin)
	gap := probe.Finish(t)
	if code != 0 {
		t.Fatalf("apply: exit %d: %s\n%s", code, hostErrors(applied), stderr)
	}
	t.Logf("apply took %v; longest write gap %v", took.Round(time.Millisecond), gap.Round(time.Millisecond))
	if strings.Contains(stderr, testhost.ReplicaPassword) || strings.Contains(fmt.Sprint(applied), testhost.ReplicaPassword) {
		t.Error("apply shows primary_conninfo's password")
	}

	// Roles: exactly one standby promoted, the old primary its standby.
	newPrimary := onePrimary(t, members)
	if newPrimary == "" || newPrimary == "primary" {
		t.Fatalf("the primary role did not move (primary now: %q)", newPrimary)
	}
	np := members[newPrimary]
	tl := np.Query(t, "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int")
	for name, c := range members {
		if name == newPrimary {
			continue
		}
		awaitStreamingFrom(t, name, c, newPrimary, np, tl)
	}

	// Order: both standbys restarted and back before the old primary
	// first went down (the switchover's stop).
	// (The old primary's own start as a standby logs to the file pgtune's
	// restart picks for a stopped server: only its stop is read here.)
	down := firstShutdown(t, set.Primary)
	for _, name := range []string{"standby1", "standby2"} {
		_, up := firstRestart(t, members[name])
		if !down.After(up) {
			t.Errorf("the primary went down at %s, before %s was back (%s)", down.Format(time.StampMilli), name, up.Format(time.StampMilli))
		}
	}
	want := np.Query(t, "SHOW shared_buffers")
	defer rollbackAfterSwitchover(t, f, newPrimary)
	for name, c := range members {
		if c.Query(t, "SELECT pg_postmaster_start_time()") == started[name] {
			t.Errorf("%s was not restarted", name)
		}
		if got := c.Query(t, "SHOW shared_buffers"); got != want || got == "16MB" {
			t.Errorf("%s: shared_buffers %s (the promoted standby runs %s, the old value was 16MB)", name, got, want)
		}
		if hp := c.Query(t, "SHOW huge_pages"); hp != "on" || c.HugetlbPages(t) <= 0 {
			t.Errorf("%s: huge_pages %s, HugetlbPages %d", name, hp, c.HugetlbPages(t))
		}
	}
}

// firstRestart is when the server first received a shutdown request, and
// when it next said it accepts connections.
func firstRestart(t *testing.T, c *testhost.Cluster) (down, up time.Time) {
	t.Helper()
	logLines(t, c, func(ts time.Time, l string) bool {
		switch {
		case down.IsZero() && strings.Contains(l, "shutdown request"):
			down = ts
		case !down.IsZero() && strings.Contains(l, "database system is ready to accept"):
			up = ts
			return false
		}
		return true
	})
	if up.IsZero() {
		t.Fatalf("%s: no restart in its log", c.DataDir)
	}
	return down, up
}

// hostErrors lists the hosts' errors of a report.
func hostErrors(r jsonReport) string {
	var out []string
	for _, h := range r.Hosts {
		if h.Error != nil {
			out = append(out, h.Name+": "+*h.Error)
		}
	}
	return strings.Join(out, "\n")
}

// firstShutdown is when the server first received a shutdown request.
func firstShutdown(t *testing.T, c *testhost.Cluster) time.Time {
	t.Helper()
	for _, l := range strings.Split(c.Log(t), "\n") {
		if len(l) < 23 || !strings.Contains(l, "shutdown request") {
			continue
		}
		if ts, err := time.Parse("2006-01-02 15:04:05.000", l[:23]); err == nil {
			return ts
		}
	}
	t.Fatalf("%s: no shutdown request in its log", c.DataDir)
	return time.Time{}
}

// rollbackAfterSwitchover is TestSwitchoverStreaming's rollback part.
func rollbackAfterSwitchover(t *testing.T, f *streamingFixture, newPrimary string) {
	if t.Failed() {
		return
	}
	kept, _ := filepath.Glob(filepath.Join(f.work, "primary", "state", "*-switchover"))
	if len(kept) != 1 {
		t.Fatalf("the old primary's switchover runs: %q", kept)
	}
	id := filepath.Base(kept[0])
	code, r, stderr := pgtune(t, "rollback", "--yes", "-i", f.inv, "--run", id)
	if msg := hostError(r, "primary"); code != 1 || !strings.Contains(msg, "run "+id+" is kept: ") || !strings.Contains(msg, "pgtune rollback never undoes it") {
		t.Errorf("rollback --run %s: exit %d, primary: %s\n%s", id, code, msg, stderr)
	}

	np := f.members[newPrimary]
	probe := testhost.StartProber(t, f.set.Members()...)
	code, r, stderr = pgtune(t, "rollback", "--yes", "-i", f.inv)
	gap := probe.Finish(t)
	t.Logf("rollback: longest write gap %v", gap.Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("rollback: exit %d: %s\n%s", code, hostErrors(r), stderr)
	}
	if got := f.onePrimary(t); got != newPrimary {
		t.Errorf("after rollback the primary is %s, not %s", got, newPrimary)
	}
	if !exists(filepath.Join(f.members["primary"].DataDir, "standby.signal")) {
		t.Error("rollback took the old primary's standby.signal")
	}
	tl := np.Query(t, "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int")
	for name, c := range f.members {
		if got := c.Query(t, "SHOW shared_buffers"); got != "16MB" {
			t.Errorf("%s: shared_buffers %s after rollback, want 16MB", name, got)
		}
		if name == newPrimary {
			continue
		}
		awaitStreamingFrom(t, name+" (after rollback)", c, newPrimary, np, tl)
	}
	if _, err := os.Stat(filepath.Join(f.members["primary"].DataDir, "conf.d", "002-hugepages.conf")); err == nil {
		t.Error("the drop-in is still there after rollback")
	}
}

// awaitStreamingFrom waits until c's WAL receiver streams from np on
// timeline tl. It asks every 200 ms for up to a minute: a server pgtune
// restarted logs into its data directory, and nothing else need change
// on disk once it streams (no writes go on), so there is no file event
// to wait on.
func awaitStreamingFrom(t *testing.T, name string, c *testhost.Cluster, npName string, np *testhost.Cluster, tl string) {
	t.Helper()
	want := fmt.Sprintf("streaming %s %d", tl, np.Port)
	var out string
	var err error
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		out, err = c.TryQuery("SELECT status || ' ' || received_tli || ' ' || sender_port FROM pg_stat_wal_receiver")
		if err == nil && out == want {
			return
		}
	}
	t.Errorf("%s does not stream from %s within a minute: WAL receiver %q (%v), want %q", name, npName, out, err, want)
}

// TestSwitchoverSlots: the standbys stream through physical slots on the
// primary (primary_slot_name), as most production standbys do. The
// switchover creates on the standby it promotes, before the promotion, a
// slot for the other standby and one for the old primary (named as the
// promoted standby's own was); the old primary starts as a standby with
// that primary_slot_name; every standby streams from the new primary
// through its slot; the old primary's slots the members used are dropped
// on it (it no longer retains WAL for them), and apply says what it
// created and dropped. A slot of no member (a logical slot, as a change
// data capture tool keeps) is left on the old primary, and named.
func TestSwitchoverSlots(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: three PostgreSQL servers, three sshd and the kernel")
	}
	f := newStreamingFixture(t, "60s", func(set *testhost.ReplicaSet) {
		streamThroughSlots(t, set)
		set.Primary.Stop(t)
		set.Primary.AppendConf(t, "wal_level = logical")
		set.Primary.Start(t)
		set.Primary.Query(t, "SELECT pg_create_logical_replication_slot('cdc', 'test_decoding')")
		set.WaitStreaming(t)
	})
	members := f.members
	code, applied, stderr := pgtune(t, "apply", "--yes", "-i", f.inv, f.book)
	if code != 0 {
		for name, c := range members {
			logLines(t, c, func(_ time.Time, l string) bool {
				if strings.Contains(l, "replication slot") {
					t.Logf("%s: %s", name, l)
				}
				return true
			})
		}
		t.Fatalf("apply: exit %d: %s\n%s", code, hostErrors(applied), stderr)
	}
	newPrimary := f.onePrimary(t)
	if newPrimary == "primary" {
		t.Fatal("the primary role did not move")
	}
	np := members[newPrimary]
	other := map[string]string{"standby1": "standby2", "standby2": "standby1"}[newPrimary]
	tl := np.Query(t, "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int")
	for _, name := range []string{"primary", other} {
		awaitStreamingFrom(t, name, members[name], newPrimary, np, tl)
	}
	// The old primary streams through the slot the promoted standby used
	// to stream through; the other standby through its own, now on the
	// new primary.
	if got := members["primary"].Query(t, "SHOW primary_slot_name"); got != newPrimary {
		t.Errorf("the old primary's primary_slot_name is %q, want %q", got, newPrimary)
	}
	want := "standby1 true|standby2 true"
	if got := strings.ReplaceAll(np.Query(t, "SELECT string_agg(slot_name || ' ' || active, '|' ORDER BY slot_name) FROM pg_replication_slots"), "\n", ""); got != want {
		t.Errorf("the new primary's slots: %q, want %q", got, want)
	}
	if got := members["primary"].Query(t, "SELECT string_agg(slot_name || ' ' || slot_type, ',') FROM pg_replication_slots"); got != "cdc logical" {
		t.Errorf("the old primary keeps the slots %q, want its logical slot only", got)
	}
	for _, w := range []string{"created replication slots on the standby to promote", "slots=standby1,standby2",
		"dropped replication slots on the old primary", "replication slots of no member left on the old primary", "slots=cdc"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("apply does not say %q:\n%s", w, stderr)
		}
	}
	// Journaled on the promoted standby before they were made, settled
	// as kept once it was promoted: rollback leaves them alone.
	wantJournal := []string{}
	for _, s := range []string{"standby1", "standby2"} {
		wantJournal = append(wantJournal, s+" kept: the standby was promoted and the members stream through them")
	}
	if got := slotJournal(t, f, newPrimary); strings.Join(got, "|") != strings.Join(wantJournal, "|") {
		t.Errorf("the slot journal on %s: %q, want %q", newPrimary, got, wantJournal)
	}
	t.Logf("apply said:\n%s", lastN(stderr, 12))
	rollbackAfterSwitchover(t, f, newPrimary)
}

// TestSwitchoverOverTCP: the standbys stream over TCP from 127.0.0.1
// (all three servers share this machine, so the address alone ties no
// standby to its WAL sender): the switchover ties each one's sender by
// the client port its kernel shows, promotes one, and every member
// streams from it, over TCP, on the new timeline.
func TestSwitchoverOverTCP(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: three PostgreSQL servers and the kernel")
	}
	f := newStreamingFixture(t, "60s", func(set *testhost.ReplicaSet) {
		for i, s := range set.Standbys {
			s.AppendConf(t, fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%d user=postgres password=%s application_name=standby%d'",
				set.Primary.Port, testhost.ReplicaPassword, i+1))
			s.Stop(t)
			s.Start(t)
		}
		for end := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
			out, err := set.Primary.TryQuery("SELECT count(*) FROM pg_stat_replication WHERE client_addr = '127.0.0.1' AND client_port > 0 AND state = 'streaming'")
			if err == nil && out == "2" {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("the standbys do not stream over TCP within a minute: %q (%v)", out, err)
			}
		}
	})
	code, applied, stderr := pgtune(t, "apply", "--yes", "-i", f.inv, f.book)
	if code != 0 {
		t.Fatalf("apply: exit %d: %s\n%s", code, hostErrors(applied), stderr)
	}
	newPrimary := onePrimary(t, f.members)
	if newPrimary == "" || newPrimary == "primary" {
		t.Fatalf("the primary role did not move (primary now: %q)", newPrimary)
	}
	np := f.members[newPrimary]
	tl := np.Query(t, "SELECT ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int")
	for name, c := range f.members {
		if name != newPrimary {
			awaitStreamingFrom(t, name, c, newPrimary, np, tl)
		}
	}
	if got := np.Query(t, "SELECT count(*) FROM pg_stat_replication WHERE client_addr = '127.0.0.1' AND client_port > 0"); got != "2" {
		t.Errorf("%s's WAL senders over TCP: %s, want the other two members", newPrimary, got)
	}
}

// onePrimary is the one member that takes writes ("" when none does).
func onePrimary(t *testing.T, members map[string]*testhost.Cluster) string {
	t.Helper()
	var primary string
	for name, c := range members {
		if c.Query(t, "SELECT pg_is_in_recovery()") == "f" {
			if primary != "" {
				t.Fatalf("two primaries: %s and %s", primary, name)
			}
			primary = name
		}
	}
	return primary
}
