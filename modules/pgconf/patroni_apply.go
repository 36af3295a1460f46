package pgconf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/transport"
)

// How long pgtune waits on Patroni.
const (
	// patroniSettle bounds the wait for Patroni to act on a reload (it
	// does in its next loop, loop_wait seconds at most) or to report a
	// member running after a switchover.
	patroniSettle = 2 * time.Minute
	// patroniStartTimeout is the start timeout pgtune gives Patroni's
	// restart (POST /restart timeout): on a primary, Patroni gives up its
	// leader lock past it, so the pool is checked before the restart.
	patroniStartTimeout = 120
	patroniPoll         = 500 * time.Millisecond
)

// applyPatroni writes the member's patroni.yml parameters, has Patroni
// reload, checks the huge page pool against the segment the rewritten
// configuration asks for, and restarts the member through Patroni (after
// a switchover when the play says so). If the member does not come back,
// the previous patroni.yml is put back, Patroni reloads and restarts it
// on it.
func (m *Module) applyPatroni(ctx context.Context, t *engine.Target, st *State) error {
	ps := st.Patroni
	if len(st.Overrides) > 0 {
		var why []string
		for _, o := range st.Overrides {
			why = append(why, o.String())
		}
		return fmt.Errorf("settings that override Patroni's parameters on this member: %s: nothing was changed (reset them first)", strings.Join(why, "; "))
	}
	doc, local, err := readPatroniConfig(ctx, t, ps.ConfigFile, st.PG.Owner)
	if err != nil {
		return err
	}
	api := patroniAPI{URL: ps.APIURL, Auth: local.Auth, Owner: st.PG.Owner, Member: ps.Member, TLS: ps.TLS}
	now, err := api.status(ctx, t)
	if err != nil {
		return fmt.Errorf("%s: step check before any change: %w: nothing was changed", ps.where(), err)
	}
	if paused, err := api.paused(ctx, t, now); err != nil || paused {
		if err == nil {
			err = errors.New("the cluster was paused (maintenance mode) since check: pgtune refuses to change or restart its members while paused; resume it (patronictl resume) and run again")
		}
		return fmt.Errorf("%s: step check before any change: %w: nothing was changed", ps.where(), err)
	}
	// Patroni's postgresql.conf as it is before any change: a put-back
	// without a restart may have to give it back (restorePatroniConf).
	conf, _, err := t.ReadFile(ctx, st.PG.ConfigFile)
	if err != nil {
		// err is "read FILE: …" already.
		return fmt.Errorf("%s: step check before any change: %w: nothing was changed", ps.where(), err)
	}
	mark := patroniUndo{mark: t.Mark(), conf: conf, pending: now.PendingRestart}
	if !sameParams(local.Params, ps.Set) {
		edited, err := setPatroniParams(doc, ps.Set)
		if err != nil {
			return fmt.Errorf("Patroni's config %s: %w", ps.ConfigFile, err)
		}
		// Its path is the owner's word (Patroni's command line): root
		// rewrites it only as the owner's own file, as the owner would.
		if err := t.WriteSecretFile(ctx, ps.ConfigFile, edited, transport.WriteOptions{AsUser: st.PG.Owner, OwnedBy: st.PG.Owner}); err != nil {
			return fmt.Errorf("write %s: %w", ps.ConfigFile, err)
		}
		if _, err := api.post(ctx, t, "/reload", nil, 30*time.Second); err != nil {
			return m.patroniPutBack(ctx, t, st, api, mark, false, "step reload: "+err.Error())
		}
	}
	if !st.Restart {
		return nil
	}
	if err := api.awaitPending(ctx, t); err != nil {
		return m.patroniPutBack(ctx, t, st, api, mark, false, "step reload: "+err.Error())
	}
	if err := awaitPatroniWrote(ctx, t, st.PG.ConfigFile, ps.Set["shared_buffers"]); err != nil {
		return m.patroniPutBack(ctx, t, st, api, mark, false, "step reload: "+err.Error())
	}
	if err := checkPoolForRestart(ctx, t, st); err != nil {
		return m.patroniPutBack(ctx, t, st, api, mark, false, "step pool check: not restarted: "+err.Error())
	}
	if ps.Switchover {
		if done, err := m.patroniSwitchover(ctx, t, st, api, mark); done || err != nil {
			return err
		}
	}
	answer, err := api.post(ctx, t, "/restart", map[string]any{"restart_pending": true, "timeout": patroniStartTimeout},
		(patroniStartTimeout+restartTimeout)*time.Second)
	if err != nil && strings.Contains(answer, "still starting") {
		// Patroni stopped waiting before the server was up; it is not a
		// failed start yet.
		err = api.awaitRunning(ctx, t)
	}
	if err != nil {
		return m.patroniPutBack(ctx, t, st, api, mark, true, "step restart: "+err.Error())
	}
	if t.Log != nil {
		t.Log.Info("postgres restarted through Patroni", "member", ps.Member, "answer", answer, "switchover", ps.Switchover)
	}
	if err := api.awaitRunning(ctx, t); err != nil {
		return fmt.Errorf("%s: step restart: %w", ps.where(), err)
	}
	return nil
}

// awaitPending waits until Patroni has taken the new parameters and marks
// the member's restart pending (GET /patroni pending_restart).
func (a patroniAPI) awaitPending(ctx context.Context, t *engine.Target) error {
	return a.await(ctx, t, "Patroni to mark the restart pending after the reload", func(st *patroniStatus) bool {
		return st.PendingRestart
	})
}

// awaitPatroniWrote waits until the postgresql.conf Patroni generates
// carries the shared_buffers just written to patroni.yml (Patroni writes
// each parameter as name = 'value'). A pending restart alone does not say
// that: one left from an earlier change is already pending, and the pool
// check would size the file Patroni had not rewritten yet.
func awaitPatroniWrote(ctx context.Context, t *engine.Target, conf, sharedBuffers string) error {
	if sharedBuffers == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, patroniSettle)
	defer cancel()
	want := "shared_buffers = '" + sharedBuffers + "'"
	for {
		data, ok, err := t.ReadFile(ctx, conf)
		if err == nil && ok && slices.Contains(strings.Split(string(data), "\n"), want) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waited %v for Patroni to write %s into %s", patroniSettle, want, conf)
		case <-time.After(patroniPoll):
		}
	}
}

// awaitRunning waits until Patroni reports the member's server running.
func (a patroniAPI) awaitRunning(ctx context.Context, t *engine.Target) error {
	return a.await(ctx, t, "Patroni to report the member running", func(st *patroniStatus) bool {
		return st.State == "running"
	})
}

func (a patroniAPI) await(ctx context.Context, t *engine.Target, what string, done func(*patroniStatus) bool) error {
	return a.awaitUnless(ctx, t, what, done, nil)
}

// awaitUnless is await that gives up at once when failed (if not nil)
// says why the wait is vain.
func (a patroniAPI) awaitUnless(ctx context.Context, t *engine.Target, what string, done func(*patroniStatus) bool, failed func(*patroniStatus) string) error {
	ctx, cancel := context.WithTimeout(ctx, patroniSettle)
	defer cancel()
	last := errors.New("not asked yet")
	for {
		st, err := a.status(ctx, t)
		if err == nil && done(st) {
			return nil
		}
		if err == nil && failed != nil {
			if why := failed(st); why != "" {
				return fmt.Errorf("while waiting for %s: %s", what, why)
			}
		}
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("state %q, role %q, pending_restart %v", st.State, st.Role, st.PendingRestart)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waited %v for %s: %v", patroniSettle, what, last)
		case <-time.After(patroniPoll):
		}
	}
}

// checkPoolForRestart asks postgres -C, on the configuration Patroni has
// just written (with the server's command-line settings), how many huge
// pages the segment takes, and refuses the restart when the pool's free
// pages (plus those this server holds and frees) are fewer: Patroni would
// otherwise see the start fail and, on a primary, give up the leader.
func checkPoolForRestart(ctx context.Context, t *engine.Target, st *State) error {
	pg := st.PG
	c := newCheckRun(pg, settings{})
	c.dropin, c.hps = pg.ConfigFile, st.hugePageSize()
	if err := c.readConfiguration(ctx, t); err != nil {
		return err
	}
	c.planned = c.fs.clone()
	if opts := commandLineSettings(c.fs.Files[c.optsFile]); opts != "" {
		auto := c.fs.Files[c.autoConf]
		var content []byte
		if auto != nil && auto.Exists {
			content = append(content, auto.Content...)
		}
		c.planned.put(c.autoConf, append(appendLine(content, "# the server's command line"), opts...))
	}
	w, err := walkConfig(c.planned, pg.ConfigFile, c.autoConf)
	if err != nil {
		return err
	}
	archive, err := scratchArchive(c.planned, w, c.autoConf)
	if err != nil {
		return err
	}
	ans, err := sizeOnHost(ctx, t, pg, archive, sizeArgs{hps: c.hps, queries: []query{
		{Name: "shared_memory_size_in_huge_pages"}, {Name: "shared_buffers"}, {Name: "huge_pages"}}})
	if err != nil {
		return err
	}
	v := ans.values
	need, err := facts.ParseInt("postgres -C shared_memory_size_in_huge_pages", v[0], -1, facts.MaxPages)
	if err != nil {
		return err
	}
	if hugePagesValue(v[2]) != "on" {
		return fmt.Errorf("the configuration Patroni wrote has huge_pages = %s, not on: something overrides patroni.yml", v[2])
	}
	free, err := freeHugePages(ctx, t, st)
	if err != nil {
		return err
	}
	target := hugePageBytes(st.hugePageSize(), t.Facts.HugePageSize)
	ours, err := pagesFreedByRestart(ctx, t, pg, target)
	if err != nil {
		return err
	}
	if need > free+ours {
		return fmt.Errorf("postgres -C on the configuration Patroni wrote needs %d huge pages (shared_buffers %s) but the pool has %d free (and this server frees %d): the server would refuse to start",
			need, v[1], free, ours)
	}
	return nil
}

// pagesFreedByRestart is the segment the running server holds on huge
// pages, faulted and reserved alike (its shared_memory_size_in_huge_pages
// while it runs with huge_pages on or maps huge pages): its stop returns
// them to the pool. They count only when the server runs on pages of the
// target size (bytes): pages of another size go back to another pool.
func pagesFreedByRestart(ctx context.Context, t *engine.Target, pg *facts.Postgres, target int64) (int64, error) {
	cur, err := facts.RefreshPostgres(ctx, t.Transport, t.Become, pg)
	if err != nil || !cur.Running {
		return 0, err
	}
	live, err := liveSettings(ctx, t, cur)
	if err != nil {
		return 0, err
	}
	if cur.HugetlbPages <= 0 && hugePagesValue(live["huge_pages"]) != "on" {
		return 0, nil
	}
	n, err := facts.ParseInt("shared_memory_size_in_huge_pages", live["shared_memory_size_in_huge_pages"], 0, facts.MaxPages)
	if err != nil {
		return 0, err
	}
	return freedInTargetSize(n, live["huge_page_size"], target, t.Facts.HugePageSize), nil
}

// hugePageBytes is a huge_page_size setting (kB when bare) in bytes; 0 or
// empty is the kernel's default size. An unreadable one is -1: no size.
func hugePageBytes(s string, kernelDefault int64) int64 {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return kernelDefault
	}
	n, err := parseSize(s, 1024)
	if err != nil || n < 0 {
		return -1
	}
	if n == 0 {
		return kernelDefault
	}
	return n
}

// freedInTargetSize is the pages the running server frees, counted in the
// pool of the target size: those it holds when its live huge_page_size is
// that size, else none (the pages count in units of the size they are).
func freedInTargetSize(ours int64, liveSize string, target, kernelDefault int64) int64 {
	live := hugePageBytes(liveSize, kernelDefault)
	if live <= 0 || target <= 0 || live != target {
		return 0
	}
	return ours
}

// freeHugePages is the pool's free pages not promised to a mapping, for
// the page size the segment goes on.
func freeHugePages(ctx context.Context, t *engine.Target, st *State) (int64, error) {
	dir := "/sys/kernel/mm/hugepages/hugepages-" + fmt.Sprint(t.Facts.HugePageSize>>10) + "kB"
	if st.hugePageSize() != "0" {
		n, _ := parseSize(st.hugePageSize(), 1024)
		dir = "/sys/kernel/mm/hugepages/hugepages-" + fmt.Sprint(n>>10) + "kB"
	}
	res, err := t.Run(ctx, "cat", dir+"/free_hugepages", dir+"/resv_hugepages")
	if err != nil {
		return 0, fmt.Errorf("read the huge page pool (%s): %w", dir, err)
	}
	f := strings.Fields(string(res.Stdout))
	if len(f) != 2 {
		return 0, fmt.Errorf("read the huge page pool (%s): %q", dir, transport.Clip(string(res.Stdout)))
	}
	free, err := facts.ParseInt("free_hugepages", f[0], 0, facts.MaxPages)
	if err != nil {
		return 0, err
	}
	resv, err := facts.ParseInt("resv_hugepages", f[1], 0, facts.MaxPages)
	if err != nil {
		return 0, err
	}
	return max(0, free-resv), nil
}

// patroniPutBack puts the previous patroni.yml back, has Patroni reload
// and, when a restart was attempted, restart the member on it; the error
// says why and what state the member is in.
func (m *Module) patroniPutBack(ctx context.Context, t *engine.Target, st *State, api patroniAPI, undo patroniUndo, restarted bool, cause string) error {
	ps := st.Patroni
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*patroniSettle+restartTimeout*time.Second)
	defer cancel()
	if t.Log != nil {
		t.Log.Error("Patroni member not taken to the new settings; putting the previous patroni.yml back", "member", ps.Member, "cause", cause)
	}
	if err := t.UndoSince(rctx, undo.mark); err != nil {
		return fmt.Errorf("%s: %s; putting the previous %s back FAILED: %v", ps.where(), cause, ps.ConfigFile, err)
	}
	var left string
	if !restarted {
		if err := restorePatroniConf(rctx, t, st.PG, undo.conf); err != nil {
			left = fmt.Sprintf("; but %s may keep the new values: %v", st.PG.ConfigFile, err)
		}
	}
	if _, err := api.post(rctx, t, "/reload", nil, 30*time.Second); err != nil {
		return fmt.Errorf("%s: %s; previous %s put back, but Patroni's reload failed: %v%s", ps.where(), cause, ps.ConfigFile, err, left)
	}
	if !restarted {
		if left == "" && !undo.pending {
			if err := api.await(rctx, t, "Patroni to report no restart pending after the put-back", func(s *patroniStatus) bool {
				return !s.PendingRestart
			}); err != nil {
				left = "; but " + err.Error()
			}
		}
		return fmt.Errorf("%s: %s; previous %s put back and reloaded, member not restarted%s", ps.where(), cause, ps.ConfigFile, left)
	}
	// Patroni's restart_pending filter may not hold any more (the old
	// values may equal what runs): an unconditional restart.
	if _, err := api.post(rctx, t, "/restart", map[string]any{"timeout": patroniStartTimeout}, (patroniStartTimeout+restartTimeout)*time.Second); err != nil {
		if werr := api.awaitRunning(rctx, t); werr != nil {
			return fmt.Errorf("%s: %s; previous %s put back, but the member did NOT come back: %v; see Patroni's log", ps.where(), cause, ps.ConfigFile, err)
		}
	}
	return fmt.Errorf("%s: %s; previous %s put back, member running again on it", ps.where(), cause, ps.ConfigFile)
}

// verifyPatroniParams reads back the member's patroni.yml parameters.
func verifyPatroniParams(ctx context.Context, t *engine.Target, pg *facts.Postgres, ps *PatroniState) error {
	_, local, err := readPatroniConfig(ctx, t, ps.ConfigFile, pg.Owner)
	if err != nil {
		return err
	}
	if !sameParams(local.Params, ps.Set) {
		return fmt.Errorf("%s postgresql.parameters has %s, not the planned %s", ps.ConfigFile, describeParams(local.Params), describeParams(ps.Set))
	}
	return nil
}

// patroniRestartRestored has Patroni take a restored patroni.yml (after
// rollback): reload, then restart the member if that leaves a restart
// pending.
func patroniRestartRestored(ctx context.Context, t *engine.Target, pg *facts.Postgres, pat *facts.Patroni) error {
	_, local, err := readPatroniConfig(ctx, t, pat.ConfigFile, pg.Owner)
	if err != nil {
		return err
	}
	api := patroniAPI{URL: pat.APIURL, Auth: local.Auth, Owner: pg.Owner, Member: pat.Name, TLS: pat.TLS}
	if _, err := api.post(ctx, t, "/reload", nil, 30*time.Second); err != nil {
		return fmt.Errorf("restored %s: %w", pat.ConfigFile, err)
	}
	if api.awaitPending(ctx, t) != nil {
		return nil // nothing to restart for
	}
	// A restart pending from before the rollback says nothing about the
	// restored values: restart once Patroni has written them.
	if err := awaitPatroniWrote(ctx, t, pg.ConfigFile, local.Params["shared_buffers"]); err != nil {
		return fmt.Errorf("restored %s: %w", pat.ConfigFile, err)
	}
	if _, err := api.post(ctx, t, "/restart", map[string]any{"restart_pending": true, "timeout": patroniStartTimeout},
		(patroniStartTimeout+restartTimeout)*time.Second); err != nil {
		return fmt.Errorf("restart through Patroni on the restored %s: %w", pat.ConfigFile, err)
	}
	return nil
}

// switchoverCandidate picks, from GET /cluster's answer, the member to
// hand the leader role to: a streaming (or running) replica (a
// synchronous standby when the cluster has one) without a pending restart
// (so on the new values) nor the nofailover tag, with the least lag.
func switchoverCandidate(cluster []byte, self string) (string, error) {
	var c struct {
		Members []struct {
			Name           string          `json:"name"`
			Role           string          `json:"role"`
			State          string          `json:"state"`
			Lag            json.RawMessage `json:"lag"`
			PendingRestart bool            `json:"pending_restart"`
			Tags           map[string]any  `json:"tags"`
		} `json:"members"`
	}
	if err := json.Unmarshal(cluster, &c); err != nil {
		return "", fmt.Errorf("GET /cluster: not Patroni's JSON")
	}
	// In synchronous mode Patroni switches over to a synchronous standby
	// only (HTTP 412 "candidate name does not match with sync_standby").
	sync := false
	for _, m := range c.Members {
		sync = sync || m.Name != self && m.Role == "sync_standby"
	}
	candidate, best := "", int64(-1)
	var passed []string
	for _, m := range c.Members {
		lag, err := facts.ParseInt("patroni member lag", string(m.Lag), 0, facts.MaxBytes)
		switch {
		case m.Name == self:
			continue
		case m.Role != "replica" && m.Role != "sync_standby":
			passed = append(passed, m.Name+" (role "+m.Role+")")
		case sync && m.Role != "sync_standby":
			passed = append(passed, m.Name+" (not a synchronous standby)")
		case m.State != "streaming" && m.State != "running":
			passed = append(passed, m.Name+" (state "+m.State+")")
		case m.PendingRestart:
			passed = append(passed, m.Name+" (restart pending: not on the new values)")
		case fmt.Sprint(m.Tags["nofailover"]) == "true":
			passed = append(passed, m.Name+" (nofailover)")
		case err != nil:
			passed = append(passed, m.Name+" (lag unknown)")
		case best < 0 || lag < best:
			candidate, best = m.Name, lag
		}
	}
	if candidate == "" {
		return "", fmt.Errorf("primary: switchover: no replica to switch over to (%s): nothing restarted", strings.Join(passed, ", "))
	}
	return candidate, nil
}

// patroniUndo is what a put-back needs: where this apply's journal
// begins, Patroni's postgresql.conf before any change, and whether a
// restart was pending before (then one is still pending after).
type patroniUndo struct {
	mark    engine.JournalMark
	conf    []byte
	pending bool
}

// restorePatroniConf gives Patroni's postgresql.conf back as it was before
// this apply, after patroni.yml was put back and before Patroni reloads,
// when it differs only in the managed lines. Patroni rewrites that file
// on a reload only when a parameter differs from what the server runs
// with (pg_settings): put back onto the running values, the file would
// keep the new values, and the server a pending restart whose next start
// (any restart Patroni makes later) would take values pgtune abandoned.
// The content written is Patroni's own of before, as the owner, without
// a journal entry (rolling it back would bring the new values back).
func restorePatroniConf(ctx context.Context, t *engine.Target, pg *facts.Postgres, before []byte) error {
	if before == nil {
		return nil
	}
	now, ok, err := t.ReadFile(ctx, pg.ConfigFile)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("it is missing")
	}
	if string(now) == string(before) {
		return nil
	}
	if unmanagedLines(now) != unmanagedLines(before) {
		return errors.New("Patroni rewrote it with other changes meanwhile: pgtune leaves it to Patroni")
	}
	return transport.WriteFile(ctx, t.Transport, pg.ConfigFile, before, transport.WriteOptions{AsUser: pg.Owner, Become: t.Become})
}

// unmanagedLines is a configuration without the lines that set the
// managed parameters.
func unmanagedLines(b []byte) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		name, _, ok := strings.Cut(strings.TrimSpace(l), "=")
		if ok && slices.Contains(managed, strings.ToLower(strings.TrimSpace(name))) {
			continue
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
