package pgconf

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// The gather reads a running cluster's configuration ahead, as the owner,
// with the default drop-in (FactSet): a dry run's check takes that answer
// instead of a read of its own, and plans what a check that reads for
// itself plans. A play with another drop-in asks something else: its
// check reads on its own, and the answer run ahead is left unused.
func TestConfigurationReadRunsAhead(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	c, pool, _ := clusterWithPool(t)
	ctx := context.Background()
	local := transport.NewLocal()
	gather := func() *facts.Facts {
		t.Helper()
		f, err := facts.GatherHost(ctx, local, facts.Options{PGData: c.DataDir, Sets: []facts.Set{New().FactSet()}, RunAhead: []string{Name}})
		if err != nil || f.Postgres == nil || !f.Postgres.Running {
			t.Fatalf("GatherHost: %v, %+v", err, f)
		}
		return f
	}
	check := func(f *facts.Facts, set func(*Params)) (*plan.ModulePlan, *recorder) {
		t.Helper()
		tg := liveTarget(t, c)
		counter := &recorder{Transport: local}
		tg.Transport, tg.Facts.Postgres, tg.Facts.Ran = counter, f.Postgres, f.Ran
		p, err := New().Check(ctx, tg, params(pool, set))
		if err != nil {
			t.Fatal(err)
		}
		return p, counter
	}

	f := gather()
	if f.Ran.Len() != 2 {
		t.Fatalf("%d answers run ahead; want 2 (the topology query's and the configuration's)", f.Ran.Len())
	}
	ahead, counter := check(f, nil)
	if counter.reads != 0 || f.Ran.Len() != 1 {
		t.Errorf("%d reads reached the host, %d answers left; want none and the topology's", counter.reads, f.Ran.Len())
	}
	own, counter := check(&facts.Facts{Postgres: f.Postgres}, nil)
	if counter.reads == 0 {
		t.Fatal("a check with nothing run ahead did not read")
	}
	if a, b := renderedPlan(ahead), renderedPlan(own); a != b {
		t.Errorf("planned from the answer run ahead:\n%s\nfrom its own read:\n%s", a, b)
	}

	f = gather()
	_, counter = check(f, func(p *Params) { p.Dropin = expr.Literal("conf.d/other.conf") })
	if counter.reads == 0 || f.Ran.Len() != 2 {
		t.Errorf("another drop-in: %d reads reached the host, %d answers left; want a read, and the configuration's answer unused", counter.reads, f.Ran.Len())
	}
}

// renderedPlan is what a plan says: its changes (content, diffs), its
// outputs and notes (fmt prints maps sorted).
func renderedPlan(p *plan.ModulePlan) string {
	return fmt.Sprintf("%+v\n%v\n%q", p.Changes, p.Outputs, p.Notes)
}

// A running server that accepts connections but never answers them
// (stopped here) fails the check with psql's timeout, from
// the sizing's read of its settings: the host fails, the run goes on.
func TestCheckServerThatNeverAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	c := testhost.Postgres(t)
	tg := liveTarget(t, c)
	pid := c.PID(t)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	hp := hugePageSize(t)
	if _, err := New().Check(context.Background(), tg, params(testPages(hp)*hp, nil)); err == nil || !strings.Contains(err.Error(), "timeout expired") {
		t.Errorf("Check: %v; want psql's timeout", err)
	}
	if _, err := liveSettings(context.Background(), tg, tg.Facts.Postgres); err == nil || !strings.Contains(err.Error(), "timeout expired") {
		t.Errorf("liveSettings: %v; want psql's timeout", err)
	}
}
