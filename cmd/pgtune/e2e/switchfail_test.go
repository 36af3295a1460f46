package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgtune/pgtune/internal/testhost"
)

// streamingFixture is a real primary and two pg_basebackup standbys on
// loopback, each member behind a real sshd of its own (so one member's
// sshd can die alone), with an inventory and a playbook of the policy.
type streamingFixture struct {
	set       *testhost.ReplicaSet
	members   map[string]*testhost.Cluster
	sshd      map[string]*testhost.SSHServer
	work      string
	inv, book string
}

// newStreamingFixture builds the cluster and writes the play: every
// member's segment fits this machine's pool (reserveMemberPools, which
// holds the kernel lock), primary: switchover with the given
// switchover_timeout. before runs on the set before the members are
// read (a test's sabotage). The servers, their sshd and before's
// sabotage come first, outside the kernel lock (see reserveMemberPools):
// building them is the slowest part and needs no kernel.
func newStreamingFixture(t *testing.T, timeout string, before func(set *testhost.ReplicaSet)) *streamingFixture {
	t.Helper()
	set := testhost.StreamingReplication(t, 2)
	if before != nil {
		before(set)
	}
	f := &streamingFixture{set: set, work: t.TempDir(), sshd: map[string]*testhost.SSHServer{},
		members: map[string]*testhost.Cluster{"primary": set.Primary, "standby1": set.Standbys[0], "standby2": set.Standbys[1]}}
	for name := range f.members {
		f.sshd[name] = testhost.SSHD(t)
	}
	pool, perMember := reserveMemberPools(t, set.Members())
	var b strings.Builder
	b.WriteString("all:\n  children:\n    postgres:\n      hosts:\n")
	for _, name := range []string{"primary", "standby1", "standby2"} {
		c := f.members[name]
		b.WriteString(sshdHost(name, f.sshd[name], "pg_data: "+c.DataDir, "pg_bin: "+c.BinDir,
			"pgtune_state_dir: "+filepath.Join(f.work, name, "state"), "sysctl_dir: "+filepath.Join(f.work, name, "sysctl.d")))
	}
	f.inv = filepath.Join(f.work, "inventory.yml")
	writeFile(t, f.inv, b.String())
	f.book = filepath.Join(f.work, "book.yml")
	writeFile(t, f.book, fmt.Sprintf(`- name: switchover under test
  hosts: postgres
  policy:
    hugepages:
      pool: %d
      sysctl_file: "${vars.sysctl_dir}/10-hugepages.conf"
    pgconf:
      pool: %d
      primary: switchover
      switchover_timeout: %s
`, pool, perMember, timeout))
	return f
}

// pids are the members' postmaster PIDs now.
func (f *streamingFixture) pids(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for name, c := range f.members {
		out[name] = c.PID(t)
	}
	return out
}

// primaries lists the running members that take writes.
func (f *streamingFixture) primaries(t *testing.T) []string {
	t.Helper()
	var out []string
	for name, c := range f.members {
		if !c.Running() {
			continue
		}
		if got, err := c.TryQuery("SELECT pg_is_in_recovery()"); err == nil && got == "f" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// onePrimary fails the test unless exactly one member takes writes, and
// returns it.
func (f *streamingFixture) onePrimary(t *testing.T) string {
	t.Helper()
	p := f.primaries(t)
	if len(p) != 1 {
		t.Fatalf("%d primaries at the end: %q", len(p), p)
	}
	return p[0]
}

// hostError is the named host's error in a report ("" when none).
func hostError(r jsonReport, name string) string {
	for _, h := range r.Hosts {
		if h.Name == name && h.Error != nil {
			return *h.Error
		}
	}
	return ""
}

// restarted waits until member c runs a postmaster other than old and
// accepts connections (pgtune restarted it), while p runs.
func restarted(t *testing.T, p *proc, name string, c *testhost.Cluster, old int) {
	t.Helper()
	waitFor(t, name+" to be restarted", p, c.DataDir, func() bool {
		pid, err := os.ReadFile(filepath.Join(c.DataDir, "postmaster.pid"))
		if err != nil {
			return false
		}
		first, _, _ := strings.Cut(string(pid), "\n")
		return first != strconv.Itoa(old) && c.Ready()
	})
}

// freezeStartup stops (SIGSTOP) the startup process of the standby named
// cluster_name: it receives WAL but replays none. The test thaws it at
// the end.
func freezeStartup(t *testing.T, clusterName string) {
	t.Helper()
	// Frozen before its WAL receiver is streaming, the standby never
	// comes back at all (the startup process starts the receiver), and
	// pgtune stops at that standby instead of at the switchover: wait
	// for it, as pgtune's own check of the standby does.
	deadline := time.Now().Add(2 * time.Minute)
	for !processTitled("postgres: " + clusterName + ": walreceiver streaming") {
		if time.Now().After(deadline) {
			t.Fatalf("%s: no streaming WAL receiver within 2m", clusterName)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.HasPrefix(string(cmd), "postgres: "+clusterName+": startup") {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
		t.Logf("froze %s's startup process (pid %d)", clusterName, pid)
		return
	}
	t.Fatalf("no startup process of %s", clusterName)
}

// TestSwitchoverNoCatchUp: the standbys are restarted on the new values
// and then stop replaying (their startup processes frozen): no standby
// can catch up with the primary within switchover_timeout, so the
// switchover is refused before the primary is touched; the primary keeps
// serving (same postmaster), no acknowledged row is lost.
func TestSwitchoverNoCatchUp(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: three PostgreSQL servers, three sshd and the kernel")
	}
	// The fixture builds its servers before it takes the kernel lock
	// (others' kernel tests need not wait on initdb), and stops them
	// before it lets go (they end on huge pages): checked here once.
	f := newStreamingFixture(t, "3s", func(set *testhost.ReplicaSet) {
		if testhost.HoldsKernel(t) {
			t.Error("the fixture's servers are built under the kernel lock")
		}
		// Registered before the lock is taken, so run after it is let go.
		t.Cleanup(func() {
			for _, c := range set.Members() {
				if c.Running() {
					t.Errorf("%s still runs after the kernel lock was let go", c.DataDir)
				}
			}
		})
	})
	before := f.pids(t)
	probe := testhost.StartProber(t, f.set.Members()...)
	p := startPgtune(t, buildPgtune(t), "apply", "--yes", "--format", "json", "-i", f.inv, f.book)
	restarted(t, p, "standby1", f.members["standby1"], before["standby1"])
	freezeStartup(t, "standby1")
	restarted(t, p, "standby2", f.members["standby2"], before["standby2"])
	freezeStartup(t, "standby2")
	<-p.done
	out := p.out.String()
	if p.code != 1 {
		t.Fatalf("apply: exit %d, want 1\n%s", p.code, out)
	}
	if !strings.Contains(out, "primary: switchover refused, nothing restarted") || !strings.Contains(out, "did not catch up with primary (switchover_timeout)") {
		t.Errorf("apply does not refuse for want of a caught-up standby:\n%s", out)
	}
	if pid := f.members["primary"].PID(t); pid != before["primary"] {
		t.Errorf("the primary was restarted (pid %d → %d)", before["primary"], pid)
	}
	if strings.Contains(f.members["primary"].Log(t), "shutdown request") {
		t.Errorf("the primary was stopped:\n%s", f.members["primary"].Log(t))
	}
	gap := probe.Finish(t)
	t.Logf("longest write gap %v", gap.Round(time.Millisecond))
	if got := f.onePrimary(t); got != "primary" {
		t.Errorf("the primary is %s", got)
	}
}

// TestSwitchoverPromoteTimesOut: the standby pgtune promotes takes longer
// than switchover_timeout to finish its promotion (a recovery_end_command
// that sleeps, as a slow archive clean-up would): pgtune withdraws the
// promotion, stopping that standby, which had begun it and is left
// stopped with standby.signal (it cannot follow the old timeline), and
// only then starts the old primary again as the primary. Exactly one
// primary, the old one; no acknowledged row lost; the gap is logged.
func TestSwitchoverPromoteTimesOut(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: three PostgreSQL servers, three sshd and the kernel")
	}
	// The promotion takes over 60 s (the sleep); the steps before it
	// (catching up, replaying the shutdown checkpoint) take well under a
	// second but share the timeout: 15 s lets a loaded machine do them,
	// and still ends the promotion long before it could finish.
	f := newStreamingFixture(t, "15s", func(set *testhost.ReplicaSet) {
		for _, s := range set.Standbys {
			s.AppendConf(t, "recovery_end_command = 'sleep 60'")
		}
	})
	before := f.pids(t)
	probe := testhost.StartProber(t, f.set.Members()...)
	code, r, stderr := pgtune(t, "apply", "--yes", "-i", f.inv, f.book)
	gap := probe.Finish(t)
	t.Logf("longest write gap %v", gap.Round(time.Millisecond))
	if code != 1 {
		t.Fatalf("apply: exit %d, want 1: %s\n%s", code, hostErrors(r), stderr)
	}
	msg := hostError(r, "primary")
	for _, want := range []string{"switchover abandoned at step promote standby", "pg_promote did not finish within 15 s (switchover_timeout)",
		"primary is the primary again", "had begun its promotion", "is stopped with standby.signal"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the primary's error does not say %q:\n%s", want, msg)
		}
	}
	if got := f.onePrimary(t); got != "primary" {
		t.Errorf("the primary is %s", got)
	}
	if f.members["primary"].PID(t) == before["primary"] {
		t.Error("the primary was never stopped: no switchover was tried")
	}
	for _, name := range []string{"standby1", "standby2"} {
		c := f.members[name]
		if !exists(filepath.Join(c.DataDir, "standby.signal")) {
			t.Errorf("%s has no standby.signal", name)
		}
		if c.Running() {
			if got := c.Query(t, "SELECT pg_is_in_recovery()"); got != "t" {
				t.Errorf("%s: in recovery %s", name, got)
			}
		}
	}
}

// TestSwitchoverOldPrimaryStartFails: after the promotion the old primary,
// made a standby, refuses to start (its max_connections, edited in its
// postgresql.conf beforehand, is below the new primary's, which a hot
// standby refuses). The new primary keeps serving, the old one is left
// stopped with standby.signal, and the error quotes the startup
// process's FATAL line from its log, not a client's refused while it
// started. Exactly one primary, no acknowledged row lost.
func TestSwitchoverOldPrimaryStartFails(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: three PostgreSQL servers, three sshd and the kernel")
	}
	// The switchover's own steps must succeed here, whatever the
	// machine's load: the default timeout (the failure is the start).
	f := newStreamingFixture(t, "60s", func(set *testhost.ReplicaSet) {
		set.Primary.AppendConf(t, "max_connections = 5") // read at its next start only
	})
	probe := testhost.StartProber(t, f.set.Members()...)
	code, r, stderr := pgtune(t, "apply", "--yes", "-i", f.inv, f.book)
	gap := probe.Finish(t)
	t.Logf("longest write gap %v", gap.Round(time.Millisecond))
	if code != 1 {
		t.Fatalf("apply: exit %d, want 1: %s\n%s", code, hostErrors(r), stderr)
	}
	msg := hostError(r, "primary")
	for _, want := range []string{"is the primary now (writable", "step start as standby of",
		"FATAL:  recovery aborted because of insufficient parameter settings", "max_connections = 5 is a lower setting",
		"left stopped with standby.signal"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the primary's error does not say %q:\n%s", want, msg)
		}
	}
	if t.Failed() {
		t.Logf("every host's error:\n%s\n%s", hostErrors(r), stderr)
	}
	if strings.Contains(msg, "the database system is starting up") {
		t.Errorf("the error quotes a client's FATAL: %s", msg)
	}
	got := f.onePrimary(t)
	if got == "primary" {
		t.Errorf("the old primary takes writes")
	}
	old := f.members["primary"]
	if old.Running() || !exists(filepath.Join(old.DataDir, "standby.signal")) {
		t.Errorf("the old primary: running %v, standby.signal %v", old.Running(), exists(filepath.Join(old.DataDir, "standby.signal")))
	}
}

// TestStreamingRolloutStops: a rollout that cannot go on stops before the
// primary is touched: a standby that does not come back (its start
// refused), a member whose sshd dies mid-rollout, a standby that is down,
// a standby whose whole host is down (only its idle slot on the primary
// tells of it: then the other standby is not touched either). The
// primary keeps its postmaster, stays the one primary and writable, and
// no acknowledged row is lost.
func TestStreamingRolloutStops(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: three PostgreSQL servers, three sshd and the kernel")
	}
	for _, tc := range []struct {
		name        string
		before      func(t *testing.T, set *testhost.ReplicaSet)
		unreachable string // its sshd killed before the run
		during      func(t *testing.T, f *streamingFixture, p *proc, pids map[string]int)
		member      string   // named in the errors
		untouched   []string // standbys that keep their postmaster too
	}{
		{name: "a standby does not come back", member: "standby1",
			before: func(t *testing.T, set *testhost.ReplicaSet) {
				set.Standbys[0].AppendConf(t, "max_connections = 5") // below the primary's: refused at start
			}},
		{name: "sshd of a member killed mid-rollout", member: "standby2",
			during: func(t *testing.T, f *streamingFixture, p *proc, pids map[string]int) {
				restarted(t, p, "standby1", f.members["standby1"], pids["standby1"])
				killSSHD(t, f.sshd["standby2"])
			}},
		{name: "a standby is down", member: "standby2",
			before: func(t *testing.T, set *testhost.ReplicaSet) { set.Standbys[1].Stop(t) }},
		{name: "a standby's host is down", member: "standby2\" on primary has no standby streaming through it",
			unreachable: "standby2", untouched: []string{"standby1"},
			before: func(t *testing.T, set *testhost.ReplicaSet) {
				streamThroughSlots(t, set)
				set.Standbys[1].Stop(t)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newStreamingFixture(t, "5s", func(set *testhost.ReplicaSet) {
				if tc.before != nil {
					tc.before(t, set)
				}
			})
			pids := map[string]int{}
			for name, c := range f.members {
				if c.Running() {
					pids[name] = c.PID(t)
				}
			}
			if tc.unreachable != "" {
				killSSHD(t, f.sshd[tc.unreachable])
			}
			probe := testhost.StartProber(t, f.set.Members()...)
			p := startPgtune(t, buildPgtune(t), "apply", "--yes", "-i", f.inv, f.book)
			if tc.during != nil {
				tc.during(t, f, p, pids)
			}
			<-p.done
			gap := probe.Finish(t)
			t.Logf("longest write gap %v", gap.Round(time.Millisecond))
			out := p.out.String()
			if p.code != 1 {
				t.Fatalf("apply: exit %d, want 1\n%s", p.code, out)
			}
			if !strings.Contains(out, tc.member) {
				t.Errorf("apply does not name %s:\n%s", tc.member, out)
			}
			if pid := f.members["primary"].PID(t); pid != pids["primary"] {
				t.Errorf("the primary was touched (pid %d → %d):\n%s", pids["primary"], pid, out)
			}
			for _, m := range tc.untouched {
				if pid := f.members[m].PID(t); pid != pids[m] {
					t.Errorf("%s was restarted while another member was down (pid %d → %d):\n%s", m, pids[m], pid, out)
				}
			}
			if got := f.onePrimary(t); got != "primary" {
				t.Errorf("the primary is %s", got)
			}
			t.Logf("apply said:\n%s", lastN(out, 15))
		})
	}
}

// streamThroughSlots has each standby of set stream through a physical
// slot named after it, as most production standbys do.
func streamThroughSlots(t *testing.T, set *testhost.ReplicaSet) {
	t.Helper()
	for i, s := range set.Standbys {
		name := fmt.Sprintf("standby%d", i+1)
		set.Primary.Query(t, "SELECT pg_create_physical_replication_slot('"+name+"')")
		s.Stop(t)
		s.AppendConf(t, "primary_slot_name = '"+name+"'")
		s.Start(t)
	}
	set.WaitStreaming(t)
}

func lastN(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// processTitled reports whether a process's title begins with prefix.
func processTitled(prefix string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		if cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.HasPrefix(string(cmd), prefix) {
			return true
		}
	}
	return false
}

// TestSwitchoverSlotsUndone: the standbys stream through slots, and the
// standby to promote can hold one replication slot only
// (max_replication_slots = 1): the switchover makes the first slot it
// needs on it, fails to make the second, drops the first again and is
// refused before the primary is touched. The cluster is as it was: the
// primary keeps its postmaster and its slots, the standbys have no slot
// and stream from it.
func TestSwitchoverSlotsUndone(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: three PostgreSQL servers, three sshd and the kernel")
	}
	f := newStreamingFixture(t, "60s", func(set *testhost.ReplicaSet) {
		streamThroughSlots(t, set)
		for _, s := range set.Standbys {
			s.AppendConf(t, "max_replication_slots = 1") // taken at pgtune's restart
		}
	})
	before := f.pids(t)
	slots := "SELECT coalesce(string_agg(slot_name, ',' ORDER BY slot_name), '') FROM pg_replication_slots"
	primarySlots := f.members["primary"].Query(t, slots)
	code, r, stderr := pgtune(t, "apply", "--yes", "-i", f.inv, f.book)
	if code != 1 {
		t.Fatalf("apply: exit %d, want 1: %s\n%s", code, hostErrors(r), stderr)
	}
	msg := hostError(r, "primary")
	t.Logf("the primary's error: %s", msg)
	for _, want := range []string{"switchover refused, nothing restarted", "create replication slot", "are dropped again"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the primary's error does not say %q:\n%s", want, msg)
		}
	}
	if pid := f.members["primary"].PID(t); pid != before["primary"] {
		t.Errorf("the primary was restarted (pid %d → %d)", before["primary"], pid)
	}
	if got := f.onePrimary(t); got != "primary" {
		t.Errorf("the primary is %s", got)
	}
	if got := f.members["primary"].Query(t, slots); got != primarySlots {
		t.Errorf("the primary's slots: %q, were %q", got, primarySlots)
	}
	for _, name := range []string{"standby1", "standby2"} {
		if got := f.members[name].Query(t, slots); got != "" {
			t.Errorf("%s keeps slots %q", name, got)
		}
	}
	// The slots were journaled on the standby before they were made, and
	// settled once dropped (or never made): rollback leaves them alone.
	var journaled []string
	for _, name := range []string{"standby1", "standby2"} {
		journaled = append(journaled, slotJournal(t, f, name)...)
	}
	if len(journaled) == 0 {
		t.Error("no standby's journal holds the slots the switchover made")
	}
	for _, e := range journaled {
		if !strings.Contains(e, " dropped again: ") && !strings.Contains(e, " never made: ") {
			t.Errorf("journaled slot %q is not settled as dropped again or never made", e)
		}
	}
	if !t.Failed() {
		f.set.WaitStreaming(t)
	}
}

// TestSwitchoverSlotsKilled: the standbys stream through slots and the
// controller is killed (SIGKILL) right after the switchover made the
// slots on the standby it was to promote, before the promotion. The slots
// outlive it there (they retain WAL for no one), but they were journaled
// before they were made: the next pgtune rollback of the cluster finds
// them unused on a server that is still a standby, drops them and says
// so; the primary's own slots stay.
func TestSwitchoverSlotsKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: three PostgreSQL servers, three sshd and the kernel")
	}
	bin := buildPgtune(t)
	f := newStreamingFixture(t, "60s", func(set *testhost.ReplicaSet) { streamThroughSlots(t, set) })
	slots := "SELECT coalesce(string_agg(slot_name, ',' ORDER BY slot_name), '') FROM pg_replication_slots"
	primarySlots := f.members["primary"].Query(t, slots)
	runner := fleetHosts{xdg: filepath.Join(f.work, "xdg")}
	code, stderr, _ := runner.run(t, bin, regexp.MustCompile(`created replication slots on the standby to promote`), syscall.SIGKILL,
		"apply", "--yes", "-i", f.inv, f.book)
	if code != 128+int(syscall.SIGKILL) {
		t.Fatalf("apply: exit %d, want killed\n%s", code, stderr)
	}
	// The stop of the primary may have been on its way when the
	// controller died: once it settled, the primary runs again.
	primary := f.members["primary"]
	deadline := time.Now().Add(time.Minute)
	for primary.Running() && !primary.Ready() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // a stop still on its way arrives
	for primary.Running() && !primary.Ready() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if !primary.Running() {
		t.Log("the primary was stopped before the controller died: started again")
		primary.Start(t)
	}
	f.set.WaitStreaming(t)
	if got := f.onePrimary(t); got != "primary" {
		t.Fatalf("the primary is %s", got)
	}
	cand, killedSlots := "", ""
	for _, name := range []string{"standby1", "standby2"} {
		if got := f.members[name].Query(t, slots); got != "" {
			if cand != "" {
				t.Fatalf("both standbys have slots")
			}
			cand, killedSlots = name, got
			t.Logf("after the kill %s has the slots %s", name, got)
		}
	}
	if cand == "" {
		t.Fatalf("no standby has the switchover's slots after the kill:\n%s", lastN(stderr, 12))
	}

	// Journaled on it before they were made, never settled.
	if got, want := strings.Join(slotJournal(t, f, cand), ","), killedSlots; got != want {
		t.Errorf("the slot journal on %s: %q, want the slots %q unsettled", cand, got, want)
	}
	// Meanwhile check says so, on that standby, naming each slot.
	leftNote := func(r jsonReport) string {
		for _, h := range r.Hosts {
			for _, n := range h.Notes {
				if strings.Contains(n, "was made on this standby by switchover run") {
					return h.Name + ": " + n
				}
			}
		}
		return ""
	}
	_, checked, cstderr := pgtune(t, "check", "-i", f.inv, f.book)
	for _, s := range strings.Split(killedSlots, ",") {
		found := false
		for _, h := range checked.Hosts {
			for _, n := range h.Notes {
				found = found || (h.Name == cand && strings.Contains(n, fmt.Sprintf("replication slot %q was made on this standby by switchover run", s)))
			}
		}
		if !found {
			t.Errorf("check does not say slot %s is left on %s: %s\n%s", s, cand, leftNote(checked), lastN(cstderr, 10))
		}
	}
	code, r, rstderr := pgtune(t, "rollback", "--yes", "-i", f.inv)
	if code != 0 {
		t.Fatalf("rollback: exit %d: %s\n%s", code, hostErrors(r), rstderr)
	}
	for _, name := range []string{"standby1", "standby2"} {
		if got := f.members[name].Query(t, slots); got != "" {
			t.Errorf("%s keeps slots %q after rollback", name, got)
		}
	}
	if got := primary.Query(t, slots); got != primarySlots {
		t.Errorf("the primary's slots: %q, were %q", got, primarySlots)
	}
	said := ""
	for _, h := range r.Hosts {
		if h.Name != cand {
			continue
		}
		for _, c := range h.Changes {
			if strings.HasPrefix(c.Target, "replication_slot:") {
				said += c.Target + ": " + c.Before + " → " + c.After + "\n"
			}
		}
	}
	for _, s := range strings.Split(strings.ReplaceAll(killedSlots, ",", " "), " ") {
		if !strings.Contains(said, ":"+s+": ") {
			t.Errorf("rollback's report of %s does not say it dropped slot %s:\n%s", cand, s, said)
		}
	}
	t.Logf("rollback of %s:\n%s", cand, said)
	if _, checked, _ := pgtune(t, "check", "-i", f.inv, f.book); leftNote(checked) != "" {
		t.Errorf("check after rollback still says %s", leftNote(checked))
	}
	if !t.Failed() {
		f.set.WaitStreaming(t)
	}
}

// slotJournal reads the journal of the slots a switchover made on a
// member (run RUN-slots-PORT in its state directory) as "name settled"
// lines, sorted; none when it has no such run.
func slotJournal(t *testing.T, f *streamingFixture, member string) []string {
	t.Helper()
	runs, _ := filepath.Glob(filepath.Join(f.work, member, "state", "*-slots-*", "journal.json"))
	var out []string
	for _, p := range runs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var j struct {
			Kept    string `json:"kept"`
			Entries []struct {
				Kind, Module, Key, Settled string
			} `json:"entries"`
		}
		if err := json.Unmarshal(b, &j); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if j.Kept != "" {
			t.Errorf("%s: a kept run (rollback would never read it)", p)
		}
		for _, e := range j.Entries {
			if e.Kind != "created" || e.Module != "pgconf" || !strings.HasPrefix(e.Key, "replication_slot:") {
				t.Errorf("%s: entry %+v", p, e)
			}
			out = append(out, strings.TrimSpace(e.Key[strings.LastIndexByte(e.Key, ':')+1:]+" "+e.Settled))
		}
	}
	sort.Strings(out)
	return out
}
