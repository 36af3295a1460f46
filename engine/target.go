package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strings"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/transport"
)

// Target is one host as a module sees it: its transport, its facts, the
// expression scope of its play and what earlier modules planned.
type Target struct {
	Name      string
	Transport transport.Transport
	// Become makes privileged steps go through sudo -n.
	Become bool
	Facts  *facts.Facts
	// Vars are the host's merged inventory vars.
	Vars  map[string]any
	Scope *expr.Scope
	Log   *slog.Logger
	// Journal records every change made on the host, for rollback and
	// for undoing a failed apply (Mark, UndoSince); nil in check mode.
	Journal *Journal
	// StateDir holds the host's run journals and backups.
	StateDir string
	// Module is the module now working on the host (journal entries are
	// tagged with it).
	Module string

	outputs map[string]map[string]any
	// modules is the runner's registry: what modules declare (linked
	// kernel keys) is looked up there.
	modules map[string]Module
	// peers opens the other members of the host's cluster (peers.go).
	peers peersFunc
	// host is the inventory's host (nil in tests that make a Target).
	host *inventory.Host
	// addrs are the host's addresses as the session resolved them, when
	// addrsResolved (Addrs).
	addrs         []string
	addrsResolved bool
	// cache answers ReadFile in a dry run from the files read with the
	// facts (prefetch.go).
	cache *readCache
}

// Operations the engine runs as scripts on a host, named for fakes (see
// transport.Op).
const (
	OpRecordFile   transport.Op = "journal-record-file" // Args[4..5]: path, backup directory
	OpRunDir       transport.Op = "journal-run-dir"     // Args[4]: the run's directory
	OpReadJournals transport.Op = "read-journals"       // Args[4]: state directory
	OpSetSysctl    transport.Op = "set-sysctl"          // Args[4..5]: key, value
	OpWriteSysfs   transport.Op = "write-sysfs"         // Args[4..5]: path, value
	OpStat         transport.Op = "stat"                // Args[3]: path; prints "mode user:group"
	OpService      transport.Op = "service"             // Args: systemctl ACTION [UNIT]

	// The state directory and the host lock (hostlock.go).
	OpStateDir    transport.Op = "state-dir"    // prints ok, absent, or the reason (exit 3)
	OpLockFifo    transport.Op = "lock-fifo"    // makes the FIFO the holder answers through
	OpLockHold    transport.Op = "lock-hold"    // takes and holds the lock until cancelled
	OpLockAnswer  transport.Op = "lock-answer"  // prints the holder's answer: locked, or busy and who
	OpLockCleanup transport.Op = "lock-cleanup" // removes the FIFO of a holder that ended
)

// RunID is the id of the run changing the host; "" in check mode.
func (t *Target) RunID() string {
	if t.Journal == nil {
		return ""
	}
	return t.Journal.RunID
}

// Output returns a value an earlier module planned (module, key).
func (t *Target) Output(module, key string) (any, bool) {
	v, ok := t.outputs[module][key]
	return v, ok
}

// Int64Output is Output for integers.
func (t *Target) Int64Output(module, key string) (int64, bool) {
	v, ok := t.Output(module, key)
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}

// SetOutputs records what a module planned, as the runner does after
// each check; tests and tools driving modules directly use it too.
func (t *Target) SetOutputs(module string, out map[string]any) { t.setOutputs(module, out) }

func (t *Target) setOutputs(module string, out map[string]any) {
	if t.outputs == nil {
		t.outputs = map[string]map[string]any{}
	}
	t.outputs[module] = out
}

// Run runs a privileged command (through sudo -n when become is set).
// It leaves the dry run's read cache (prefetch.go) alone, so that a
// check's own read-only scripts do not cost later reads their prefetch:
// what changes the host goes through WriteFile, SetSysctl and the
// others, which drop it, and only targets without a journal (a check,
// never an apply) have one.
//
// In a dry run, a command the gather ran ahead (facts/prerun.go) takes
// that answer, once.
func (t *Target) Run(ctx context.Context, args ...string) (transport.Result, error) {
	cmd := transport.Command{Args: args, Become: t.Become}
	if res, ok := t.ranAhead(cmd); ok {
		return res, nil
	}
	return t.Transport.Run(ctx, cmd)
}

// ranAhead is the gather's answer to cmd, for a target without a journal
// (apply's re-check asks the host).
func (t *Target) ranAhead(cmd transport.Command) (transport.Result, bool) {
	if t.Journal != nil || t.Facts == nil {
		return transport.Result{}, false
	}
	return t.Facts.Ran.Take(cmd)
}

// RunInput is Run with stdin.
func (t *Target) RunInput(ctx context.Context, stdin []byte, args ...string) (transport.Result, error) {
	return t.Transport.Run(ctx, transport.Command{Args: args, Stdin: stdin, Become: t.Become})
}

// ReadFile reads a file on the host; a missing file returns (nil, false, nil).
// An error says "read FILE: …" already: callers add their step, not the
// file again.
func (t *Target) ReadFile(ctx context.Context, p string) ([]byte, bool, error) {
	if b, ok, hit := t.cachedFile(p); hit {
		return b, ok, nil
	}
	return found(transport.ReadFileActing(ctx, t.Transport, p, t.actor(), t.Become))
}

// ReadFileAs is ReadFile done as user, whatever the directories (uncached):
// for a path the host named, which root must not read on its word.
func (t *Target) ReadFileAs(ctx context.Context, p, user string) ([]byte, bool, error) {
	return found(transport.ReadFileAs(ctx, t.Transport, p, user, t.Become))
}

// found turns a transport read's missing file into (nil, false, nil).
func found(b []byte, err error) ([]byte, bool, error) {
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return b, true, nil
}

// WriteFile atomically replaces a file on the host, keeping what it
// replaces in the run's backups and recording it in the journal.
func (t *Target) WriteFile(ctx context.Context, p string, data []byte, opts transport.WriteOptions) error {
	return t.writeFile(ctx, p, data, opts, false)
}

// WriteSecretFile is WriteFile for a file whose content must never be
// shown (it holds passwords: Patroni's patroni.yml, ...): its journal
// entry is marked Sensitive, so rolling it back (rollback, or the undo of
// a failed apply) plans a Sensitive change whose content and diff no
// report shows.
func (t *Target) WriteSecretFile(ctx context.Context, p string, data []byte, opts transport.WriteOptions) error {
	return t.writeFile(ctx, p, data, opts, true)
}

func (t *Target) writeFile(ctx context.Context, p string, data []byte, opts transport.WriteOptions, sensitive bool) error {
	t.dropCache()
	opts.Become = t.Become
	if opts.AsUser == "" {
		opts.AsUser = t.actor()
	}
	if t.Journal != nil {
		backup, err := t.Journal.recordFile(ctx, t.Module, p, sensitive)
		if err != nil {
			return err
		}
		opts.Backup = backup
	}
	return transport.WriteFile(ctx, t.Transport, p, data, opts)
}

// RemoveFile deletes a file on the host, keeping a backup like WriteFile.
func (t *Target) RemoveFile(ctx context.Context, p string) error {
	t.dropCache()
	backup := ""
	if t.Journal != nil {
		var err error
		if backup, err = t.Journal.recordFile(ctx, t.Module, p, false); err != nil {
			return err
		}
	}
	return transport.RemoveFile(ctx, t.Transport, p, backup, t.actor(), t.Become)
}

// actor is who reads, writes and removes files where root does not act
// itself (a directory someone else controls): the cluster owner, whose
// files those are; "" when there is none, and the directory's owner acts
// unless a link led to it (transport's decide).
func (t *Target) actor() string {
	if t.Facts == nil || t.Facts.Postgres == nil || t.Facts.Postgres.Owner == "root" {
		return ""
	}
	return t.Facts.Postgres.Owner
}

// sysctlScript sets one kernel value: with sysctl(8) where installed, else
// by writing /proc/sys directly (minimal images lack procps).
const sysctlScript = `if command -v sysctl >/dev/null 2>&1; then exec sysctl -q -w "$1=$2"; fi
printf '%s\n' "$2" > "/proc/sys/$(printf %s "$1" | tr . /)"`

// SetSysctl sets a live kernel value, recording the previous one. When
// the module declares that writing key changes other keys
// (LinkedSysctls), their values are recorded too, so undo can give back
// whichever was in force.
func (t *Target) SetSysctl(ctx context.Context, key, value string) error {
	if strings.ContainsAny(key, "/ \n") || strings.Contains(key, "..") {
		return fmt.Errorf("invalid sysctl key %q", key)
	}
	t.dropCache()
	if t.Journal != nil {
		keys := append([]string{key}, t.linkedSysctls(t.Module, key)...)
		entries := make([]JournalEntry, 0, len(keys))
		for _, k := range keys {
			v, err := t.ReadSysctl(ctx, k)
			if err != nil {
				return err
			}
			entries = append(entries, JournalEntry{Kind: "sysctl", Module: t.Module, Key: k, Before: v})
		}
		if err := t.Journal.record(ctx, entries...); err != nil {
			return err
		}
	}
	if _, err := t.Transport.Run(ctx, transport.Command{Op: OpSetSysctl, Args: []string{"sh", "-c", sysctlScript, "sh", key, value}, Become: t.Become}); err != nil {
		return fmt.Errorf("set %s=%s: %w", key, value, err)
	}
	return nil
}

// ReadSysctl reads a live kernel value.
func (t *Target) ReadSysctl(ctx context.Context, key string) (string, error) {
	b, err := transport.ReadFile(ctx, t.Transport, path.Join("/proc/sys", strings.ReplaceAll(key, ".", "/")), false)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Service runs a systemd action on the host: systemctl daemon-reload, or
// systemctl ACTION UNIT for restart, try-restart and reload. It is
// recorded first: undo runs it again once what it acted on (a unit file,
// a drop-in) is back.
func (t *Target) Service(ctx context.Context, unit, action string) error {
	if err := validService(unit, action); err != nil {
		return err
	}
	t.dropCache()
	if t.Journal != nil {
		if err := t.Journal.record(ctx, JournalEntry{Kind: "service", Module: t.Module, Unit: unit, Action: action}); err != nil {
			return err
		}
	}
	args := []string{"systemctl", action}
	if unit != "" {
		args = append(args, unit)
	}
	if _, err := t.Transport.Run(ctx, transport.Command{Op: OpService, Args: args, Become: t.Become}); err != nil {
		return fmt.Errorf("systemctl %s: %w", strings.TrimSpace(action+" "+unit), err)
	}
	return nil
}
