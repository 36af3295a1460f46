package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/report"
)

// Batch is where a rollout stands when it asks to go on.
type Batch struct {
	Number, Of int // from 1
	Wave       int // from 1, within the batch
	Hosts      []string
}

// Rollout applies a playbook batch by batch: each batch (each wave of it)
// is planned, applied and verified before the next one starts, so hosts
// restart batch by batch and a bad policy stops at the first batch.
type Rollout struct {
	Runner    *engine.Runner // its RunID names this attempt
	Inventory *inventory.Inventory
	Book      *playbook.Playbook
	// Hosts are the run's hosts; those the state has as done are skipped.
	Hosts []*inventory.Host
	// Plan is the playbook's rollout with the command line's overrides.
	Plan  playbook.Rollout
	Order Order
	State *State
	// Stop, once closed (Ctrl-C), lets every host finish the module in
	// flight and starts nothing more.
	Stop <-chan struct{}
	// Confirm is asked before a wave with changes is applied; an error
	// stops the rollout there (nothing more changes).
	Confirm func(b Batch, planned *report.Report) error
	// BeforeWave, when set, is told each wave before it is planned (the
	// CLI heads the wave's streamed plan with it).
	BeforeWave func(b Batch)
	Log        *slog.Logger
}

// Outcome is how a rollout ended.
type Outcome struct {
	Report *report.Report
	// Interrupted: Stop closed before the end.
	Interrupted bool
	// Stopped is why the rollout stopped early ("" when it did not).
	Stopped string
	// Err stopped the rollout: a wave could not be planned or its
	// confirmation was refused. Waves is how many waves were applied
	// before.
	Err   error
	Waves int
	// Discarded: a new run that applied nothing (its first wave not
	// confirmed, or not planned) left no state file: there is nothing to
	// resume, and --resume alone must not pick it. (Ctrl-C keeps it: the
	// user is told to resume.)
	Discarded bool
	// Left are the hosts of the run this attempt did not cover (a
	// narrower --limit, gone from the inventory) and no attempt verified:
	// an attempt that ran to its end with any left the run partial.
	Left []string
}

// Run carries out the rollout and keeps the state file up to date: before
// each batch, after each host and at the end.
func (r *Rollout) Run(ctx context.Context) (*Outcome, error) {
	run := &run{Rollout: r, results: map[string]report.Host{}, held: map[string]bool{}}
	return run.do(ctx)
}

type run struct {
	*Rollout
	mu       sync.Mutex // guards State and lastSave while hosts report
	lastSave time.Time
	results  map[string]report.Host
	// held are the hosts a failure of this attempt held back (reported
	// failed, not reached in the state): failures for the budget.
	held map[string]bool
}

func (r *run) do(ctx context.Context) (*Outcome, error) {
	attempt := len(r.State.Attempts)
	r.State.Attempts = append(r.State.Attempts, Attempt{RunID: r.Runner.RunID, Started: time.Now().UTC(), Status: Running})
	r.State.Status = Running
	var todo []*inventory.Host
	for _, h := range r.Hosts {
		hs := r.State.Host(h.Name)
		if hs.Done() {
			r.results[h.Name] = doneHost(*hs)
			continue
		}
		why := failedEarlier(*hs)
		if why != nil && r.lost(*hs) {
			r.results[h.Name] = lostHost(*hs)
			continue
		}
		if why != nil {
			r.Runner.StopCluster(h.Name, why)
		}
		todo = append(todo, h)
	}
	// Every failed member holds its cluster by id too: this run may have
	// no facts of it (unreachable now) or not include it (--limit).
	for _, hs := range r.State.Hosts {
		if why := failedEarlier(hs); why != nil {
			r.Runner.StopClusterID(hs.Cluster, hs.Name, why)
		}
	}
	todo = r.Order.sort(todo)
	sizes := Sizes(len(todo), r.Plan.Serial)
	// The failure budget is over every host of the run, those earlier
	// attempts verified included, not over what is left (failedHosts).
	budget := Budget{Hosts: len(r.Hosts), MaxFailPercentage: r.Plan.MaxFailPercentage, AnyErrorsFatal: r.Plan.AnyErrorsFatal}
	out := &Outcome{}
	if err := r.save(true); err != nil {
		return nil, err
	}
	next := 0
	for b, size := range sizes {
		if r.stopped() {
			out.Interrupted = true
			break
		}
		if b > 0 && r.Plan.PauseBetweenBatches > 0 {
			r.Log.Info("pause between batches", "batch", b, "of", len(sizes), "pause", r.Plan.PauseBetweenBatches)
			if !r.pause(ctx, r.Plan.PauseBetweenBatches) {
				out.Interrupted = true
				break
			}
		}
		batch := todo[next : next+size]
		next += size
		failed, held, err := r.batch(ctx, Batch{Number: b + 1, Of: len(sizes)}, batch, out)
		if err != nil && r.stopped() {
			out.Interrupted = true
			break
		}
		if err != nil {
			out.Err, out.Stopped = err, err.Error()
			break
		}
		if r.stopped() {
			out.Interrupted = true
			break
		}
		if b+1 < len(sizes) {
			if why := budget.Stop(b+1, size, failed, held, r.failedHosts()); why != "" {
				out.Stopped = why
				r.Log.Error("rollout stopped", "after batch", b+1, "of", len(sizes), "reason", why)
				break
			}
		}
	}
	out.Left = r.left()
	status, reason := Finished, out.Stopped
	switch {
	case out.Interrupted:
		status = Interrupted
	case out.Stopped != "":
		status = Stopped
	case len(out.Left) > 0:
		// Not finished: a run is finished once every host of it was
		// reached, and --resume alone skips finished runs.
		status, reason = Partial, fmt.Sprintf("attempt %s left out %s of the run: %s", r.Runner.RunID, hostsWord(len(out.Left)), strings.Join(out.Left, ", "))
	}
	r.finish(status, reason)
	r.State.Attempts[attempt].Ended = time.Now().UTC()
	r.State.Attempts[attempt].Status = status
	out.Report = r.report(out)
	if attempt == 0 && out.Waves == 0 && out.Err != nil && !out.Interrupted {
		out.Discarded = true
		return out, r.State.Discard()
	}
	return out, r.save(true)
}

// batch plans, applies and verifies one batch, wave by wave, and returns
// how many of its hosts failed and how many a failure of this attempt
// held back. An error stops the rollout (not confirmed).
func (r *run) batch(ctx context.Context, b Batch, hosts []*inventory.Host, out *Outcome) (failed, held int, err error) {
	// A host the order could not place fails here, in its batch, as an
	// unreachable one would.
	placed := hosts[:0:0]
	for _, h := range hosts {
		u, ok := r.Order.Unplaced[h.Name]
		if !ok {
			placed = append(placed, h)
			continue
		}
		r.mu.Lock()
		r.results[h.Name] = r.unplaced(r.State.Host(h.Name), u)
		r.mu.Unlock()
		failed++
	}
	if len(placed) < len(hosts) {
		if err := r.save(true); err != nil {
			return failed, 0, err
		}
	}
	if len(placed) == 0 {
		return failed, 0, nil
	}
	waves := r.Order.waves(placed)
	if err := sameHosts(placed, waves); err != nil {
		return failed, 0, err
	}
	defer func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, h := range hosts {
			if r.held[h.Name] {
				held++
			}
		}
	}()
	for w, wave := range waves {
		if r.stopped() {
			return failed, 0, nil
		}
		b.Wave = w + 1
		b.Hosts = names(wave)
		if len(waves) > 1 || b.Of > 1 {
			r.Log.Info("batch", "batch", b.Number, "of", b.Of, "wave", b.Wave, "hosts", len(wave))
		}
		if r.BeforeWave != nil {
			r.BeforeWave(b)
		}
		n, applied, err := r.wave(ctx, b, wave)
		failed += n
		if applied {
			out.Waves++
		}
		if err != nil {
			return failed, 0, err
		}
	}
	return failed, 0, nil
}

// wave plans, confirms, applies and verifies one wave; it returns how
// many hosts failed and whether it got to applying.
func (r *run) wave(ctx context.Context, b Batch, hosts []*inventory.Host) (int, bool, error) {
	// Planning only reads: the first Ctrl-C cuts it (a plan of hundreds
	// of hosts is not waited for), and the wave's hosts stay as they were.
	// Connections outlive the context (it bounds their handshake only).
	planning, cancel := UntilStopped(ctx, r.Stop)
	defer cancel()
	s, err := r.Runner.Plan(planning, r.Inventory, r.Book, hosts)
	if err != nil {
		return 0, false, err
	}
	defer s.Close()
	planned := s.Report("check")
	plans := map[string][]report.Change{}
	for _, h := range planned.Hosts {
		plans[h.Name] = h.Changes
	}
	if r.stopped() {
		return 0, false, nil
	}
	if s.HasChanges() && r.Confirm != nil {
		if err := r.Confirm(b, planned); err != nil {
			return 0, false, err
		}
	}
	r.mu.Lock()
	before := map[string]HostState{} // what a host left untouched goes back to
	for _, h := range hosts {
		hs := r.State.Host(h.Name)
		before[h.Name] = *hs
		cluster := s.ClusterID(h.Name)
		if cluster == "" {
			cluster = hs.Cluster // not known now (no facts): as last seen
		}
		*hs = HostState{Name: h.Name, State: InProgress, RunID: r.Runner.RunID, Batch: b.Number, Planned: plans[h.Name], Cluster: cluster}
	}
	r.mu.Unlock()
	if err := r.save(true); err != nil {
		return 0, false, err
	}
	notStarted := map[string]bool{}
	untouched := map[string]bool{} // left alone: its cluster stopped (engine.ErrNotTouched)
	hooks := engine.ApplyHooks{Stop: r.Stop, Done: func(res engine.HostResult) {
		r.mu.Lock()
		hs := r.State.Host(res.Name)
		switch {
		case res.Err == nil:
			hs.State = Verified
		case errors.Is(res.Err, engine.ErrInterrupted) && !res.Started:
			hs.State = NotReached
			keepFailed(hs, before[res.Name])
			notStarted[res.Name] = true
		case errors.Is(res.Err, engine.ErrNotTouched) && !res.Started:
			hs.State = NotReached
			keepFailed(hs, before[res.Name])
			untouched[res.Name] = true
		default:
			hs.State, hs.Unreachable = Failed, res.Unreachable
		}
		r.mu.Unlock()
		_ = r.save(false) // a failed write is caught by the next forced one
	}}
	s.Apply(engine.WithApplyHooks(ctx, hooks))
	applied := s.Report("apply")
	failed := 0
	r.mu.Lock()
	for _, h := range applied.Hosts {
		hs := r.State.Host(h.Name)
		hs.Applied = h.Changes
		hs.Error = ""
		if h.Error != nil {
			hs.Error = *h.Error
		}
		switch {
		case notStarted[h.Name]:
			hs.State = NotReached
			keepFailed(hs, before[h.Name])
			h.Error = strPtr("not reached: the run was interrupted before this host started")
			h.NotReached = true
		case untouched[h.Name]:
			// Reported failed with why; not reached in the state: no
			// failure of its own for the budget, retried by a resume.
			hs.State = NotReached
			keepFailed(hs, before[h.Name])
		case h.Status == report.Failed || h.Status == report.Unreachable:
			hs.State, hs.Unreachable = Failed, h.Status == report.Unreachable
			failed++
		case engine.PendingRestart(h.Notes):
			hs.State = PendingRestart
		default:
			hs.State = Verified
		}
		r.results[h.Name] = h
	}
	for name := range untouched {
		if r.heldByFailureNow(name) {
			r.held[name] = true
		}
	}
	r.mu.Unlock()
	// The wave's final states (a standby's failed wait included) are on
	// disk before the next wave is planned or confirmed.
	if err := r.save(true); err != nil {
		return failed, true, err
	}
	return failed, true, nil
}

// keepFailed puts back the state of a host this attempt left untouched
// when an earlier attempt had failed it or left it in progress: it may
// still be down or not streaming, and the next resume must retry it first
// and hold its cluster for it (failedEarlier), not take it for a host
// never reached.
func keepFailed(hs *HostState, before HostState) {
	if failedEarlier(before) != nil {
		// The whole entry: its error, batch and plan are that run's.
		cluster := hs.Cluster
		*hs = before
		if cluster != "" {
			hs.Cluster = cluster
		}
	}
}

// failedEarlier is why a host an earlier attempt failed stops its
// replication cluster in this one (nil for any other host): it may be
// left down or not streaming, so the rest of its cluster waits until it
// is verified again.
func failedEarlier(hs HostState) error {
	switch hs.State {
	case Failed:
		return fmt.Errorf("%s of the same cluster failed in run %s (a resume retries only the members that failed; resume again once they are verified)", hs.Name, hs.RunID)
	case InProgress:
		// The controller died while it was applied (killed, host lost):
		// it may be down or not streaming, as a failed member may.
		return fmt.Errorf("%s of the same cluster was being applied when run %s ended (a resume retries only such members; resume again once they are verified)", hs.Name, hs.RunID)
	}
	return nil
}

// heldByFailureNow reports whether host, left untouched, shares its
// cluster with a member this attempt failed. Members held by an earlier
// attempt's failure are not counted (as that failure is not). r.mu held.
func (r *run) heldByFailureNow(host string) bool {
	cluster := r.State.Host(host).Cluster
	if cluster == "" {
		return false
	}
	for _, hs := range r.State.Hosts {
		if hs.Name != host && hs.Cluster == cluster && hs.State == Failed && hs.RunID == r.Runner.RunID {
			return true
		}
	}
	return false
}

// failedHosts counts the failures for the budget, which is a share of
// every host of the run: the hosts this attempt failed, and those its
// failures held back (reported failed: they did not get the policy
// either). A host an earlier
// attempt failed counts only once its retry fails too (once, not once per
// attempt): a resume exists to retry it, and a stale failure must not stop
// the resume before it gets there. Hosts left not reached by a stop or
// Ctrl-C are no failures.
func (r *run) failedHosts() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, h := range r.Hosts {
		if hs := r.State.Host(h.Name); hs.State == Failed && hs.RunID == r.Runner.RunID || r.held[h.Name] {
			n++
		}
	}
	return n
}

// left are the hosts of the run outside this attempt's that are not done.
func (r *run) left() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	here := map[string]bool{}
	for _, h := range r.Hosts {
		here[h.Name] = true
	}
	var out []string
	for _, hs := range r.State.Hosts {
		if !here[hs.Name] && !hs.Done() {
			out = append(out, hs.Name)
		}
	}
	return out
}

// finish marks every host the rollout did not get to.
func (r *run) finish(status, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.State.Status, r.State.Reason = status, reason
	for _, h := range r.Hosts {
		hs := r.State.Host(h.Name)
		if hs.State == InProgress {
			hs.State = Failed // its batch ended without telling: re-check it
		}
	}
}

// report is the run's outcome, one entry per host in the run's order.
func (r *run) report(out *Outcome) *report.Report {
	rep := &report.Report{Mode: "apply", RunID: r.Runner.RunID}
	why := "the run was interrupted"
	if out.Stopped != "" {
		why = "the rollout stopped: " + out.Stopped
	}
	for _, h := range r.Hosts {
		res, ok := r.results[h.Name]
		if !ok {
			res = report.Host{Name: h.Name, Status: report.Failed, Changes: []report.Change{}, Error: strPtr("not reached: " + why), NotReached: true}
		}
		rep.Hosts = append(rep.Hosts, res)
	}
	rep.Summarize()
	return rep
}

// doneHost is a host an earlier attempt verified, as this run reports it.
// lost reports whether a member an earlier attempt failed is missing
// from the run's cluster layout: the facts read before the first batch
// did not place it in its cluster (it did not answer then). Retried in
// such a run it would be applied out of its cluster's order, beside
// another member; it waits, failed, and holds its cluster (by id).
func (r *run) lost(hs HostState) bool {
	l := r.Runner.Layout
	if l == nil || hs.Cluster == "" {
		return false
	}
	c := l.ClusterOf(hs.Name)
	return c == nil || c.ID != hs.Cluster
}

// unplaced fails a host the order could not place (Order.Unplaced), in
// the state and in the report: a resume retries it.
func (r *run) unplaced(hs *HostState, u Unplaced) report.Host {
	cluster := hs.Cluster
	*hs = HostState{Name: hs.Name, State: Failed, Unreachable: u.Unreachable, RunID: r.Runner.RunID, Error: u.Why, Cluster: cluster}
	status := report.Failed
	if u.Unreachable {
		status = report.Unreachable
	}
	msg := u.Why
	return report.Host{Name: hs.Name, Status: status, Changes: []report.Change{}, Error: &msg}
}

// lostHost is the report of a host lost tells to wait.
func lostHost(hs HostState) report.Host {
	msg := fmt.Sprintf("%s: not retried: it failed in run %s, and its replication cluster could not be placed now (its facts were not read before the first batch); its cluster waits for it; resume again once it answers", hs.Name, hs.RunID)
	return report.Host{Name: hs.Name, Status: report.Failed, Changes: []report.Change{}, Error: &msg}
}

func doneHost(hs HostState) report.Host {
	note := fmt.Sprintf("verified by run %s; resumed run left it alone", hs.RunID)
	if hs.State == PendingRestart {
		note = fmt.Sprintf("verified by run %s, restart pending; resumed run left it alone", hs.RunID)
	}
	return report.Host{Name: hs.Name, Status: report.OK, Changes: []report.Change{}, Notes: []string{note}}
}

// save writes the state; unless forced, at most every half second, so a
// thousand hosts finishing do not write it a thousand times.
func (r *run) save(force bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !force && time.Since(r.lastSave) < 500*time.Millisecond {
		return nil
	}
	r.lastSave = time.Now()
	return r.State.Save()
}

// UntilStopped is ctx, also cancelled at the first Ctrl-C (stop closed):
// work that only reads (a plan, a fact gather) is cut at once, as nothing
// of it can be left half done.
func UntilStopped(ctx context.Context, stop <-chan struct{}) (context.Context, context.CancelFunc) {
	cut, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-stop:
			cancel()
		case <-cut.Done():
		}
	}()
	return cut, cancel
}

func (r *run) stopped() bool {
	select {
	case <-r.Stop:
		return true
	default:
		return false
	}
}

// pause waits d, or less if the run is stopped; false when it was.
func (r *run) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Stop:
		return false
	case <-ctx.Done():
		return false
	}
}

// sameHosts checks that an Order's waves hold the batch's hosts, each once.
func sameHosts(batch []*inventory.Host, waves [][]*inventory.Host) error {
	want := map[string]int{}
	for _, h := range batch {
		want[h.Name]++
	}
	for _, w := range waves {
		for _, h := range w {
			want[h.Name]--
		}
	}
	for name, n := range want {
		if n != 0 {
			return fmt.Errorf("rollout order: host %s is in the batch's waves %d times, want once", name, 1-n)
		}
	}
	return nil
}

func names(hosts []*inventory.Host) []string {
	out := make([]string, len(hosts))
	for i, h := range hosts {
		out[i] = h.Name
	}
	return out
}

func strPtr(s string) *string { return &s }
