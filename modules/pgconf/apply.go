package pgconf

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/transport"
)

// Apply writes the planned files (journaled, with backups, atomically) and
// restarts the server when planned. If the server does not come back, the
// previous files are put back and the server started on them; the error
// then quotes the server's FATAL line.
func (m *Module) Apply(ctx context.Context, t *engine.Target, p *plan.ModulePlan) error {
	st, err := plan.StateOf[State](p)
	if err != nil || st == nil {
		return err
	}
	if st.Patroni != nil {
		return m.applyPatroni(ctx, t, st) // patroni_apply.go
	}
	pg := st.PG
	var blocking []string
	for _, o := range st.Overrides {
		if st.OnOverride == "fail" || !o.Fixable {
			blocking = append(blocking, o.String())
		}
	}
	if len(blocking) > 0 {
		return fmt.Errorf("settings that override %s: %s; on_override is %s: nothing was changed (remove them, or set on_override: fix)",
			st.Dropin, strings.Join(blocking, "; "), st.OnOverride)
	}

	if err := transport.MakeDir(ctx, t.Transport, path.Dir(st.Dropin), pg.Owner, t.Become); err != nil {
		return err // names the directory
	}
	mark := t.Mark()
	for _, f := range st.Files {
		// In directories the owner controls (conf.d, the data
		// directory), the owner writes: see transport's "Who acts".
		opts := transport.WriteOptions{AsUser: pg.Owner}
		if !f.Existed {
			opts.Mode, opts.Owner = f.Mode, f.Owner
		}
		if err := t.WriteFile(ctx, f.Path, f.After, opts); err != nil {
			werr := fmt.Errorf("write %s: %w", f.Path, err)
			if rerr := t.UndoSince(context.WithoutCancel(ctx), mark); rerr != nil {
				return fmt.Errorf("%w; restoring the files written before it failed too: %v", werr, rerr)
			}
			return werr
		}
	}
	if !st.Restart {
		return nil
	}
	if st.Switchover {
		return applySwitchover(ctx, t, pg, mark, switchoverTimeoutOf(st)) // switchover.go
	}

	res, rerr := restartPostgres(ctx, t, pg, true)
	if rerr == nil && res.ok() {
		if t.Log != nil {
			t.Log.Info("postgres restarted", "method", res.Method, "old_pid", res.OldPID, "new_pid", res.NewPID)
		}
		return nil
	}
	if errors.Is(rerr, transport.ErrConnectionLost) {
		// Nothing more can be done over a dead connection, and nothing
		// needs undoing in a hurry: the restart is detached on the host
		// and runs to its end (the next apply starts a server it left
		// stopped).
		return fmt.Errorf("lost the connection during the postgres restart: %w; the restart runs to its end on the host; run apply again to verify", rerr)
	}
	if rerr != nil && ctx.Err() != nil {
		// Cancelled (signal, --timeout) while the restart ran. The restart
		// itself is detached on the host and completes; wait for it (status
		// takes the same lock) instead of pulling the files from under a
		// server that may be starting on them.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*restartTimeout*time.Second)
		defer cancel()
		if t.Log != nil {
			t.Log.Warn("run interrupted during the postgres restart; waiting for the restart to finish", "err", ctx.Err())
		}
		if now, err := postgresStatus(wctx, t, pg); err == nil && now.Ready && now.NewPID != 0 && now.NewPID != pg.PID {
			return fmt.Errorf("interrupted during the postgres restart (%v); the restart completed: postgres runs pid %d on the new settings; run apply again to verify", ctx.Err(), now.NewPID)
		}
	}
	cause := ""
	if rerr != nil {
		cause = rerr.Error()
	} else {
		cause = res.failure()
	}
	return recoverStart(ctx, t, pg, mark, cause)
}

// startIfLeftStopped starts a stopped server when a pgtune restart marker
// says a restart began and never brought it back (the run was killed and
// the restart failed, or the host lost its restart half-way): pgtune
// stopped it, so pgtune starts it. A server stopped without a marker was
// stopped by someone else and is left alone. It reports whether it
// started the server.
func startIfLeftStopped(ctx context.Context, t *engine.Target, pg *facts.Postgres) (bool, error) {
	marker := restartMarker(t, pg)
	b, ok, err := t.ReadFile(ctx, marker)
	if err != nil || !ok {
		return false, err
	}
	what := strings.Join(strings.Fields(string(b)), " ")
	if t.Log != nil {
		t.Log.Warn("postgres is stopped after an unfinished pgtune restart; starting it", "marker", marker, "restart", what)
	}
	why := restartFailure(startAgain(ctx, t, pg))
	if why == "" {
		return true, nil
	}
	return false, fmt.Errorf("postgres (%s) is stopped: a restart pgtune began (%s) never brought it back, and starting it failed: %s; start it by hand (backups are under %s)",
		pg.DataDir, what, why, t.StateDir)
}

// recoverStart undoes the files and starts the server on them again. It
// runs to the end even when the run is being cancelled: a server left down
// is the one outcome pgtune must not produce.
func recoverStart(ctx context.Context, t *engine.Target, pg *facts.Postgres, mark engine.JournalMark, cause string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*restartTimeout*time.Second)
	defer cancel()
	if t.Log != nil {
		t.Log.Error("postgres did not start with the new settings; restoring the previous configuration", "cause", cause)
	}
	if err := t.UndoSince(rctx, mark); err != nil {
		return fmt.Errorf("%s; restoring the previous configuration FAILED: %v; postgres may be down: restore the backups of run %s and start it by hand",
			failedStart(cause), err, runID(t))
	}
	// Still up on the old postmaster (the restart never stopped it): the
	// restored files are what it runs on.
	if now, err := postgresStatus(rctx, t, pg); err == nil && now.Ready && now.NewPID != 0 && now.NewPID == pg.PID {
		return fmt.Errorf("%s; previous configuration restored, postgres still running on it (pid %d)",
			failedStart(cause), now.NewPID)
	}
	res, err := startAgain(rctx, t, pg)
	if why := restartFailure(res, err); why != "" {
		return fmt.Errorf("%s; the previous configuration was restored but postgres did NOT start again: %s; start it by hand",
			failedStart(cause), why)
	}
	return fmt.Errorf("%s; previous configuration restored, postgres running again on it (pid %d)",
		failedStart(cause), res.NewPID)
}

// failedStart phrases why the restart did not bring the server up.
func failedStart(cause string) string {
	if strings.Contains(cause, "FATAL:") || strings.Contains(cause, "PANIC:") {
		return "postgres refused to start with the new settings: " + cause
	}
	return "restarting postgres with the new settings failed: " + cause
}

func runID(t *engine.Target) string {
	if id := t.RunID(); id != "" {
		return id
	}
	return "(none)"
}

// Verify reads back the files and, when the server runs (and no restart is
// pending by policy), that the postmaster took the values and maps its
// segment on huge pages.
func (m *Module) Verify(ctx context.Context, t *engine.Target, p *plan.ModulePlan) error {
	st, err := plan.StateOf[State](p)
	if err != nil || st == nil {
		return err
	}
	if err := verifyFiles(ctx, t, st); err != nil {
		return err
	}
	running := st.PG.Running
	if !running {
		if running, err = startIfLeftStopped(ctx, t, st.PG); err != nil {
			return err
		}
	}
	if !running || st.Pending {
		return nil
	}
	pg, err := facts.RefreshPostgres(ctx, t.Transport, t.Become, st.PG)
	if err != nil {
		return err
	}
	if !pg.Running {
		return fmt.Errorf("postgres (%s) is not running", pg.DataDir)
	}
	if st.Restart && pg.PID == st.PG.PID && pg.StartTime == st.PG.StartTime {
		return fmt.Errorf("postmaster pid %d did not change: the restart did not happen", pg.PID)
	}
	live, err := liveSettings(ctx, t, pg)
	if err != nil {
		return err
	}
	before, differs := describeLiveFor(live, st.hugePageSize())
	if differs(st.SharedBuffers) {
		return fmt.Errorf("the server runs with %s, not shared_buffers=%s huge_pages=on huge_page_size=%s", before, formatSize(st.SharedBuffers), st.hugePageSize())
	}
	if pg.HugetlbPages <= 0 {
		return fmt.Errorf("postmaster pid %d maps no huge pages (HugetlbPages 0 kB in /proc/%d/status)", pg.PID, pg.PID)
	}
	if pg.Major >= 17 && live["huge_pages_status"] != "on" {
		return fmt.Errorf("huge_pages_status is %q, not on", live["huge_pages_status"])
	}
	return verifyOOMShield(ctx, t, st, pg) // oomshield.go
}

// verifyFiles reads back what Apply wrote: the planned files, or a
// Patroni member's patroni.yml parameters (patroni.go).
func verifyFiles(ctx context.Context, t *engine.Target, st *State) error {
	if st.Patroni != nil {
		return verifyPatroniParams(ctx, t, st.PG, st.Patroni)
	}
	fs := newConfFS()
	want := map[string][]byte{st.Dropin: dropinFor(st.SharedBuffers, st.hugePageSize())}
	for _, f := range st.Files {
		want[f.Path] = f.After
	}
	var paths []string
	for p := range want {
		paths = append(paths, "f:"+p)
	}
	if err := readInto(ctx, t, st.PG, fs, paths); err != nil {
		return err
	}
	for p, content := range want {
		f := fs.Files[p]
		if f == nil || !f.Exists || string(f.Content) != string(content) {
			return fmt.Errorf("%s does not hold the planned content", p)
		}
	}
	return nil
}
