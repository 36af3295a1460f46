package oom

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine"
)

var (
	_ engine.TargetManager = (*Module)(nil)
	_ engine.LiveKeeper    = (*Module)(nil)
	_ engine.RollbackHook  = (*Module)(nil)
	_ engine.FactDeclarer  = (*Module)(nil)
)

// Manages says what rollback may put back for this module: its drop-in
// in any service's drop-in directory under /etc/systemd/system, and the
// oom_score_adj of a postmaster (ReadLive decides whether that process is
// still the host's postmaster).
func (*Module) Manages(_ *engine.Target, kind, target string) bool {
	switch kind {
	case "file":
		dir, name := path.Split(target)
		unit, ok := strings.CutSuffix(strings.TrimSuffix(dir, "/"), ".d")
		return ok && name == dropinName && path.Dir(unit) == "/etc/systemd/system" && unitPattern.MatchString(path.Base(unit))
	case "live":
		_, _, err := parseLiveKey(target)
		return err == nil
	}
	return false
}

// ReadLive reads the oom_score_adj key names when that process is still
// the host's postmaster (the one facts verified, same PID and start
// time); otherwise it is gone and there is nothing to put back.
func (*Module) ReadLive(ctx context.Context, t *engine.Target, key string) (string, bool, error) {
	pid, start, err := parseLiveKey(key)
	if err != nil {
		return "", false, err
	}
	pg := t.Facts.Postgres
	if pg == nil || !pg.Running || pg.PID != pid || pg.StartTime != start {
		return "", false, nil
	}
	h, err := readHost(ctx, t, pid, "")
	if err != nil {
		return "", false, err
	}
	if !h.Read || h.Start != start {
		return "", false, nil
	}
	return strconv.Itoa(h.Adj), true, nil
}

// WriteLive puts a postmaster's oom_score_adj back; the value comes from
// a journal read from the host, so it is checked like any host number.
func (*Module) WriteLive(ctx context.Context, t *engine.Target, key, value string) error {
	pid, start, err := parseLiveKey(key)
	if err != nil {
		return err
	}
	v, err := parseAdj("oom_score_adj to restore", value)
	if err != nil {
		return err
	}
	pg := t.Facts.Postgres
	if pg == nil || pg.PID != pid || pg.StartTime != start {
		return fmt.Errorf("pid %d is no longer the postmaster: oom_score_adj left alone", pid)
	}
	return writeAdj(ctx, t, pid, start, v)
}

// UndoEarly: rollback undoes this module's changes before any other's, so
// that pgconf's restart on the restored configuration starts the server
// under the restored unit (engine.UndoEarly).
func (*Module) UndoEarly() bool { return true }

// AfterRollback reloads systemd once the drop-in is gone or back, so the
// unit's OOMPolicy is what it was; OOMScoreAdjust= and the environment go
// back at the unit's next start, which pgconf's rollback (after this one,
// see UndoEarly) performs for a cluster it changed.
func (*Module) AfterRollback(ctx context.Context, t *engine.Target) error {
	res, err := t.Run(ctx, "sh", "-c", `[ "$(head -c 64 /proc/1/comm 2>/dev/null)" = systemd ] && echo 1 || echo 0`)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(res.Stdout)) != "1" {
		return nil
	}
	return daemonReload(ctx, t)
}
