package patronitest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/internal/testhost"
)

// The Patroni switchover failing: pgtune asks Patroni once, and whatever
// Patroni (or the cluster) says no at that step, the leader stays the one
// leader, writable, not restarted, its patroni.yml put back, the error
// naming the cluster, the member and the step; no row acknowledged by the
// prober is lost and Patroni's history shows no failover.

// plannedKB is the shared_buffers (kB) check planned for a member.
func plannedKB(t *testing.T, s *engine.Session, member string) int64 {
	t.Helper()
	for _, h := range s.Report("check").Hosts {
		if h.Name != member {
			continue
		}
		if h.Error != nil {
			t.Fatalf("%s: check error %s", h.Name, *h.Error)
		}
		if m := plannedSB.FindStringSubmatch(changeAfter(h, "Patroni local parameters")); m != nil {
			kb, _ := strconv.ParseInt(m[1], 10, 64)
			return kb
		}
	}
	t.Fatalf("%s: no shared_buffers planned", member)
	return 0
}

// atLeaderStep runs do once Patroni has written the leader's planned
// shared_buffers into the postgresql.conf it generates: pgtune's step on
// the leader has begun (its patroni.yml written and reloaded, every
// replica done before it), and its switchover comes next, after the pool
// check. finish stops waiting and says whether do ran.
func atLeaderStep(t *testing.T, leader *testhost.PatroniMember, kb int64, do func()) (finish func() bool) {
	t.Helper()
	conf := filepath.Join(leader.PG.DataDir, "postgresql.conf")
	want := fmt.Sprintf("shared_buffers = '%dkB'", kb)
	written := func() bool {
		b, err := os.ReadFile(conf)
		return err == nil && slices.Contains(strings.Split(string(b), "\n"), want)
	}
	if written() {
		t.Fatalf("%s already has %s before the run", conf, want)
	}
	stop, done := make(chan struct{}, 1), make(chan struct{})
	ran := false
	go func() {
		defer close(done)
		if testhost.AwaitFiles(t, "Patroni to write "+want+" on "+leader.Name, []string{leader.PG.DataDir}, stop, written) {
			do()
			ran = true
		}
	}()
	return func() bool {
		close(stop)
		<-done
		return ran
	}
}

// switchoverRequests counts the POST /switchover requests a member's
// Patroni logged.
func switchoverRequests(t *testing.T, m *testhost.PatroniMember) int {
	t.Helper()
	b, err := os.ReadFile(m.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "received switchover request")
}

// oneLeader fails unless Patroni lists exactly one leader, running.
func oneLeader(t *testing.T, pc *testhost.PatroniCluster) {
	t.Helper()
	st, err := pc.ClusterState()
	if err != nil {
		t.Fatal(err)
	}
	var leaders []string
	for _, m := range st.Members {
		if m.Role == "leader" {
			leaders = append(leaders, m.Name+" ("+m.State+")")
		}
	}
	if len(leaders) != 1 || !strings.HasSuffix(leaders[0], "(running)") {
		t.Errorf("Patroni lists leaders %v, want one running", leaders)
	}
}

// failedSwitchover is what every switchover-failure subtest asserts once
// the run is over: the leader failed with an error naming its cluster,
// member and the switchover step and saying its patroni.yml is back, not
// restarted; every replica restarted on the new values; the leader and
// its configuration as before; no failover in Patroni's history; the
// cluster writable through its one leader.
type failedSwitchover struct {
	leader   *testhost.PatroniMember
	history  int
	requests int // POST /switchover the leader had logged before
	configs  map[string]string
	started  map[string]string
	pending  string // the leader's settings pending a restart
	conf     string // the leader's postgresql.conf (Patroni's)
}

func beforeSwitchover(t *testing.T, r *rig) *failedSwitchover {
	t.Helper()
	leader := r.pc.Leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	return &failedSwitchover{leader: leader, history: len(r.pc.History(t)), requests: switchoverRequests(t, leader),
		configs: r.configs(t), started: r.startTimes(t), pending: pendingSettings(t, leader), conf: patroniConf(t, leader)}
}

func (f *failedSwitchover) check(t *testing.T, r *rig, s *engine.Session, wantRequests int, why ...string) {
	t.Helper()
	l := f.leader
	for _, h := range s.Report("apply").Hosts {
		if h.Name != l.Name {
			if h.Status != report.Changed || h.Error != nil {
				t.Errorf("replica %s: apply status %s, error %v; want changed", h.Name, h.Status, deref(h.Error))
			}
			continue
		}
		if h.Status != report.Failed || h.Error == nil {
			t.Errorf("leader %s: apply status %s, error %v; want failed", h.Name, h.Status, deref(h.Error))
			continue
		}
		t.Logf("%s: %s", h.Name, *h.Error)
		want := append([]string{fmt.Sprintf("Patroni cluster %q, member %q", r.pc.Scope, l.Name), "step switchover",
			"previous " + l.ConfigFile + " put back and reloaded, member not restarted"}, why...)
		for _, w := range want {
			if !strings.Contains(*h.Error, w) {
				t.Errorf("leader %s: error does not say %q: %s", h.Name, w, *h.Error)
			}
		}
	}
	if now := r.configs(t); now[l.Name] != f.configs[l.Name] {
		t.Errorf("leader %s: patroni.yml was not put back", l.Name)
	}
	now := r.startTimes(t)
	for name := range r.byName {
		if restarted := now[name] != f.started[name]; restarted != (name != l.Name) {
			t.Errorf("%s restarted: %v; want the replicas only", name, restarted)
		}
	}
	if nl := r.pc.Leader(); nl == nil || nl.Name != l.Name {
		t.Errorf("the leader changed from %s", l.Name)
	}
	oneLeader(t, r.pc)
	if h := r.pc.History(t); len(h) != f.history {
		t.Errorf("Patroni history went from %d to %d entries: a failover? %s", f.history, len(h), h)
	}
	if n := switchoverRequests(t, l) - f.requests; n != wantRequests {
		t.Errorf("%s's Patroni received %d switchover requests, want %d", l.Name, n, wantRequests)
	}
	if conf := patroniConf(t, l); conf != f.conf {
		t.Errorf("leader %s: Patroni's postgresql.conf is not as before the run:\n%s\nwas:\n%s", l.Name, conf, f.conf)
	}
	// Patroni rewrites postgresql.conf and reloads the server at its next
	// loop after pgtune's POST /reload: bounded by that, not by a sleep.
	// The settings pending a restart are those pending before the run.
	deadline := time.Now().Add(testhost.HangGuard)
	for {
		pending := pendingSettings(t, l)
		if pending == f.pending {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("leader %s: settings pending restart %q after the put-back, %q before the run", l.Name, pending, f.pending)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// patroniConf is the postgresql.conf Patroni generates for a member.
func patroniConf(t *testing.T, m *testhost.PatroniMember) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(m.PG.DataDir, "postgresql.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pendingSettings names the settings a member's server has pending a
// restart, with the value its configuration files now give them.
func pendingSettings(t *testing.T, m *testhost.PatroniMember) string {
	t.Helper()
	return m.PG.Query(t, "SELECT coalesce(string_agg(name || '=' || setting, ',' ORDER BY name), '') FROM "+
		"(SELECT DISTINCT ON (f.name) f.name, f.setting FROM pg_file_settings f JOIN pg_settings s USING (name) WHERE s.pending_restart ORDER BY f.name, f.seqno DESC) x")
}

// pausedAfterCheck: the cluster is paused between check and apply.
// Apply's first step, on the first replica, reads the pause before it
// changes anything and stops the cluster's rollout: nothing written,
// nothing restarted, no switchover asked.
func pausedAfterCheck(t *testing.T, r *rig, share int64) {
	s := r.plan(t, share, "switchover")
	for _, h := range s.Report("check").Hosts {
		if h.Error != nil || changeAfter(h, "Patroni local parameters") == "" {
			t.Fatalf("%s: check error %v, changes %v", h.Name, deref(h.Error), h.Changes)
		}
	}
	f := beforeSwitchover(t, r)
	first := firstReplica(r.pc)
	if f.pending != "" {
		t.Logf("leader %s has settings pending a restart before the run: %s", f.leader.Name, f.pending)
	}
	r.pc.SetPaused(t, true)
	paused := true
	defer func() {
		if paused {
			r.pc.SetPaused(t, false)
		}
	}()
	probe := startProber(t, r.pc)
	s.Apply(context.Background())
	r.pc.SetPaused(t, false)
	paused = false
	r.pc.WaitHealthy(t)
	t.Logf("longest write gap %v", probe.Finish(t))
	for _, h := range s.Report("apply").Hosts {
		switch {
		case h.Status != report.Failed || h.Error == nil:
			t.Errorf("%s: apply status %s, error %v; want failed", h.Name, h.Status, deref(h.Error))
		case h.Name == first:
			t.Logf("%s: %s", h.Name, *h.Error)
			for _, w := range []string{fmt.Sprintf("Patroni cluster %q, member %q", r.pc.Scope, first),
				"step check before any change", "paused", "nothing was changed"} {
				if !strings.Contains(*h.Error, w) {
					t.Errorf("%s: error does not say %q: %s", h.Name, w, *h.Error)
				}
			}
		case !strings.Contains(*h.Error, first+" of the same cluster failed"):
			t.Errorf("%s: error does not say the rollout stopped at %s: %s", h.Name, first, *h.Error)
		}
	}
	if now := r.configs(t); fmt.Sprint(now) != fmt.Sprint(f.configs) {
		t.Error("a patroni.yml changed")
	}
	if now := r.startTimes(t); fmt.Sprint(now) != fmt.Sprint(f.started) {
		t.Errorf("a member restarted: %v → %v", f.started, now)
	}
	if nl := r.pc.Leader(); nl == nil || nl.Name != f.leader.Name {
		t.Errorf("the leader changed from %s", f.leader.Name)
	}
	oneLeader(t, r.pc)
	if h := r.pc.History(t); len(h) != f.history {
		t.Errorf("Patroni history went from %d to %d entries: a failover? %s", f.history, len(h), h)
	}
	if n := switchoverRequests(t, f.leader) - f.requests; n != 0 {
		t.Errorf("%d switchover requests reached Patroni", n)
	}
}

// switchoverRefusedByPatroni: the replicas are restarted on the new
// values, and when pgtune's step on the leader has begun both replicas'
// Patroni stop answering (SIGSTOP: their servers stream on, their member
// keys stay in etcd until their TTL). pgtune picks a candidate from GET
// /cluster as listed, and Patroni refuses the POST /switchover (HTTP 412:
// it cannot reach the candidate, so no good candidate). The leader must
// stay the leader, not restarted, with its patroni.yml put back.
func switchoverRefusedByPatroni(t *testing.T, r *rig, share int64) {
	s := r.plan(t, share, "switchover")
	f := beforeSwitchover(t, r)
	var thaws []func()
	probe := startProber(t, r.pc)
	finish := atLeaderStep(t, f.leader, plannedKB(t, s, f.leader.Name), func() {
		for _, m := range r.pc.Members {
			if m != f.leader {
				thaws = append(thaws, m.Freeze(t))
			}
		}
	})
	s.Apply(context.Background())
	ran := finish()
	for _, thaw := range thaws {
		thaw()
	}
	if !ran {
		t.Fatal("pgtune's step on the leader never began: the replicas were not frozen")
	}
	r.pc.WaitHealthy(t)
	t.Logf("longest write gap %v", probe.Finish(t))
	f.check(t, r, s, 1, "Patroni refused the switchover", "HTTP 412")
}

// pausedAtSwitchover: the cluster is paused once pgtune's step on the
// leader has begun, after the replicas were restarted. pgtune reads the
// pause from GET /cluster (the DCS as it is) right before asking for the
// switchover, and asks nothing: a paused Patroni would carry out a
// switchover to a named candidate, and pgtune does not work in pause.
func pausedAtSwitchover(t *testing.T, r *rig, share int64) {
	s := r.plan(t, share, "switchover")
	f := beforeSwitchover(t, r)
	paused := false
	defer func() {
		if paused {
			r.pc.SetPaused(t, false)
		}
	}()
	probe := startProber(t, r.pc)
	finish := atLeaderStep(t, f.leader, plannedKB(t, s, f.leader.Name), func() {
		r.pc.PatchConfig(t, `{"pause": true}`)
	})
	s.Apply(context.Background())
	if !finish() {
		t.Fatal("pgtune's step on the leader never began: the cluster was not paused")
	}
	paused = true
	r.pc.SetPaused(t, false)
	paused = false
	r.pc.WaitHealthy(t)
	t.Logf("longest write gap %v", probe.Finish(t))
	f.check(t, r, s, 0, "paused")
}

// demotedStartRefused: the switchover is carried out, and the old
// primary's start as a replica on the new values is refused: another
// process takes the pool the moment its server stops for the demotion,
// leaving room for its old segment only. pgtune must see the failed start
// (not wait it out), put the previous patroni.yml back and have Patroni
// start it on it, as a replica of the new leader; the new leader (the
// one switchover in Patroni's history) is writable and no acknowledged
// row is lost.
func demotedStartRefused(t *testing.T, r *rig, share, total int64) {
	const more = 8
	if err := testhost.WriteSysctl("vm.nr_hugepages", strconv.FormatInt(total+3*more, 10)); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := testhost.WriteSysctl("vm.nr_hugepages", strconv.FormatInt(total, 10)); err != nil {
			t.Error(err)
		}
	}()
	s := r.plan(t, share+more*r.hpBytes, "switchover")
	for _, h := range s.Report("check").Hosts {
		if h.Error != nil || changeAfter(h, "Patroni local parameters") == "" {
			t.Fatalf("%s: check error %v, changes %v", h.Name, deref(h.Error), h.Changes)
		}
	}
	f := beforeSwitchover(t, r)
	old := f.leader
	oldSB, oldHP := old.PG.Query(t, "SHOW shared_buffers"), old.PG.HugetlbPages(t) > 0
	oldPages, err := strconv.ParseInt(old.PG.Query(t, "SHOW shared_memory_size_in_huge_pages"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	probe := startProber(t, r.pc)
	var holder *poolHolder
	// The holder waits for the leader's stop from pgtune's step on it
	// on: the replicas' restarts come first.
	finish := atLeaderStep(t, old, plannedKB(t, s, old.Name), func() {
		holder = holdPoolWhenStopped(t, old, oldPages+2, r.hpBytes)
	})
	s.Apply(context.Background())
	if !finish() {
		t.Fatal("pgtune's step on the leader never began")
	}
	held, err := holder.release()
	if err != nil {
		t.Fatalf("the holder could not take the pool: %v", err)
	}
	if held <= 0 {
		t.Fatalf("the holder took no huge pages when %s stopped: the start was not provoked to fail", old.Name)
	}
	t.Logf("the holder took %d huge pages when %s stopped", held, old.Name)
	r.pc.WaitHealthy(t)
	t.Logf("longest write gap %v (one switchover)", probe.Finish(t))

	nl := r.pc.Leader()
	if nl == nil || nl.Name == old.Name {
		t.Fatalf("no switchover: leader %v", nl)
	}
	oneLeader(t, r.pc)
	for _, h := range s.Report("apply").Hosts {
		if h.Name != old.Name {
			if h.Status != report.Changed || h.Error != nil {
				t.Errorf("replica %s: apply status %s, error %v; want changed", h.Name, h.Status, deref(h.Error))
			}
			continue
		}
		if h.Status != report.Failed || h.Error == nil {
			t.Errorf("old primary %s: apply status %s, error %v; want failed", h.Name, h.Status, deref(h.Error))
			continue
		}
		t.Logf("%s: %s", h.Name, *h.Error)
		for _, w := range []string{fmt.Sprintf("Patroni cluster %q, member %q", r.pc.Scope, old.Name),
			fmt.Sprintf("step start as a replica after the switchover to %q", nl.Name), "start failed",
			"previous " + old.ConfigFile + " put back, member running again on it"} {
			if !strings.Contains(*h.Error, w) {
				t.Errorf("old primary %s: error does not say %q: %s", h.Name, w, *h.Error)
			}
		}
	}
	if now := r.configs(t); now[old.Name] != f.configs[old.Name] {
		t.Errorf("old primary %s: patroni.yml was not put back", old.Name)
	}
	if sb := old.PG.Query(t, "SHOW shared_buffers"); sb != oldSB {
		t.Errorf("old primary %s runs with shared_buffers %s, not the previous %s", old.Name, sb, oldSB)
	}
	if rec := old.PG.Query(t, "SELECT pg_is_in_recovery()"); rec != "t" {
		t.Errorf("old primary %s: in recovery %s, want a replica", old.Name, rec)
	}
	if hp := old.PG.HugetlbPages(t); hp <= 0 && oldHP {
		t.Errorf("old primary %s: not on huge pages after the put-back", old.Name)
	}
	h := r.pc.History(t)
	if len(h) != f.history+1 || !strings.Contains(string(h[len(h)-1]), nl.Name) {
		t.Errorf("Patroni history went from %d to %d entries, want the one switchover to %s: %s", f.history, len(h), nl.Name, h)
	}
	if n := switchoverRequests(t, old) - f.requests; n != 1 {
		t.Errorf("%s's Patroni received %d switchover requests, want 1", old.Name, n)
	}
}

// replicasNofailover: with every replica tagged nofailover (Patroni
// promotes none of them), check refuses the leader's switchover, naming
// the tags, and apply touches no member. With the tags set only after
// check, the replicas are restarted and pgtune, reading GET /cluster right
// before asking, finds no candidate and asks nothing: the leader stays,
// not restarted, its patroni.yml put back.
func replicasNofailover(t *testing.T, r *rig, share int64) {
	leader := r.pc.Leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	var replicas []*testhost.PatroniMember
	for _, m := range r.pc.Members {
		if m != leader {
			replicas = append(replicas, m)
		}
	}
	tagged := false
	tag := func(on bool) {
		for _, m := range replicas {
			r.pc.SetNofailover(t, m, on)
		}
		tagged = on
	}
	defer func() {
		if tagged {
			tag(false)
		}
	}()

	// Tagged at check: refused before any member moves.
	tag(true)
	s := r.plan(t, share, "switchover")
	f := beforeSwitchover(t, r)
	for _, h := range s.Report("check").Hosts {
		if h.Name == leader.Name && !strings.Contains(strings.Join(h.Notes, "\n"), "primary: switchover refused: every other member is tagged nofailover") {
			t.Errorf("leader %s: check does not say the switchover is refused: %v", h.Name, h.Notes)
		}
	}
	s.Apply(context.Background())
	for _, h := range s.Report("apply").Hosts {
		switch {
		case h.Status != report.Failed || h.Error == nil:
			t.Errorf("%s: apply status %s, error %v; want failed", h.Name, h.Status, deref(h.Error))
		case h.Name == leader.Name:
			t.Logf("%s: %s", h.Name, *h.Error)
			for _, w := range []string{fmt.Sprintf("Patroni cluster %q, member %q", r.pc.Scope, leader.Name),
				"switchover refused before any member of the cluster is touched", "nofailover"} {
				if !strings.Contains(*h.Error, w) {
					t.Errorf("leader %s: error does not say %q: %s", h.Name, w, *h.Error)
				}
			}
		case !strings.Contains(*h.Error, leader.Name+" of the same cluster failed before apply"):
			t.Errorf("%s: error does not say the rollout stopped at %s: %s", h.Name, leader.Name, *h.Error)
		}
	}
	if now := r.configs(t); fmt.Sprint(now) != fmt.Sprint(f.configs) {
		t.Error("a patroni.yml changed")
	}
	if now := r.startTimes(t); fmt.Sprint(now) != fmt.Sprint(f.started) {
		t.Errorf("a member restarted: %v → %v", f.started, now)
	}
	if t.Failed() {
		return
	}

	// Tagged after check: the replicas go first, the leader's step finds
	// no candidate.
	tag(false)
	s = r.plan(t, share, "switchover")
	f = beforeSwitchover(t, r)
	tag(true)
	probe := startProber(t, r.pc)
	s.Apply(context.Background())
	tag(false)
	r.pc.WaitHealthy(t)
	t.Logf("longest write gap %v", probe.Finish(t))
	f.check(t, r, s, 0, "no replica to switch over to", "nofailover")
}
