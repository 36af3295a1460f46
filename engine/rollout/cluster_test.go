package rollout

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/fakehost"
)

// restart plans a service restart on every host until it is applied
// there; Apply fails on the hosts in fail. It records the applies.
type restart struct {
	mu      sync.Mutex
	fail    map[string]bool
	done    map[string]bool
	applied []string
}

func (*restart) Name() string       { return "restart" }
func (*restart) Requires() []string { return nil }
func (*restart) NewParams() any     { return &struct{}{} }
func (*restart) Validate(any) error { return nil }

func (m *restart) Check(_ context.Context, t *engine.Target, _ any) (*plan.ModulePlan, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := &plan.ModulePlan{Module: "restart"}
	if !m.done[t.Name] {
		p.Add(plan.Change{Kind: plan.KindRestart, Target: "restart postgresql", Before: "a", After: "b"})
	}
	return p, nil
}

func (m *restart) Apply(_ context.Context, t *engine.Target, _ *plan.ModulePlan) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.applied = append(m.applied, t.Name)
	if m.fail[t.Name] {
		return errors.New("server refused to start")
	}
	m.done[t.Name] = true
	return nil
}

func (*restart) Verify(context.Context, *engine.Target, *plan.ModulePlan) error { return nil }

// Clusters of the rollout tests: p streams to s1 and s2, q to q1; lone is
// a primary with no standby.
var clusterHosts = []string{"p", "s1", "s2", "q", "q1", "lone"}

func clusterFacts(names []string) []engine.HostFacts {
	two := []facts.StandbyInfo{{Name: "s1", Addr: "local", State: "streaming"}, {Name: "s2", Addr: "local", State: "streaming"}}
	topo := map[string]*facts.Topology{
		"p":    {Role: "primary", SystemID: "1", Standbys: two},
		"s1":   {Role: "standby", SystemID: "1", Receiver: "streaming"},
		"s2":   {Role: "standby", SystemID: "1", Receiver: "streaming"},
		"q":    {Role: "primary", SystemID: "2", Standbys: two[:1]},
		"q1":   {Role: "standby", SystemID: "2", Receiver: "streaming"},
		"lone": {Role: "primary", SystemID: "3"},
	}
	var out []engine.HostFacts
	for _, n := range names {
		// One machine, one address: the primaries' WAL senders to
		// unix-socket clients are their standbys'.
		out = append(out, engine.HostFacts{Name: n, Facts: &facts.Facts{Topology: topo[n]}, Address: "127.0.0.1"})
	}
	return out
}

// clusterRollout is a serial rollout over fake hosts (a recorded VM's
// facts) in the clusters above, ordered as the CLI orders it
// (Runner.Layout, standbys first): each call is a new attempt of the same
// run state, with a Runner of its own as a resumed process has. It
// returns the outcome and the waves, in order.
func clusterRollout(t *testing.T, m *restart, st *State, runID string, serial int, noFacts ...string) (*Outcome, []Batch) {
	t.Helper()
	return clusterRolloutPlan(t, m, st, runID, playbook.Rollout{Serial: []playbook.BatchSize{{Count: serial}}}, nil, noFacts...)
}

// clusterRolloutPlan is clusterRollout with the rollout's plan given
// whole, and its confirmation (nil: none asked).
func clusterRolloutPlan(t *testing.T, m *restart, st *State, runID string, plan playbook.Rollout, confirm func(Batch, *report.Report) error, noFacts ...string) (*Outcome, []Batch) {
	t.Helper()
	gather, err := os.ReadFile("../facts/testdata/gather-debian-vm.txt")
	if err != nil {
		t.Fatal(err)
	}
	var y strings.Builder
	y.WriteString("all:\n  hosts:\n")
	for _, n := range clusterHosts {
		y.WriteString("    " + n + ":\n")
	}
	inv, err := inventory.Parse("inv.yml", []byte(y.String()))
	if err != nil {
		t.Fatal(err)
	}
	mods, _ := engine.Registry(m)
	book := &playbook.Playbook{File: "p.yml", Plays: []*playbook.Play{{
		Name: "p", Hosts: "all", Sections: []string{"restart"}, Policy: map[string]any{"restart": &struct{}{}},
	}}}
	hosts, err := engine.Targets(inv, book, "")
	if err != nil {
		t.Fatal(err)
	}
	// The first gather: the hosts in noFacts did not answer it.
	gathered := clusterFacts(clusterHosts)
	for i := range gathered {
		if slices.Contains(noFacts, gathered[i].Name) {
			msg := "dial tcp 127.0.0.1:22: connect: connection refused"
			gathered[i].Facts, gathered[i].Error, gathered[i].Unreachable = nil, &msg, true
		}
	}
	layout, _ := engine.ClusterLayout(context.Background(), gathered, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r := &engine.Runner{Modules: mods, Forks: 4, RunID: runID, Log: log, Layout: layout,
		Dial: func(context.Context, *inventory.Host) (transport.Transport, error) {
			h := fakehost.New()
			h.Other = func(_ context.Context, cmd transport.Command) (transport.Result, error) {
				if len(cmd.Args) > 2 && strings.Contains(cmd.Args[2], "/proc/meminfo") {
					return transport.Result{Stdout: gather}, nil
				}
				res := transport.Result{ExitCode: 1}
				return res, &transport.ExitError{Command: cmd.String(), Result: res}
			}
			return h, nil
		}}
	var waves []Batch
	ro := &Rollout{Runner: r, Inventory: inv, Book: book, Hosts: hosts, State: st, Stop: make(chan struct{}), Log: log,
		Plan:       plan,
		Order:      ClusterOrder(layout, gathered),
		Confirm:    confirm,
		BeforeWave: func(b Batch) { waves = append(waves, b) }}
	out, err := ro.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return out, waves
}

// placeOf is the batch and wave a host was applied in (0, 0: none).
func placeOf(waves []Batch, name string) (batch, wave int) {
	for _, b := range waves {
		if slices.Contains(b.Hosts, name) {
			return b.Number, b.Wave
		}
	}
	return 0, 0
}

func hostOf(r *report.Report, name string) report.Host {
	for _, h := range r.Hosts {
		if h.Name == name {
			return h
		}
	}
	return report.Host{}
}

// checkHosts compares each host's state and report error (a substring;
// "" for none) with want.
func checkHosts(t *testing.T, out *Outcome, st *State, want map[string][2]string) {
	t.Helper()
	for name, w := range want {
		h := hostOf(out.Report, name)
		msg := ""
		if h.Error != nil {
			msg = *h.Error
		}
		if got := st.Host(name).State; got != w[0] {
			t.Errorf("%s: state %s, want %s (error %q)", name, got, w[0], msg)
		}
		if w[1] == "" && msg != "" || !strings.Contains(msg, w[1]) {
			t.Errorf("%s: error %q, want %q", name, msg, w[1])
		}
		if w[0] == NotReached && h.Status != report.Failed {
			t.Errorf("%s: status %s, want failed (not touched)", name, h.Status)
		}
	}
}

// TestRolloutFailedMemberStopsItsCluster: under serial each wave is a
// session of its own; a standby that fails still stops its cluster for
// the rest of the run, whether its other members come in a later wave of
// the same batch or in later batches. A resume retries the failed
// standby alone, and the next resume goes on.
func TestRolloutFailedMemberStopsItsCluster(t *testing.T) {
	for _, tc := range []struct {
		name      string
		serial    int
		sameBatch bool // s2 in s1's batch (a later wave), else in a later batch
	}{
		{"later batches", 2, false},        // [q1 s1], [s2 lone], [p q]
		{"later wave of a batch", 3, true}, // [q1 s1] [s2], [lone p q]
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &restart{fail: map[string]bool{"s1": true}, done: map[string]bool{}}
			st := NewState(t.TempDir(), "20261203T080000Z-aaaaaa", time.Now())
			out, waves := clusterRollout(t, m, st, "20261203T080000Z-aaaaaa", tc.serial)
			b1, w1 := placeOf(waves, "s1")
			b2, w2 := placeOf(waves, "s2")
			bp, _ := placeOf(waves, "p")
			if (b1 == b2 && w2 > w1) != tc.sameBatch || (!tc.sameBatch && b2 <= b1) || bp <= b1 {
				t.Fatalf("waves %+v: not the case tested", waves)
			}
			stopped := "not touched: s1 of the same cluster failed; the cluster's rollout stopped there"
			checkHosts(t, out, st, map[string][2]string{
				"s1": {Failed, "server refused to start"}, "s2": {NotReached, stopped}, "p": {NotReached, stopped},
				"q1": {Verified, ""}, "q": {Verified, ""}, "lone": {Verified, ""},
			})
			if slices.Contains(m.applied, "s2") || slices.Contains(m.applied, "p") {
				t.Errorf("applied %v after s1 failed", m.applied)
			}
			if out.Stopped != "" {
				t.Errorf("rollout stopped: %s (the untouched hosts are no failures of their own)", out.Stopped)
			}

			// The operator fixes s1 and resumes: s1 alone is retried, its
			// cluster's other members wait for the next resume.
			delete(m.fail, "s1")
			m.applied = nil
			out, _ = clusterRollout(t, m, st, "20261203T081000Z-bbbbbb", tc.serial)
			waiting := "not touched: s1 of the same cluster failed in run 20261203T080000Z-aaaaaa (a resume retries only the members that failed; resume again once they are verified); the cluster's rollout stopped there"
			checkHosts(t, out, st, map[string][2]string{
				"s1": {Verified, ""}, "s2": {NotReached, waiting}, "p": {NotReached, waiting},
			})
			if !slices.Equal(m.applied, []string{"s1"}) {
				t.Errorf("resume applied %v, want s1 alone", m.applied)
			}

			m.applied = nil
			out, _ = clusterRollout(t, m, st, "20261203T082000Z-cccccc", tc.serial)
			checkHosts(t, out, st, map[string][2]string{"s2": {Verified, ""}, "p": {Verified, ""}})
			if !slices.Equal(m.applied, []string{"s2", "p"}) {
				t.Errorf("second resume applied %v, want s2 then p", m.applied)
			}
		})
	}
}

// TestRolloutResumeRetriedMemberFailsAgain: the failed standby is
// retried first and fails again: its primary is still not touched.
func TestRolloutResumeRetriedMemberFailsAgain(t *testing.T) {
	m := &restart{fail: map[string]bool{"s1": true}, done: map[string]bool{"q1": true, "q": true, "lone": true}}
	st := NewState(t.TempDir(), "20261203T080000Z-aaaaaa", time.Now())
	st.Host("s1").State, st.Host("s1").RunID = Failed, "20261203T080000Z-aaaaaa"
	out, _ := clusterRollout(t, m, st, "20261203T081000Z-bbbbbb", 6)
	stopped := "not touched: s1 of the same cluster failed; the cluster's rollout stopped there"
	checkHosts(t, out, st, map[string][2]string{
		"s1": {Failed, "server refused to start"}, "s2": {NotReached, stopped}, "p": {NotReached, stopped},
	})
	if !slices.Equal(m.applied, []string{"s1"}) {
		t.Errorf("applied %v, want s1 alone", m.applied)
	}
}

// TestRolloutResumeInProgressMember: a controller killed while a standby
// was applied leaves it in progress; a resume retries it alone (it may be
// left down or not streaming) and its cluster's other members wait.
func TestRolloutResumeInProgressMember(t *testing.T) {
	m := &restart{done: map[string]bool{"q1": true, "q": true, "lone": true}}
	st := NewState(t.TempDir(), "20261203T080000Z-aaaaaa", time.Now())
	st.Host("s1").State, st.Host("s1").RunID = InProgress, "20261203T080000Z-aaaaaa"
	out, _ := clusterRollout(t, m, st, "20261203T081000Z-bbbbbb", 6)
	waiting := "not touched: s1 of the same cluster was being applied when run 20261203T080000Z-aaaaaa ended (a resume retries only such members; resume again once they are verified); the cluster's rollout stopped there"
	checkHosts(t, out, st, map[string][2]string{
		"s1": {Verified, ""}, "s2": {NotReached, waiting}, "p": {NotReached, waiting},
	})
	if !slices.Equal(m.applied, []string{"s1"}) {
		t.Errorf("applied %v, want s1 alone", m.applied)
	}
}

// TestRolloutResumeFailedMemberWithoutFacts: the run state keeps each
// member's cluster; a member that failed and cannot be reached when the
// resume reads the facts (so it is in no cluster of the layout) still
// holds its cluster: s2 is not restarted while s1 may be down.
func TestRolloutResumeFailedMemberWithoutFacts(t *testing.T) {
	m := &restart{fail: map[string]bool{"s1": true}, done: map[string]bool{"q1": true, "q": true, "lone": true}}
	st := NewState(t.TempDir(), "20261203T080000Z-aaaaaa", time.Now())
	clusterRollout(t, m, st, "20261203T080000Z-aaaaaa", 6)
	if hs := st.Host("s1"); hs.State != Failed || hs.Cluster != "1" {
		t.Fatalf("s1 after the first run: %+v, want failed in cluster 1", *hs)
	}
	m.applied = nil
	clusterRollout(t, m, st, "20261203T081000Z-bbbbbb", 6, "s1")
	if slices.Contains(m.applied, "s2") || slices.Contains(m.applied, "p") {
		t.Errorf("resume applied %v while s1, failed, had no facts", m.applied)
	}
	if hs := st.Host("s2"); hs.State != NotReached || !strings.Contains(hs.Error, "s1 of the same cluster failed in run 20261203T080000Z-aaaaaa") {
		t.Errorf("s2: %+v, want not reached, held by s1", *hs)
	}
	if st.Host("s1").Cluster != "1" {
		t.Errorf("s1's cluster forgotten while it had no facts: %+v", *st.Host("s1"))
	}
}

// TestRolloutUntouchedKeepsEarlierFailure: a host an earlier attempt
// failed and this one leaves untouched (its cluster held by a member that
// failed again) stays failed, from that earlier run, in the state: the
// next resume retries it first and holds its cluster for it.
func TestRolloutUntouchedKeepsEarlierFailure(t *testing.T) {
	m := &restart{fail: map[string]bool{"s1": true}, done: map[string]bool{"q1": true, "q": true, "lone": true}}
	st := NewState(t.TempDir(), "20261203T080000Z-aaaaaa", time.Now())
	for _, h := range []string{"s1", "p"} {
		st.Host(h).State, st.Host(h).RunID, st.Host(h).Error = Failed, "20261203T080000Z-aaaaaa", h+": server refused to start"
	}
	clusterRollout(t, m, st, "20261203T081000Z-bbbbbb", 6)
	if slices.Contains(m.applied, "p") {
		t.Fatalf("applied %v: p was not held", m.applied)
	}
	if hs := st.Host("p"); hs.State != Failed || hs.RunID != "20261203T080000Z-aaaaaa" || hs.Error != "p: server refused to start" {
		t.Errorf("p: %+v, want still failed from the first run, with its error", *hs)
	}
	if hs := st.Host("s2"); hs.State != NotReached {
		t.Errorf("s2: %+v, want not reached", *hs)
	}
}

// TestRolloutResumeLostMemberNotRetried: s1 and s2 both failed; on the
// resume s1 did not answer the first gather (no facts: in no cluster of
// the layout, a wave of its own). Retried, it could go down beside s2. It
// is not retried (failed, its cluster waits for it), and s2 is held.
func TestRolloutResumeLostMemberNotRetried(t *testing.T) {
	m := &restart{done: map[string]bool{"q1": true, "q": true, "lone": true}}
	st := NewState(t.TempDir(), "20261203T080000Z-aaaaaa", time.Now())
	for _, h := range []string{"s1", "s2"} {
		hs := st.Host(h)
		hs.State, hs.RunID, hs.Cluster = Failed, "20261203T080000Z-aaaaaa", "1"
	}
	out, _ := clusterRollout(t, m, st, "20261203T081000Z-bbbbbb", 6, "s1")
	if len(m.applied) != 0 {
		t.Errorf("applied %v, want none of cluster 1", m.applied)
	}
	if h := hostOf(out.Report, "s1"); h.Status != report.Failed || h.Error == nil || !strings.Contains(*h.Error, "s1: not retried: it failed in run 20261203T080000Z-aaaaaa") {
		t.Errorf("s1 reported %+v, want failed, not retried", h)
	}
	if hs := st.Host("s1"); hs.State != Failed || hs.RunID != "20261203T080000Z-aaaaaa" || hs.Cluster != "1" {
		t.Errorf("s1: %+v, want still failed from the first run, in cluster 1", *hs)
	}
	if hs := st.Host("s2"); hs.State != Failed || !strings.Contains(hs.Error+hostErr(out.Report, "s2"), "s1 of the same cluster failed") {
		t.Errorf("s2: %+v (reported %q), want held by s1", *hs, hostErr(out.Report, "s2"))
	}
}

func hostErr(r *report.Report, name string) string {
	if h := hostOf(r, name); h.Error != nil {
		return *h.Error
	}
	return ""
}

// TestRolloutHeldMembersCountAsFailed: members a failure of this run
// holds back are reported failed, and the rollout counts them so: a
// batch where one member failed and the rest were held is a batch where
// every host failed, and the budget counts every host the failure kept
// from the policy.
func TestRolloutHeldMembersCountAsFailed(t *testing.T) {
	pct := func(f float64) *float64 { return &f }
	for _, tc := range []struct {
		name    string
		plan    playbook.Rollout
		stopped string
		applied []string
	}{
		// [q1], [s1 s2], [lone p q]: s1 fails, s2 is held.
		{"all-fail batch", playbook.Rollout{Serial: []playbook.BatchSize{{Count: 1}, {Count: 2}, {Percent: 100}}},
			"every host of batch 2 failed (2 of 2: 1 failed, 1 held back by a failed member of its cluster), whatever the failure budget",
			[]string{"q1", "s1"}},
		// [q1 s1], [s2 lone], [p q]: after batch 2, s1 failed and s2 was held.
		{"budget", playbook.Rollout{Serial: []playbook.BatchSize{{Count: 2}}, MaxFailPercentage: pct(30)},
			"2 of 6 hosts failed (33.3%), more than max_fail_percentage 30%",
			[]string{"q1", "s1", "lone"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &restart{fail: map[string]bool{"s1": true}, done: map[string]bool{}}
			st := NewState(t.TempDir(), "20261203T080000Z-aaaaaa", time.Now())
			out, _ := clusterRolloutPlan(t, m, st, "20261203T080000Z-aaaaaa", tc.plan, nil)
			if out.Stopped != tc.stopped {
				t.Errorf("stopped %q, want %q", out.Stopped, tc.stopped)
			}
			if got := slices.Sorted(slices.Values(m.applied)); !slices.Equal(got, slices.Sorted(slices.Values(tc.applied))) {
				t.Errorf("applied %v, want %v", m.applied, tc.applied)
			}
			if st.Status != Stopped {
				t.Errorf("run %s, want stopped", st.Status)
			}
			// Held hosts stay not reached in the state: a resume retries them.
			if hs := st.Host("s2"); hs.State != NotReached {
				t.Errorf("s2: %+v, want not reached", *hs)
			}
		})
	}
}

// TestRolloutUnplacedHostHeld: a host that did not answer the gather
// before the first batch has no place in the cluster layout: applied in
// its batch from fresh facts it would go into the first wave, beside
// another member of its cluster (s2 with s1). It is not applied: it
// fails, unreachable, and a resume places and retries it.
func TestRolloutUnplacedHostHeld(t *testing.T) {
	// A batch of the unplaced host alone (serial 1) fails it and stops
	// the rollout (every host of the batch failed) before the primary.
	m := &restart{done: map[string]bool{}}
	st := NewState(t.TempDir(), "20261203T080000Z-aaaaaa", time.Now())
	out, _ := clusterRollout(t, m, st, "20261203T080000Z-aaaaaa", 1, "s2")
	if slices.Contains(m.applied, "s2") || slices.Contains(m.applied, "p") || !strings.HasPrefix(out.Stopped, "every host of batch") {
		t.Errorf("serial 1: applied %v, stopped %q; want s2 and p not applied, the rollout stopped at s2's batch", m.applied, out.Stopped)
	}

	m = &restart{done: map[string]bool{}}
	st = NewState(t.TempDir(), "20261203T080000Z-aaaaaa", time.Now())
	out, waves := clusterRollout(t, m, st, "20261203T080000Z-aaaaaa", 3, "s2")
	if b, _ := placeOf(waves, "s2"); b != 0 {
		t.Errorf("s2 was in batch %d: %+v", b, waves)
	}
	if slices.Contains(m.applied, "s2") {
		t.Errorf("applied %v: s2 had no place in its cluster", m.applied)
	}
	h := hostOf(out.Report, "s2")
	if h.Status != report.Unreachable || h.Error == nil || !strings.Contains(*h.Error, "s2: not applied: it did not answer before the first batch (dial tcp 127.0.0.1:22: connect: connection refused)") {
		t.Errorf("s2 reported %+v, want unreachable, not applied", h)
	}
	if hs := st.Host("s2"); hs.State != Failed || !hs.Unreachable || hs.RunID != "20261203T080000Z-aaaaaa" {
		t.Errorf("s2: %+v, want failed, unreachable, in this run", *hs)
	}
	for _, n := range []string{"q1", "s1", "lone", "q"} {
		if !slices.Contains(m.applied, n) {
			t.Errorf("%s not applied (applied %v)", n, m.applied)
		}
	}
	// Its primary streams to it, a member this attempt left out: not
	// restarted without it.
	if e := hostErr(out.Report, "p"); slices.Contains(m.applied, "p") || !strings.Contains(e, "outside this run: 1 standby(s) the primary streams to") {
		t.Errorf("p: applied %v, error %q; want p refused, its cluster not whole", m.applied, e)
	}
	// It answers again: the resume places it and applies it, then its
	// primary.
	m.applied = nil
	clusterRollout(t, m, st, "20261203T081000Z-bbbbbb", 3)
	if !slices.Equal(m.applied, []string{"s2", "p"}) || st.Host("s2").State != Verified || st.Host("p").State != Verified {
		t.Errorf("resume applied %v, s2 %+v, p %+v; want s2 then p, verified", m.applied, *st.Host("s2"), *st.Host("p"))
	}
}

// TestRolloutNotConfirmedKeepsNoState: a new run whose first wave is not
// confirmed changed nothing: it leaves no state file (--resume alone
// would pick it over an older interrupted run). A resumed run's state is
// kept whatever happens.
func TestRolloutNotConfirmedKeepsNoState(t *testing.T) {
	declined := errors.New("not confirmed")
	plan := playbook.Rollout{Serial: []playbook.BatchSize{{Count: 2}}}
	m := &restart{done: map[string]bool{}}
	st := NewState(t.TempDir(), "20261203T080000Z-aaaaaa", time.Now())
	out, _ := clusterRolloutPlan(t, m, st, "20261203T080000Z-aaaaaa", plan, func(Batch, *report.Report) error { return declined })
	if !errors.Is(out.Err, declined) || out.Waves != 0 || !out.Discarded || len(m.applied) != 0 {
		t.Fatalf("outcome %+v, applied %v; want the refusal, nothing applied, state discarded", out, m.applied)
	}
	if _, err := os.Stat(st.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file of a run nobody confirmed: %v", err)
	}

	// Declined after a confirmed batch: kept, stopped, resumable.
	st = NewState(t.TempDir(), "20261203T080000Z-aaaaaa", time.Now())
	n := 0
	out, _ = clusterRolloutPlan(t, m, st, "20261203T080000Z-aaaaaa", plan, func(Batch, *report.Report) error {
		if n++; n > 1 {
			return declined
		}
		return nil
	})
	if out.Discarded || out.Waves == 0 {
		t.Fatalf("outcome %+v: want applied waves, state kept", out)
	}
	if _, err := os.Stat(st.Path()); err != nil {
		t.Errorf("state of a run that changed hosts: %v", err)
	}

	// A resumed run declined at once: its state stays.
	m.applied = nil
	out, _ = clusterRolloutPlan(t, m, st, "20261203T081000Z-bbbbbb", plan, func(Batch, *report.Report) error { return declined })
	if out.Discarded || len(m.applied) != 0 {
		t.Fatalf("resume: outcome %+v, applied %v", out, m.applied)
	}
	if _, err := os.Stat(st.Path()); err != nil {
		t.Errorf("state of a resumed run: %v", err)
	}
}
