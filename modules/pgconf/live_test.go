package pgconf

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// These tests run against a real PostgreSQL 15 cluster made by initdb and
// started with pg_ctl (testhost.Postgres), over the local transport, as
// root. The ones that put the server on huge pages take the machine-wide
// kernel lock and put vm.nr_hugepages back.

func liveTarget(t *testing.T, c *testhost.Cluster) *engine.Target {
	t.Helper()
	// Check and apply read the live huge page pool (room for the segment):
	// another package's test holding pages under the kernel lock would
	// change their answer (a clean-clone CI run failed so), so a test that
	// holds no lock watches the kernel from here on.
	if !testhost.HoldsKernel(t) {
		testhost.WatchKernel(t)
	}
	ctx := context.Background()
	tr := transport.NewLocal()
	f, err := facts.Gather(ctx, tr, facts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pg, err := facts.DiscoverPostgres(ctx, tr, facts.Options{PGData: c.DataDir})
	if err != nil {
		t.Fatal(err)
	}
	f.Postgres = pg
	return &engine.Target{
		Name:      "localhost",
		Transport: tr,
		Facts:     f,
		Scope:     expr.NewScope("test.yml"),
		Log:       slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
}

func params(pool int64, set func(*Params)) *Params {
	p := New().NewParams().(*Params)
	p.Pool = expr.Literal(pool)
	if set != nil {
		set(p)
	}
	return p
}

// snapshot is what must not move during a check.
type snapshot struct {
	files map[string]string
	pid   int
	start string
}

func takeSnapshot(t *testing.T, c *testhost.Cluster) snapshot {
	t.Helper()
	s := snapshot{files: map[string]string{}}
	err := filepath.WalkDir(c.DataDir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != c.DataDir {
			if d.Name() == "conf.d" {
				return nil
			}
			return filepath.SkipDir // the cluster's own data moves by itself
		}
		if strings.HasSuffix(p, ".conf") || strings.HasSuffix(p, ".opts") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s.files[p] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Running() {
		s.pid = c.PID(t)
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(s.pid) + "/stat")
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		s.start = f[19]
	}
	return s
}

func hugePageSize(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Hugepagesize:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n * 1024
		}
	}
	t.Fatal("no Hugepagesize")
	return 0
}

// liveSharedBuffers is the running server's shared_buffers in bytes: what
// initdb chose for it, which depends on the machine (it tries 128MB first
// and takes less where the shared memory it asks for is refused).
func liveSharedBuffers(t *testing.T, c *testhost.Cluster) int64 {
	t.Helper()
	b, err := strconv.ParseInt(c.Query(t, "SELECT setting::bigint * 8192 FROM pg_settings WHERE name = 'shared_buffers'"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func changeTargets(p *plan.ModulePlan) []string {
	var out []string
	for _, c := range p.Changes {
		out = append(out, string(c.Kind)+" "+c.Target)
	}
	return out
}

func TestCheckRunningClusterChangesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	// Check reads the huge page pool: another test's pool in use would
	// change its answer. Other processes may hold pages of it: the pool is
	// grown to make the test's share free beside them (check would refuse
	// a segment that does not fit), so the lock is taken to change it.
	c, pool, hp := clusterWithPool(t)
	tg := liveTarget(t, c)
	initdbSB := liveSharedBuffers(t, c)

	before := takeSnapshot(t, c)
	ctx, scratch := newOwnScratch(t)
	p, err := New().Check(ctx, tg, params(pool, nil))
	if err != nil {
		t.Fatal(err)
	}
	after := takeSnapshot(t, c)
	logPlan(t, p)
	if before.pid != after.pid || before.start != after.start {
		t.Errorf("postmaster moved: %+v → %+v", before, after)
	}
	for f, content := range before.files {
		if after.files[f] != content {
			t.Errorf("%s changed during check", f)
		}
	}
	if len(after.files) != len(before.files) {
		t.Errorf("files appeared during check: %d → %d", len(before.files), len(after.files))
	}
	scratch.check(t)

	dropin := filepath.Join(c.DataDir, "conf.d", "002-hugepages.conf")
	want := []string{"file " + c.ConfigFile(), "file " + dropin, "restart restart postgresql"}
	if got := changeTargets(p); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("changes %q; want %q", got, want)
	}
	st := p.State.(*State)
	slack := (pool/hp - st.SegmentPages) * hp
	if st.SegmentPages > pool/hp || slack > maxSlack(pool, hp) {
		t.Errorf("segment %d pages for a %d-page pool (slack %d)", st.SegmentPages, pool/hp, slack)
	}
	if st.SharedBuffers%8192 != 0 || st.SharedBuffers <= 0 {
		t.Errorf("shared_buffers %d", st.SharedBuffers)
	}
	if p.Outputs["shared_buffers"] != st.SharedBuffers || p.Outputs["segment_pages"] != st.SegmentPages ||
		p.Outputs["segment"] != st.SegmentMB<<20 {
		t.Errorf("outputs %v", p.Outputs)
	}
	inc := p.Changes[0]
	if !strings.Contains(inc.Diff, "+include_dir = 'conf.d'\t# added by pgtune") {
		t.Errorf("include diff:\n%s", inc.Diff)
	}
	rs := p.Changes[2]
	if rs.Before != "shared_buffers="+formatSize(initdbSB)+" huge_pages=off huge_page_size=0" ||
		rs.After != "shared_buffers="+formatSize(st.SharedBuffers)+" huge_pages=on huge_page_size=0" {
		t.Errorf("restart %q → %q", rs.Before, rs.After)
	}
	// The server itself agrees with the sizing: ask it about the drop-in's
	// value with the cluster stopped.
	c.Stop(t)
	out := c.AsOwner(t, filepath.Join(c.BinDir, "postgres"), "-D", c.DataDir, "-C", "shared_memory_size_in_huge_pages",
		"-c", "shared_buffers="+strconv.FormatInt(st.SharedBuffers/1024, 10)+"kB")
	if got := strings.TrimSpace(out); got != strconv.FormatInt(st.SegmentPages, 10) {
		t.Errorf("server says %s pages; plan says %d", got, st.SegmentPages)
	}
	c.Start(t)
	_ = time.Second
}

func logPlan(t *testing.T, p *plan.ModulePlan) {
	t.Helper()
	for _, c := range p.Changes {
		t.Logf("change %s %s: %q → %q\n%s", c.Kind, c.Target, short(c.Before), short(c.After), c.Diff)
	}
	for _, n := range p.Notes {
		t.Logf("note: %s", n)
	}
}

func short(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// testPages is the pool a test cluster is sized to: 128 MiB in pages of
// the default size hp, at least one (a 1 GiB default size gets one page).
func testPages(hp int64) int64 { return max(1, 128<<20/hp) }

// clusterWithPool starts a cluster and, under the kernel lock held until
// the test ends, makes room in the default pool for testPages of its
// huge pages: the pool (bytes) and the page size it returns.
// lockAfter takes the kernel lock for a test whose cluster c is built
// (initdb and first start, off huge pages) before it, so that other
// packages' kernel tests do not wait on that, and has c stopped before the
// lock's restore runs: the pool cannot shrink under a postmaster on it.
func lockAfter(t *testing.T, c *testhost.Cluster) *testhost.KernelState {
	t.Helper()
	kernel := testhost.LockKernel(t)
	testhost.StopOnCleanup(t, c)
	return kernel
}

func clusterWithPool(t *testing.T) (c *testhost.Cluster, pool, hp int64) {
	t.Helper()
	c = testhost.Postgres(t)
	kernel := lockAfter(t, c)
	hp = hugePageSize(t)
	pool = testPages(hp) * hp
	reserve(t, kernel, pool/hp)
	return c, pool, hp
}

// reserve makes room for n pages for the test's cluster in the default
// pool, beside the pages other processes hold when the lock was taken
// (st.ReservedPages): vm.nr_hugepages = those + n, under the kernel lock
// the caller holds. It checks the kernel gave them all: n pages free and
// promised to no one. n 0 leaves no room at all.
func reserve(t *testing.T, st *testhost.KernelState, n int64) {
	t.Helper()
	want := st.ReservedPages() + n
	if err := testhost.WriteSysctl("vm.nr_hugepages", strconv.FormatInt(want, 10)); err != nil {
		t.Fatal(err)
	}
	m, err := testhost.Meminfo()
	if err != nil {
		t.Fatal(err)
	}
	if free := m["HugePages_Free"] - m["HugePages_Rsvd"]; free != n {
		t.Fatalf("kernel gave %d of %d huge pages (%d free for the test of %d asked)", m["HugePages_Total"], want, free, n)
	}
}

func journal(t *testing.T, tg *engine.Target) {
	id := "pgconf-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	tg.Journal = engine.NewJournal(id, tg.Name, t.TempDir(), tg.Transport, false)
	t.Cleanup(func() { os.RemoveAll(tg.Journal.Dir()) })
}

func TestApplyPutsPostgresOnHugePages(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, reserves huge pages")
	}
	c := testhost.Postgres(t)
	// Registered before the lock is taken, so run after it is let go: by
	// then the server pgtune put on huge pages is stopped (lockAfter).
	t.Cleanup(func() {
		if c.Running() {
			t.Error("postgres still runs after the kernel lock was let go")
		}
	})
	kernel := lockAfter(t, c)
	hp := hugePageSize(t)
	pages := testPages(hp)
	reserve(t, kernel, pages)
	origConf, err := os.ReadFile(c.ConfigFile())
	if err != nil {
		t.Fatal(err)
	}
	oldPID := c.PID(t)

	ctx := context.Background()
	tg := liveTarget(t, c)
	journal(t, tg)
	m := New()
	p, err := m.Check(ctx, tg, params(pages*hp, nil))
	if err != nil {
		t.Fatal(err)
	}
	logPlan(t, p)
	if err := m.Apply(ctx, tg, p); err != nil {
		t.Fatalf("apply: %v\nlog:\n%s", err, c.Log(t))
	}
	if err := m.Verify(ctx, tg, p); err != nil {
		t.Fatalf("verify: %v", err)
	}
	st := p.State.(*State)

	// The postmaster is new, on huge pages, with our values.
	if c.PID(t) == oldPID {
		t.Errorf("postmaster pid %d unchanged", oldPID)
	}
	if kb := c.HugetlbPages(t); kb <= 0 {
		t.Errorf("HugetlbPages = %d kB", kb)
	}
	if got := c.Query(t, "SHOW huge_pages"); got != "on" {
		t.Errorf("huge_pages = %q", got)
	}
	if got := c.Query(t, "SELECT setting::bigint * 8192 FROM pg_settings WHERE name = 'shared_buffers'"); got != strconv.FormatInt(st.SharedBuffers, 10) {
		t.Errorf("shared_buffers = %s bytes; planned %d", got, st.SharedBuffers)
	}
	mi, _ := testhost.Meminfo()
	if used := mi["HugePages_Total"] - mi["HugePages_Free"] + mi["HugePages_Rsvd"] - kernel.ReservedPages(); used != st.SegmentPages {
		t.Errorf("huge pages in use or reserved beside the %d others held: %d; planned segment %d pages", kernel.ReservedPages(), used, st.SegmentPages)
	}

	// The files: the drop-in owned by postgres, the include line added
	// once, the replaced postgresql.conf kept in the run's backups.
	dropin := filepath.Join(c.DataDir, "conf.d", "002-hugepages.conf")
	fi, err := os.Stat(dropin)
	if err != nil {
		t.Fatal(err)
	}
	if owner := fileOwner(t, dropin); owner != "postgres" {
		t.Errorf("%s owned by %s", dropin, owner)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s mode %v; want postgresql.conf's 0600", dropin, fi.Mode().Perm())
	}
	conf, _ := os.ReadFile(c.ConfigFile())
	if string(conf) != string(origConf)+"include_dir = 'conf.d'\t# added by pgtune\n" {
		t.Errorf("postgresql.conf: unexpected change")
	}
	backup := filepath.Join(tg.Journal.Dir(), "files", c.ConfigFile())
	if b, err := os.ReadFile(backup); err != nil || string(b) != string(origConf) {
		t.Errorf("backup %s: %v", backup, err)
	}

	// Idempotent: a fresh check finds nothing to do.
	tg2 := liveTarget(t, c)
	p2, err := m.Check(ctx, tg2, params(pages*hp, nil))
	if err != nil {
		t.Fatal(err)
	}
	if p2.HasChanges() {
		logPlan(t, p2)
		t.Fatalf("second check plans changes: %v", changeTargets(p2))
	}
	if err := m.Verify(ctx, tg2, p2); err != nil {
		t.Errorf("verify without changes: %v", err)
	}
	if tg2.Facts.Postgres.HugetlbPages <= 0 {
		t.Errorf("facts: HugetlbPages %d", tg2.Facts.Postgres.HugetlbPages)
	}
}

func fileOwner(t *testing.T, p string) string {
	out, err := exec.Command("stat", "-c", "%U", p).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// A pool the kernel has not reserved: huge_pages = 'on' makes the new
// server refuse to start. The previous files must come back, the server
// must run on them, and the error must quote the FATAL line.
func TestApplyRefusedStartRestoresPrevious(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	c := testhost.Postgres(t)
	kernel := lockAfter(t, c)
	reserve(t, kernel, 0) // no huge pages free at all: the drop-in cannot work
	hp := hugePageSize(t)
	origConf, _ := os.ReadFile(c.ConfigFile())
	oldPID := c.PID(t)
	oldSB := c.Query(t, "SHOW shared_buffers") // initdb's choice, the machine's

	ctx := context.Background()
	tg := liveTarget(t, c)
	journal(t, tg)
	// The pool as the play's hugepages module plans it: room for the
	// cluster's pages beside those other processes hold (none free now
	// all the same). Check then finds room for the segment, whatever
	// others hold; the start finds none.
	pages := testPages(hp)
	tg.SetOutputs("hugepages", map[string]any{"pool": (kernel.ReservedPages() + pages) * hp})
	m := New()
	p, err := m.Check(ctx, tg, params(pages*hp, nil))
	if err != nil {
		t.Fatal(err)
	}
	err = m.Apply(ctx, tg, p)
	if err == nil {
		t.Fatal("apply succeeded without huge pages")
	}
	t.Logf("apply: %v", err)
	for _, want := range []string{"FATAL:  could not map anonymous shared memory", "previous configuration restored, postgres running again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q", want)
		}
	}
	assertPrevious(t, c, origConf, oldPID, oldSB)
}

// A pg_restart that fails after stopping the server: the built-in method
// must bring it back on the previous files.
func TestApplyFailingRestartCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	// The check must find room for the segment beside whatever other
	// processes hold: the pool is grown for it, under the lock.
	c := testhost.Postgres(t)
	kernel := lockAfter(t, c)
	hp := hugePageSize(t)
	reserve(t, kernel, testPages(hp))
	origConf, _ := os.ReadFile(c.ConfigFile())
	oldPID := c.PID(t)
	oldSB := c.Query(t, "SHOW shared_buffers") // initdb's choice, the machine's

	ctx := context.Background()
	tg := liveTarget(t, c)
	journal(t, tg)
	tg.Vars = map[string]any{restartVar: "runuser -u postgres -- " + filepath.Join(c.BinDir, "pg_ctl") + " -D " + c.DataDir +
		" -w -m fast stop; echo 'restart script broke' >&2; exit 3"}
	m := New()
	p, err := m.Check(ctx, tg, params(testPages(hp)*hp, nil))
	if err != nil {
		t.Fatal(err)
	}
	err = m.Apply(ctx, tg, p)
	if err == nil {
		t.Fatal("apply succeeded with a failing pg_restart")
	}
	t.Logf("apply: %v", err)
	for _, want := range []string{"pg_restart exited with status 3", "restart script broke", "previous configuration restored, postgres running again"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q", want)
		}
	}
	assertPrevious(t, c, origConf, oldPID, oldSB)
}

func assertPrevious(t *testing.T, c *testhost.Cluster, origConf []byte, oldPID int, oldSB string) {
	t.Helper()
	conf, _ := os.ReadFile(c.ConfigFile())
	if string(conf) != string(origConf) {
		t.Errorf("postgresql.conf not restored")
	}
	dropin := filepath.Join(c.DataDir, "conf.d", "002-hugepages.conf")
	if _, err := os.Stat(dropin); !os.IsNotExist(err) {
		t.Errorf("%s still there: %v", dropin, err)
	}
	if !c.Running() {
		t.Fatal("postgres is down")
	}
	if c.PID(t) == oldPID {
		t.Errorf("expected a new postmaster after the recovery start")
	}
	if got := c.Query(t, "SHOW shared_buffers"); got != oldSB {
		t.Errorf("shared_buffers = %q; want the previous %s", got, oldSB)
	}
	if got := c.Query(t, "SHOW huge_pages"); got != "off" {
		t.Errorf("huge_pages = %q; want the previous off", got)
	}
}

// ALTER SYSTEM writes postgresql.auto.conf, which the server reads last:
// it would silently win over the drop-in. Policy fail: check shows it as
// drift naming file:line and apply refuses before changing anything.
// Policy fix: the line is commented out (with a backup) and the server
// ends up on our values.
func TestOverrideInAutoConf(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, reserves huge pages")
	}
	c := testhost.Postgres(t)
	kernel := lockAfter(t, c)
	c.Query(t, "ALTER SYSTEM SET shared_buffers = '256MB'")
	c.Query(t, "ALTER SYSTEM SET work_mem = '8MB'")
	hp := hugePageSize(t)
	pages := testPages(hp)
	// Room beside what others hold, before the first check: its verdict
	// must not depend on them.
	reserve(t, kernel, pages)
	ctx := context.Background()
	m := New()
	auto := filepath.Join(c.DataDir, "postgresql.auto.conf")

	tg := liveTarget(t, c)
	journal(t, tg)
	before := takeSnapshot(t, c)
	p, err := m.Check(ctx, tg, params(pages*hp, nil))
	if err != nil {
		t.Fatal(err)
	}
	logPlan(t, p)
	ch := p.Changes[0]
	if ch.Kind != plan.KindAction || ch.Target != auto+":3" || ch.Before != "shared_buffers = 256MB" ||
		!strings.Contains(ch.After, "on_override: fail") {
		t.Errorf("override change: %+v", ch)
	}
	err = m.Apply(ctx, tg, p)
	if err == nil || !strings.Contains(err.Error(), auto+":3 sets shared_buffers = '256MB'") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("apply with on_override fail: %v", err)
	}
	after := takeSnapshot(t, c)
	for f, content := range before.files {
		if after.files[f] != content {
			t.Errorf("%s changed although apply refused", f)
		}
	}
	if before.pid != after.pid {
		t.Errorf("postmaster restarted although apply refused")
	}

	fix := func(p *Params) { p.OnOverride = expr.Literal("fix") }
	p, err = m.Check(ctx, tg, params(pages*hp, fix))
	if err != nil {
		t.Fatal(err)
	}
	logPlan(t, p)
	if got := changeTargets(p); len(got) != 4 || got[0] != "file "+auto {
		t.Fatalf("changes %q", got)
	}
	if !strings.Contains(p.Changes[0].Diff, "+#shared_buffers = '256MB'\t# disabled by pgtune: it overrode conf.d/002-hugepages.conf") {
		t.Errorf("auto.conf diff:\n%s", p.Changes[0].Diff)
	}
	if err := m.Apply(ctx, tg, p); err != nil {
		t.Fatalf("apply: %v\n%s", err, c.Log(t))
	}
	if err := m.Verify(ctx, tg, p); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if got := c.Query(t, "SHOW work_mem"); got != "8MB" {
		t.Errorf("unrelated ALTER SYSTEM setting lost: work_mem = %s", got)
	}
	if c.HugetlbPages(t) <= 0 {
		t.Error("not on huge pages")
	}
	backup := filepath.Join(tg.Journal.Dir(), "files", auto)
	if b, err := os.ReadFile(backup); err != nil || !strings.Contains(string(b), "shared_buffers = '256MB'") {
		t.Errorf("auto.conf backup %s: %v", backup, err)
	}
	// ALTER SYSTEM still works on the edited file.
	c.Query(t, "ALTER SYSTEM SET work_mem = '16MB'")
	p2, err := m.Check(ctx, liveTarget(t, c), params(pages*hp, nil))
	if err != nil {
		t.Fatal(err)
	}
	if p2.HasChanges() {
		logPlan(t, p2)
		t.Errorf("re-check plans changes: %v", changeTargets(p2))
	}
}

// A stopped cluster: the sizing still works (the scratch directory does not
// need the server), the files are written, nothing is started.
func TestStoppedCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	c := testhost.Postgres(t, testhost.Stopped())
	hp := hugePageSize(t)
	ctx := context.Background()
	m := New()
	// A clean pool in the facts: pages other processes hold would leave
	// no room for the segment, and this test is not about them.
	tg := linkTarget(t, c, testPages(hp))
	if tg.Facts.Postgres.Running {
		t.Fatal("cluster should be stopped")
	}
	journal(t, tg)
	p, err := m.Check(ctx, tg, params(testPages(hp)*hp, func(p *Params) { p.Restart = expr.Literal(false) }))
	if err != nil {
		t.Fatal(err)
	}
	logPlan(t, p)
	if got := changeTargets(p); len(got) != 2 {
		t.Fatalf("changes %q; want the include and the drop-in only", got)
	}
	if !strings.Contains(strings.Join(p.Notes, "\n"), "PostgreSQL is not running") {
		t.Errorf("notes %q", p.Notes)
	}
	if err := m.Apply(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	if c.Running() {
		t.Error("apply started a stopped cluster")
	}
	// The server reads the drop-in: ask it.
	out := c.AsOwner(t, filepath.Join(c.BinDir, "postgres"), "-D", c.DataDir, "-C", "shared_buffers")
	if want := strconv.FormatInt(p.State.(*State).SharedBuffers/8192, 10); strings.TrimSpace(out) != want {
		t.Errorf("postgres -C shared_buffers = %s; want %s blocks", out, want)
	}
}

// A Debian cluster (pg_createcluster): config in /etc/postgresql/15/NAME
// with conf.d already included, data_directory set in the config, started
// and restarted with pg_ctlcluster, logging to /var/log/postgresql.
func TestDebianCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("creates a Debian PostgreSQL cluster, reserves huge pages")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := exec.LookPath("pg_createcluster"); err != nil {
		t.Fatalf("postgresql-common is not installed: %v", err)
	}
	kernel := testhost.LockKernel(t)
	name := "pgtune" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	port := strconv.Itoa(freePort(t))
	if out, err := exec.Command("pg_createcluster", "15", name, "-p", port, "--start").CombinedOutput(); err != nil {
		t.Fatalf("pg_createcluster: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("pg_dropcluster", "--stop", "15", name).CombinedOutput(); err != nil {
			t.Errorf("pg_dropcluster: %v\n%s", err, out)
		}
		// pg_dropcluster leaves what it did not create (our drop-in).
		os.RemoveAll("/etc/postgresql/15/" + name)
		os.Remove("/var/log/postgresql/postgresql-15-" + name + ".log")
	})
	hp := hugePageSize(t)
	pages := testPages(hp)
	reserve(t, kernel, pages)

	ctx := context.Background()
	tr := transport.NewLocal()
	f, err := facts.Gather(ctx, tr, facts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	data := "/var/lib/postgresql/15/" + name
	pg, err := facts.DiscoverPostgres(ctx, tr, facts.Options{PGData: data})
	if err != nil {
		t.Fatal(err)
	}
	conf := "/etc/postgresql/15/" + name + "/postgresql.conf"
	if pg.ConfigFile != conf || pg.Cluster != name || !pg.Running || pg.Port != mustAtoi(port) {
		t.Fatalf("discovered %+v", pg)
	}
	f.Postgres = pg
	tg := &engine.Target{Name: "localhost", Transport: tr, Facts: f, Scope: expr.NewScope("t.yml")}
	journal(t, tg)
	m := New()
	p, err := m.Check(ctx, tg, params(pages*hp, nil))
	if err != nil {
		t.Fatal(err)
	}
	logPlan(t, p)
	dropin := "/etc/postgresql/15/" + name + "/conf.d/002-hugepages.conf"
	if got := changeTargets(p); strings.Join(got, "|") != "file "+dropin+"|restart restart postgresql" {
		t.Fatalf("changes %q", got)
	}
	if err := m.Apply(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	pg2, err := facts.RefreshPostgres(ctx, tr, false, pg)
	if err != nil {
		t.Fatal(err)
	}
	if pg2.PID == pg.PID || pg2.HugetlbPages <= 0 {
		t.Errorf("after apply: %+v", pg2)
	}
	out, err := exec.Command("pg_lsclusters", "-h", "15", name).Output()
	if err != nil || !strings.Contains(string(out), "online") {
		t.Errorf("pg_lsclusters: %s %v", out, err)
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return n
}
