package pgconf

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/internal/testhost"
	"github.com/pgtune/pgtune/modules/oom"
)

// The OOM shield at a start pgtune performs itself (pg_ctl), for real:
// the cluster, the restart and every value read back from /proc. Whether
// root may lower an oom_score_adj (CAP_SYS_RESOURCE) is the machine's:
// the full cycle runs with a score the kernel lets it set (shieldScore),
// and the default -1000 is checked for what the host allows: a shield
// where root may lower it, a finding where it may not.

// shieldScore is the postmaster_score_adj the full cycles run with. Where
// root may lower a score, -500: written with CAP_SYS_RESOURCE a score is
// also the postmaster's floor, which its children inherit, so only a
// score below 0 lets them reset to 0. Where it may not (a container's
// root), 300: a raise is allowed, and sets no floor.
func shieldScore(t *testing.T) int {
	if testhost.CanLowerOOMScoreAdj(t) {
		return -500
	}
	return 300
}

func procAdj(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/oom_score_adj")
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func setProcAdj(t *testing.T, pid, v int) {
	t.Helper()
	if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte(strconv.Itoa(v)), 0); err != nil {
		t.Fatal(err)
	}
}

func childAdjs(t *testing.T, pid int) map[int]int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	for _, f := range strings.Fields(string(b)) {
		c, _ := strconv.Atoi(f)
		out[c] = procAdj(t, c)
	}
	return out
}

// backendAdj is the oom_score_adj of a client backend, as the backend
// itself reads it from /proc.
func backendAdj(t *testing.T, c *testhost.Cluster) string {
	return strings.TrimSpace(c.Query(t, "SELECT pg_read_file('/proc/self/oom_score_adj')"))
}

func TestOOMShieldAtPgCtlStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	c := testhost.Postgres(t) // started by pg_ctl without PG_OOM_ADJUST_FILE
	// Every postmaster this test starts inherits the test process's
	// oom_score_adj (a shell, a unit or a CI runner may have set one):
	// unshielded values are compared with it, not with 0.
	inherited := testhost.OOMScoreAdj(t)
	shield := shieldScore(t)
	ctx := context.Background()
	tg := liveTarget(t, c)
	journal(t, tg)
	pg := tg.Facts.Postgres
	m := oom.New()
	prm := m.NewParams().(*oom.Params)
	prm.PostmasterScoreAdj = expr.Literal(int64(shield))
	tg.Module = oom.Name
	p, err := m.Check(ctx, tg, prm)
	if err != nil {
		t.Fatal(err)
	}
	tg.SetOutputs(oom.Name, p.Outputs)

	// Without the reset a live value passes to every new backend: the
	// hazard check and verify exist for, shown for real.
	setProcAdj(t, pg.PID, shield)
	if got := backendAdj(t, c); got != strconv.Itoa(shield) {
		t.Fatalf("a backend of a postmaster at %d without PG_OOM_ADJUST_FILE runs at %s, want %d (inherited)", shield, got, shield)
	}
	if err := oom.VerifyStarted(ctx, tg, pg); err == nil || !strings.Contains(err.Error(), "without its children's reset") {
		t.Errorf("verify of an inherited score: %v", err)
	}
	setProcAdj(t, pg.PID, inherited)
	if !oom.NeedsRestart(tg) {
		t.Fatalf("a postmaster started without the environment needs a restart; plan %+v notes %q", p.Changes, p.Notes)
	}

	// pgtune's own restart (pg_ctl) passes the environment and shields the
	// new postmaster right after it is up.
	tg.Module = Name
	res, err := restartPostgres(ctx, tg, pg, false)
	if err != nil || !res.ok() {
		t.Fatalf("restart: %v %+v\n%s", err, res, c.Log(t))
	}
	if res.Method != "pg_ctl" {
		t.Fatalf("restart method %s, want pg_ctl", res.Method)
	}
	now, err := facts.RefreshPostgres(ctx, tg.Transport, false, pg)
	if err != nil {
		t.Fatal(err)
	}
	if now.PID == pg.PID {
		t.Fatalf("postmaster pid %d did not change", now.PID)
	}
	if got := procAdj(t, now.PID); got != shield {
		t.Errorf("new postmaster oom_score_adj %d, want %d", got, shield)
	}
	env, err := os.ReadFile("/proc/" + strconv.Itoa(now.PID) + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range []string{"PG_OOM_ADJUST_FILE=/proc/self/oom_score_adj", "PG_OOM_ADJUST_VALUE=0"} {
		if !strings.Contains("\x00"+string(env)+"\x00", "\x00"+kv+"\x00") {
			t.Errorf("postmaster environment lacks %s", kv)
		}
	}
	kids := childAdjs(t, now.PID)
	if len(kids) == 0 {
		t.Fatal("the new postmaster has no children")
	}
	for pid, adj := range kids {
		if adj != 0 {
			t.Errorf("child %d of the postmaster runs at %d, want 0", pid, adj)
		}
	}
	if got := backendAdj(t, c); got != "0" {
		t.Errorf("a client backend runs at %s, want 0", got)
	}
	if err := oom.VerifyStarted(ctx, tg, now); err != nil {
		t.Errorf("verify after the restart: %v", err)
	}

	// The shield is journaled as the oom module's live value, and rollback
	// puts it back on that very process.
	var key, before string
	for _, e := range tg.Journal.Entries {
		if e.Kind == "live" && e.Module == oom.Name {
			key, before = e.Key, e.Before
		}
	}
	if want := "oom_score_adj:postmaster:" + strconv.Itoa(now.PID) + ":" + strconv.FormatInt(now.StartTime, 10); key != want || before != strconv.Itoa(inherited) {
		t.Fatalf("journal: live entry %q before %q, want %q before %d, the inherited value (entries %+v)", key, before, want, inherited, tg.Journal.Entries)
	}
	tg.Facts.Postgres = now
	if got, ok, err := m.ReadLive(ctx, tg, key); err != nil || !ok || got != strconv.Itoa(shield) {
		t.Fatalf("ReadLive: %q %v %v", got, ok, err)
	}
	if err := m.WriteLive(ctx, tg, key, before); err != nil {
		t.Fatal(err)
	}
	if got := procAdj(t, now.PID); got != inherited {
		t.Errorf("after rollback the postmaster runs at %d, want %d, the inherited value", got, inherited)
	}

	// The default policy (-1000): the environment is in place now, so a
	// live shield is safe — where root may lower a score.
	fresh := liveTarget(t, c)
	journal(t, fresh)
	p, err = m.Check(ctx, fresh, m.NewParams())
	if err != nil {
		t.Fatal(err)
	}
	if !testhost.CanLowerOOMScoreAdj(t) {
		if len(p.Changes) != 0 || !strings.Contains(strings.Join(p.Notes, "\n"), "CAP_SYS_RESOURCE") {
			t.Fatalf("without CAP_SYS_RESOURCE: changes %+v notes %q", p.Changes, p.Notes)
		}
		return
	}
	if len(p.Changes) != 1 || p.Changes[0].After != "-1000" {
		t.Fatalf("changes %+v", p.Changes)
	}
	if err := m.Apply(ctx, fresh, p); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(ctx, fresh, p); err != nil {
		t.Fatal(err)
	}
	if got := procAdj(t, now.PID); got != -1000 {
		t.Errorf("postmaster at %d, want -1000", got)
	}
	if got := backendAdj(t, c); got != "0" {
		t.Errorf("a client backend under a shielded postmaster runs at %s, want 0", got)
	}
	setProcAdj(t, now.PID, inherited)
}
