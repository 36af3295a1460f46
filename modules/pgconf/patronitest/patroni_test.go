package patronitest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/internal/testhost"
	"github.com/pgtune/pgtune/modules/pgconf"
)

// rig is the shared Patroni cluster and an inventory of its three members
// (one host per member, named after it, over the local connection).
type rig struct {
	pc      *testhost.PatroniCluster
	inv     *inventory.Inventory
	work    string
	byName  map[string]*testhost.PatroniMember
	hpBytes int64
	// step is the pages a test moves a share or the pool by: 8 MiB (4
	// pages of 2 MiB), one page of a larger default size.
	step    int64
	runs    int
	lastRun string       // the last run's ID
	log     bytes.Buffer // the last run's log
	before  *snapshot
}

// snapshot is the members' patroni.yml and running shared_buffers before
// a run.
type snapshot struct {
	configs, sharedBuffers map[string]string
}

func (r *rig) snapshot(t *testing.T) *snapshot {
	sb := map[string]string{}
	for name, m := range r.byName {
		sb[name] = m.PG.Query(t, "SHOW shared_buffers")
	}
	return &snapshot{configs: r.configs(t), sharedBuffers: sb}
}

func newRig(t *testing.T, pc *testhost.PatroniCluster, hpBytes int64) *rig {
	t.Helper()
	r := &rig{pc: pc, work: t.TempDir(), byName: map[string]*testhost.PatroniMember{}, hpBytes: hpBytes}
	var b strings.Builder
	b.WriteString("all:\n  hosts:\n")
	for _, m := range pc.Members {
		r.byName[m.Name] = m
		fmt.Fprintf(&b, "    %s:\n      connection: local\n      pg_data: %s\n      pg_bin: %s\n      pgtune_state_dir: %s\n",
			m.Name, m.PG.DataDir, m.PG.BinDir, filepath.Join(r.work, m.Name, "state"))
	}
	inv, err := inventory.Parse("inventory.yml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	r.inv = inv
	return r
}

// runner is an engine runner for the rig's next run (its own run ID).
func (r *rig) runner(mods map[string]engine.Module) *engine.Runner {
	r.runs++
	r.lastRun = fmt.Sprintf("20261201T020000Z-patr%02d", r.runs)
	// With -v, the run's log (each step's time) goes to the test's output.
	var logTo io.Writer = io.Discard
	if testing.Verbose() {
		logTo = os.Stderr
	}
	r.log.Reset()
	return &engine.Runner{Modules: mods, Forks: 3, Dial: engine.Dial, HostTimeout: 10 * time.Minute,
		RunID: r.lastRun, StreamTimeout: 2 * time.Minute,
		Log: slog.New(slog.NewTextHandler(io.MultiWriter(logTo, &r.log), nil))}
}

// plan runs check with a pgconf policy of this pool (bytes) and primary
// choice, keeping the session open for apply.
func (r *rig) plan(t *testing.T, pool int64, primary string) *engine.Session {
	t.Helper()
	mods, reg := engine.Registry(pgconf.New())
	book, err := playbook.Parse("book.yml", []byte(fmt.Sprintf(
		"- hosts: all\n  policy:\n    pgconf:\n      pool: %d\n      primary: %s\n", pool, primary)), reg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.runner(mods).Plan(context.Background(), r.inv, book, r.inv.Hosts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// startTimes is each member's pg_postmaster_start_time().
func (r *rig) startTimes(t *testing.T) map[string]string {
	out := map[string]string{}
	for name, m := range r.byName {
		out[name] = m.PG.Query(t, "SELECT pg_postmaster_start_time()")
	}
	return out
}

func (r *rig) configs(t *testing.T) map[string]string {
	out := map[string]string{}
	for name, m := range r.byName {
		b, err := os.ReadFile(m.ConfigFile)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = string(b)
	}
	return out
}

var plannedSB = regexp.MustCompile(`shared_buffers=([0-9]+)kB`)

// TestPatroniRollout takes a real three-member Patroni cluster to the
// policy through Patroni: check plans each member's patroni.yml
// parameters and a restart through its REST API and reports the DCS's
// shared_buffers as overridden; apply with primary: switchover, under a
// prober writing through the current leader, restarts the replicas one
// at a time, switches over, restarts the old primary; every member ends
// on huge pages with its planned shared_buffers, no acknowledged row is
// lost and Patroni's history has the one switchover. Then a member whose
// Patroni stops answering stops the cluster's rollout, naming it, with
// nothing restarted and the cluster writable; a start refused after the
// pool check is put back; the leader is restarted in place; rollback
// goes back through Patroni; and a switchover that fails (paused after
// check, refused by Patroni, paused at the switchover step) leaves the
// leader as it was, not restarted and writable. Every REST call is over HTTPS with the
// certificate checked (and a client certificate shown).
func TestPatroniRollout(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: etcd, Patroni, PostgreSQL and the kernel")
	}
	// Over HTTPS, as a certificate-checked member's API: its certificate
	// names localhost only and a client certificate is required. Built
	// before the kernel lock is taken (its members run off huge pages
	// until pgtune puts them there): other packages' kernel tests need not
	// wait on etcd, three initdb and Patroni's bootstrap. Stopped before
	// the lock goes (StopOnCleanup below): checked in a cleanup registered
	// before the lock is taken, so run after it is let go.
	pc := testhost.PatroniWith(t, 3, testhost.PatroniOptions{TLS: true})
	if testhost.HoldsKernel(t) {
		t.Error("the Patroni cluster is built under the kernel lock")
	}
	t.Cleanup(func() {
		for _, m := range pc.Members {
			if m.PG.Running() {
				t.Errorf("%s's PostgreSQL still runs after the kernel lock was let go", m.Name)
			}
		}
	})
	kernel := testhost.LockKernel(t)
	pc.StopOnCleanup(t)
	// It idled while the lock was awaited: on a loaded machine its leader
	// may have changed meanwhile. Formed again before it is used.
	pc.WaitHealthy(t)
	// The three members share this machine's pool: room for three small
	// segments beside the pages others hold, each member a third (48 MiB,
	// or one page of a larger default size).
	hpKB := kernel.Meminfo["Hugepagesize"]
	step := kernel.PagesFor(8 << 20)
	perMember := max(kernel.PagesFor(48<<20), 3*step)
	total := kernel.MakeRoom(t, 3*perMember+2)
	// A cluster-wide shared_buffers in the DCS, which each member's
	// patroni.yml overrides: check must report it.
	pc.PatchConfig(t, `{"postgresql": {"parameters": {"shared_buffers": "24MB"}}}`)
	r := newRig(t, pc, hpKB*1024)
	r.step = step
	share := perMember * hpKB * 1024

	leader := pc.Leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	wantSB := map[string]int64{}
	var s *engine.Session
	t.Run("check", func(t *testing.T) {
		configs, started := r.configs(t), r.startTimes(t)
		s = r.plan(t, share, "switchover")
		for _, h := range s.Report("check").Hosts {
			checkPlan(t, h, h.Name == leader.Name)
			if m := plannedSB.FindStringSubmatch(changeAfter(h, "Patroni local parameters")); m != nil {
				kb, _ := strconv.ParseInt(m[1], 10, 64)
				wantSB[h.Name] = kb
			}
		}
		if len(wantSB) != 3 {
			t.Fatalf("planned shared_buffers for %d members, want 3: %v", len(wantSB), wantSB)
		}
		if now := r.configs(t); fmt.Sprint(now) != fmt.Sprint(configs) {
			t.Error("check changed a patroni.yml")
		}
		if now := r.startTimes(t); fmt.Sprint(now) != fmt.Sprint(started) {
			t.Error("check restarted a member")
		}
	})
	if t.Failed() {
		return
	}

	t.Run("switchover under a prober", func(t *testing.T) {
		started := r.startTimes(t)
		probe := startProber(t, pc)
		t0 := time.Now()
		s.Apply(context.Background())
		took := time.Since(t0)
		pc.WaitHealthy(t)
		gap := probe.Finish(t)
		t.Logf("rollout took %v; longest write gap %v", took.Round(time.Millisecond), gap.Round(time.Millisecond))
		for _, h := range s.Report("apply").Hosts {
			if h.Status != report.Changed || h.Error != nil {
				t.Errorf("%s: apply status %s, error %v", h.Name, h.Status, deref(h.Error))
			}
		}
		for name, m := range r.byName {
			if m.PG.Query(t, "SELECT pg_postmaster_start_time()") == started[name] {
				t.Errorf("%s was not restarted", name)
			}
			if hp := m.PG.HugetlbPages(t); hp <= 0 {
				t.Errorf("%s: not on huge pages", name)
			}
			blocks, _ := strconv.ParseInt(m.PG.Query(t, "SELECT setting FROM pg_settings WHERE name = 'shared_buffers'"), 10, 64)
			if blocks*8 != wantSB[name] {
				t.Errorf("%s runs with shared_buffers %d kB, planned %d kB", name, blocks*8, wantSB[name])
			}
			if hp := m.PG.Query(t, "SHOW huge_pages"); hp != "on" {
				t.Errorf("%s: huge_pages %s", name, hp)
			}
		}
		checkOrder(t, r, leader.Name)
		h := pc.History(t)
		if len(h) != 1 {
			t.Fatalf("Patroni history has %d entries, want the one switchover: %s", len(h), h)
		}
		if nl := pc.Leader(); nl == nil || nl.Name == leader.Name || !strings.Contains(string(h[0]), nl.Name) {
			t.Errorf("history %s: want a switchover from %s to the new leader", h[0], leader.Name)
		}
	})
	if t.Failed() {
		return
	}

	t.Run("pool shrunk after check", func(t *testing.T) {
		// Planned for a bigger segment against a pool grown for it, then
		// the pool shrinks back: the first replica's restart would be
		// refused (huge_pages = on), which on a primary Patroni would
		// turn into a failover. pgtune must see it before restarting.
		more := 2 * r.step
		before := strconv.FormatInt(total, 10)
		if err := testhost.WriteSysctl("vm.nr_hugepages", strconv.FormatInt(total+more, 10)); err != nil {
			t.Fatal(err)
		}
		s := r.plan(t, share+more*r.hpBytes, "restart")
		for _, h := range s.Report("check").Hosts {
			if h.Error != nil || changeAfter(h, "Patroni local parameters") == "" {
				t.Fatalf("%s: check error %v, changes %v", h.Name, deref(h.Error), h.Changes)
			}
		}
		configs, started := r.configs(t), r.startTimes(t)
		first := firstReplica(pc)
		pending := pendingSettings(t, r.byName[first])
		if err := testhost.WriteSysctl("vm.nr_hugepages", before); err != nil {
			t.Fatal(err)
		}
		if got, _ := testhost.ReadSysctl("vm.nr_hugepages"); got != before {
			t.Fatalf("the pool did not shrink back to %s: %s", before, got)
		}
		s.Apply(context.Background())
		for _, h := range s.Report("apply").Hosts {
			if h.Status != report.Failed || h.Error == nil || !strings.Contains(*h.Error, first) {
				t.Errorf("%s: apply status %s, error %v; want failed, naming %s", h.Name, h.Status, deref(h.Error), first)
			}
			if h.Name == first && !strings.Contains(*h.Error, "would refuse to start") {
				t.Errorf("%s: error does not say the server would not start: %s", h.Name, *h.Error)
			}
		}
		if now := r.configs(t); fmt.Sprint(now) != fmt.Sprint(configs) {
			t.Error("a patroni.yml was not put back")
		}
		if now := r.startTimes(t); fmt.Sprint(now) != fmt.Sprint(started) {
			t.Errorf("a member restarted: %v → %v", started, now)
		}
		// Put back onto the values it runs with, Patroni does not rewrite
		// its postgresql.conf: pgtune gives it back, nothing left pending
		// for a later start to take.
		if now := pendingSettings(t, r.byName[first]); now != pending {
			t.Errorf("%s: settings pending restart %q after the put-back, %q before", first, now, pending)
		}
	})

	t.Run("member unreachable", func(t *testing.T) {
		// A smaller share: every member plans a new shared_buffers.
		s := r.plan(t, share-r.step*r.hpBytes, "restart")
		for _, h := range s.Report("check").Hosts {
			if h.Error != nil || changeAfter(h, "Patroni local parameters") == "" {
				t.Fatalf("%s: check error %v, changes %v", h.Name, deref(h.Error), h.Changes)
			}
		}
		first := firstReplica(pc)
		configs, started := r.configs(t), r.startTimes(t)
		thaw := r.byName[first].Freeze(t)
		s.Apply(context.Background())
		thaw()
		for _, h := range s.Report("apply").Hosts {
			if h.Status != report.Failed || h.Error == nil {
				t.Errorf("%s: apply status %s, error %v; want failed", h.Name, h.Status, deref(h.Error))
				continue
			}
			if h.Name == first && !strings.Contains(*h.Error, first) {
				t.Errorf("%s: error does not name the member: %s", h.Name, *h.Error)
			}
			if h.Name != first && !strings.Contains(*h.Error, first) {
				t.Errorf("%s: error does not say the rollout stopped at %s: %s", h.Name, first, *h.Error)
			}
		}
		if now := r.configs(t); fmt.Sprint(now) != fmt.Sprint(configs) {
			t.Error("a patroni.yml changed")
		}
		if now := r.startTimes(t); fmt.Sprint(now) != fmt.Sprint(started) {
			t.Errorf("a member restarted: %v → %v", started, now)
		}
		// The cluster still takes writes through its leader.
		probe := startProber(t, pc)
		if out, err := probe.WriteOnce(); err != nil {
			t.Errorf("the cluster does not take writes after the stopped rollout: %v: %s", err, out)
		}
		probe.Finish(t)
	})
	if t.Failed() {
		return
	}

	t.Run("boot fails after the pool check", func(t *testing.T) { bootFailsAfterCheck(t, r, share, total) })
	if t.Failed() {
		return
	}

	t.Run("primary restart in place", func(t *testing.T) { restartInPlace(t, r, share-r.step*r.hpBytes) })
	if t.Failed() {
		return
	}
	t.Run("rollback through Patroni", func(t *testing.T) { rollbackThroughPatroni(t, r) })
	if t.Failed() {
		return
	}

	// The switchover failing (switchfail_test.go).
	t.Run("paused after check", func(t *testing.T) { pausedAfterCheck(t, r, share-4*r.hpBytes) })
	if t.Failed() {
		return
	}
	t.Run("switchover refused by Patroni", func(t *testing.T) { switchoverRefusedByPatroni(t, r, share-4*r.hpBytes) })
	if t.Failed() {
		return
	}
	t.Run("paused at the switchover", func(t *testing.T) { pausedAtSwitchover(t, r, share-8*r.hpBytes) })
	if t.Failed() {
		return
	}
	t.Run("replicas tagged nofailover", func(t *testing.T) { replicasNofailover(t, r, share-4*r.hpBytes) })
	if t.Failed() {
		return
	}
	t.Run("old primary refused as a replica", func(t *testing.T) { demotedStartRefused(t, r, share, total) })
}

// bootFailsAfterCheck: the pool fits the first replica's bigger segment
// when pgtune checks it, and another process takes the pool the moment
// that server stops for its restart (before Patroni starts it again),
// leaving room for the old segment only: the start on the new settings is
// refused. pgtune must put the previous patroni.yml back through Patroni,
// have Patroni start the member on it, and stop the cluster's rollout
// naming the member; the others are not touched, the cluster takes
// writes, and Patroni's history shows no failover.
func bootFailsAfterCheck(t *testing.T, r *rig, share, total int64) {
	more := 2 * r.step
	if err := testhost.WriteSysctl("vm.nr_hugepages", strconv.FormatInt(total+more, 10)); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := testhost.WriteSysctl("vm.nr_hugepages", strconv.FormatInt(total, 10)); err != nil {
			t.Error(err)
		}
	}()
	s := r.plan(t, share+more*r.hpBytes, "restart")
	for _, h := range s.Report("check").Hosts {
		if h.Error != nil || changeAfter(h, "Patroni local parameters") == "" {
			t.Fatalf("%s: check error %v, changes %v", h.Name, deref(h.Error), h.Changes)
		}
	}
	first := r.byName[firstReplica(r.pc)]
	leader := r.pc.Leader()
	history := len(r.pc.History(t))
	configs, started := r.configs(t), r.startTimes(t)
	oldSB := first.PG.Query(t, "SHOW shared_buffers")
	oldPages, err := strconv.ParseInt(first.PG.Query(t, "SHOW shared_memory_size_in_huge_pages"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	// A quarter of `more` to spare for the old segment (two 2 MiB pages,
	// none of a larger size); the new one needs `more`.
	holder := holdPoolWhenStopped(t, first, oldPages+more/4, r.hpBytes)
	s.Apply(context.Background())
	held, err := holder.release()
	if err != nil {
		t.Fatalf("the holder could not take the pool: %v", err)
	}
	if held <= 0 {
		t.Fatalf("the holder took no huge pages when %s stopped: the start was not provoked to fail", first.Name)
	}
	t.Logf("the holder took %d huge pages when %s stopped", held, first.Name)
	r.pc.WaitHealthy(t)

	for _, h := range s.Report("apply").Hosts {
		switch {
		case h.Status != report.Failed || h.Error == nil:
			t.Errorf("%s: apply status %s, error %v; want failed", h.Name, h.Status, deref(h.Error))
		case h.Name == first.Name:
			t.Logf("%s: %s", h.Name, *h.Error)
			for _, want := range []string{first.Name, "pgconf", "previous " + first.ConfigFile + " put back, member running again on it"} {
				if !strings.Contains(*h.Error, want) {
					t.Errorf("%s: error does not say %q: %s", h.Name, want, *h.Error)
				}
			}
		case !strings.Contains(*h.Error, first.Name+" of the same cluster failed"):
			t.Errorf("%s: error does not say the rollout stopped at %s: %s", h.Name, first.Name, *h.Error)
		}
	}
	if now := r.configs(t); fmt.Sprint(now) != fmt.Sprint(configs) {
		t.Error("a patroni.yml was not put back")
	}
	now := r.startTimes(t)
	for name := range r.byName {
		if restarted := now[name] != started[name]; restarted != (name == first.Name) {
			t.Errorf("%s restarted: %v; only %s should have", name, restarted, first.Name)
		}
	}
	if sb := first.PG.Query(t, "SHOW shared_buffers"); sb != oldSB {
		t.Errorf("%s runs with shared_buffers %s, not the previous %s", first.Name, sb, oldSB)
	}
	if hp := first.PG.HugetlbPages(t); hp <= 0 {
		t.Errorf("%s: not on huge pages after the put-back", first.Name)
	}
	if h := r.pc.History(t); len(h) != history {
		t.Errorf("Patroni history went from %d to %d entries: a failover? %s", history, len(h), h)
	}
	if l := r.pc.Leader(); l == nil || l.Name != leader.Name {
		t.Errorf("leader changed from %s", leader.Name)
	}
	probe := startProber(t, r.pc)
	if out, err := probe.WriteOnce(); err != nil {
		t.Errorf("the cluster does not take writes after the put-back: %v: %s", err, out)
	}
	probe.Finish(t)
}

// rollbackThroughPatroni: pgtune rollback of the last run (the in-place
// restart) puts every member's patroni.yml back as it was before it,
// never showing its content (it holds passwords), and restarts the
// members through Patroni, replicas first and one at a time, onto their
// previous shared_buffers, with no failover.
func rollbackThroughPatroni(t *testing.T, r *rig) {
	to, before := r.lastRun, r.before
	if before == nil {
		t.Fatal("no run to roll back")
	}
	leader := r.pc.Leader()
	history := len(r.pc.History(t))
	for name, conf := range r.configs(t) {
		if conf == before.configs[name] {
			t.Fatalf("%s: the run %s did not change patroni.yml", name, to)
		}
	}
	since := time.Now()
	mods, _ := engine.Registry(pgconf.New())
	s := r.runner(mods).PlanRollback(context.Background(), r.inv.Hosts, to)
	defer s.Close()
	s.Apply(context.Background())
	r.pc.WaitHealthy(t)
	for _, phase := range []string{"check", "apply"} {
		var text, js strings.Builder
		if err := report.WriteText(&text, s.Report(phase)); err != nil {
			t.Fatal(err)
		}
		if err := report.WriteJSON(&js, s.Report(phase)); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(text.String()+js.String(), testhost.PatroniPassword) {
			t.Errorf("rollback's %s report shows a patroni.yml password", phase)
		}
	}
	if strings.Contains(r.log.String(), testhost.PatroniPassword) {
		t.Error("rollback's log shows a patroni.yml password")
	}
	for _, h := range s.Report("apply").Hosts {
		if h.Status != report.Changed || h.Error != nil {
			t.Errorf("%s: rollback status %s, error %v", h.Name, h.Status, deref(h.Error))
		}
	}
	now := r.configs(t)
	for name, m := range r.byName {
		if now[name] != before.configs[name] {
			t.Errorf("%s: patroni.yml is not the one before run %s", name, to)
		}
		if sb := m.PG.Query(t, "SHOW shared_buffers"); sb != before.sharedBuffers[name] {
			t.Errorf("%s runs with shared_buffers %s after rollback, want the previous %s", name, sb, before.sharedBuffers[name])
		}
		if hp := m.PG.HugetlbPages(t); hp <= 0 {
			t.Errorf("%s: not on huge pages after rollback", name)
		}
	}
	checkOrderSince(t, r, leader.Name, since)
	if h := r.pc.History(t); len(h) != history {
		t.Errorf("Patroni history went from %d to %d entries: a failover? %s", history, len(h), h)
	}
	if l := r.pc.Leader(); l == nil || l.Name != leader.Name {
		t.Errorf("leader changed from %s", leader.Name)
	}
}

// restartInPlace: primary: restart takes every member to a smaller
// segment, the leader restarted in place through Patroni (which keeps its
// leader lock): no failover, same leader, all on huge pages.
func restartInPlace(t *testing.T, r *rig, share int64) {
	leader := r.pc.Leader()
	history := len(r.pc.History(t))
	started, before := r.startTimes(t), r.snapshot(t)
	s := r.plan(t, share, "restart")
	s.Apply(context.Background())
	r.before = before // for rollbackThroughPatroni
	r.pc.WaitHealthy(t)
	for _, h := range s.Report("apply").Hosts {
		if h.Status != report.Changed || h.Error != nil {
			t.Errorf("%s: apply status %s, error %v", h.Name, h.Status, deref(h.Error))
		}
	}
	for name, m := range r.byName {
		if m.PG.Query(t, "SELECT pg_postmaster_start_time()") == started[name] {
			t.Errorf("%s was not restarted", name)
		}
		if hp := m.PG.HugetlbPages(t); hp <= 0 {
			t.Errorf("%s: not on huge pages", name)
		}
	}
	if h := r.pc.History(t); len(h) != history {
		t.Errorf("Patroni history went from %d to %d entries: a failover? %s", history, len(h), h)
	}
	if l := r.pc.Leader(); l == nil || l.Name != leader.Name {
		t.Errorf("leader changed from %s", leader.Name)
	}
}

// checkPlan: a member's plan goes through Patroni only.
func checkPlan(t *testing.T, h report.Host, isLeader bool) {
	t.Helper()
	if h.Error != nil {
		t.Errorf("%s: check error %s", h.Name, *h.Error)
		return
	}
	var params, restart bool
	for _, c := range h.Changes {
		switch {
		case c.Kind == "file":
			t.Errorf("%s: plans a file %s under Patroni", h.Name, c.Target)
		case strings.HasPrefix(c.Target, "Patroni local parameters: ") && strings.HasSuffix(c.Target, "patroni.yml postgresql.parameters"):
			params = strings.Contains(c.After, "huge_pages=on") && !strings.Contains(c.After+c.Before, testhost.PatroniPassword)
		case c.Kind == "restart":
			restart = strings.Contains(c.Target, "through Patroni") && strings.Contains(c.Target, "switch over") == isLeader &&
				strings.Contains(c.Target, "https://localhost:") // the HTTPS API, by the name its certificate carries
		}
	}
	if !params || !restart {
		t.Errorf("%s: want patroni.yml parameters and a restart through Patroni (switchover on the leader): %v", h.Name, h.Changes)
	}
	notes := strings.Join(h.Notes, "\n")
	if !strings.Contains(notes, "/config") || !strings.Contains(notes, "shared_buffers = 24MB") {
		t.Errorf("%s: check does not report the DCS's shared_buffers: %s", h.Name, notes)
	}
}

func changeAfter(h report.Host, prefix string) string {
	for _, c := range h.Changes {
		if strings.HasPrefix(c.Target, prefix) {
			return c.After
		}
	}
	return ""
}

// down is a span of time a server was not serving: from a shutdown
// request in its log to its next "ready to accept".
type down struct {
	member   string
	from, to time.Time
}

// downs reads a member's server log (PostgreSQL logs to Patroni's output,
// with its own timestamp format).
func downs(t *testing.T, m *testhost.PatroniMember) []down {
	var out []down
	var open *down
	for _, l := range strings.Split(m.PG.Log(t), "\n") {
		if len(l) < 23 {
			continue
		}
		ts, err := time.Parse("2006-01-02 15:04:05.000", l[:23])
		if err != nil {
			continue
		}
		switch {
		case strings.Contains(l, "shutdown request") && open == nil:
			open = &down{member: m.Name, from: ts}
		case strings.Contains(l, "ready to accept") && open != nil:
			open.to = ts
			out = append(out, *open)
			open = nil
		}
	}
	return out
}

// checkOrder: no two members were down at once, and every replica's
// restart ended before the old primary first went down.
func checkOrder(t *testing.T, r *rig, oldLeader string) {
	t.Helper()
	checkOrderSince(t, r, oldLeader, time.Time{})
}

// checkOrderSince is checkOrder for the restarts since a time (the
// server logs' timestamps are UTC).
func checkOrderSince(t *testing.T, r *rig, oldLeader string, since time.Time) {
	t.Helper()
	var all []down
	for _, m := range r.pc.Members {
		var d []down
		for _, x := range downs(t, m) {
			if !x.from.Before(since.UTC()) {
				d = append(d, x)
			}
		}
		if len(d) == 0 {
			t.Errorf("%s: no restart in its log", m.Name)
		}
		all = append(all, d...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].from.Before(all[j].from) })
	for i := 1; i < len(all); i++ {
		if all[i].from.Before(all[i-1].to) {
			t.Errorf("%s went down at %s while %s was down (%s–%s)", all[i].member, all[i].from.Format("15:04:05.000"),
				all[i-1].member, all[i-1].from.Format("15:04:05.000"), all[i-1].to.Format("15:04:05.000"))
		}
	}
	for i, d := range all {
		t.Logf("down %d: %s %s–%s", i, d.member, d.from.Format("15:04:05.000"), d.to.Format("15:04:05.000"))
	}
	if len(all) > 0 && all[0].member == oldLeader {
		t.Errorf("the old primary %s went down first", oldLeader)
	}
	seenLeader := false
	for _, d := range all {
		if d.member == oldLeader {
			seenLeader = true
		} else if seenLeader {
			t.Errorf("replica %s went down after the old primary %s", d.member, oldLeader)
		}
	}
}

// firstReplica is the replica the rollout takes first (by name).
func firstReplica(pc *testhost.PatroniCluster) string {
	l := pc.Leader()
	var names []string
	for _, m := range pc.Members {
		if l == nil || m.Name != l.Name {
			names = append(names, m.Name)
		}
	}
	sort.Strings(names)
	return names[0]
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
