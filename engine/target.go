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
	// Journal records every change made on the host for rollback; nil in
	// check mode.
	Journal *Journal
	// StateDir holds the host's run journals and backups.
	StateDir string
	// Module is the module now working on the host (journal entries are
	// tagged with it).
	Module string

	outputs map[string]map[string]any
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
func (t *Target) Run(ctx context.Context, args ...string) (transport.Result, error) {
	return t.Transport.Run(ctx, transport.Command{Args: args, Become: t.Become})
}

// RunInput is Run with stdin.
func (t *Target) RunInput(ctx context.Context, stdin []byte, args ...string) (transport.Result, error) {
	return t.Transport.Run(ctx, transport.Command{Args: args, Stdin: stdin, Become: t.Become})
}

// ReadFile reads a file on the host; a missing file returns (nil, false, nil).
func (t *Target) ReadFile(ctx context.Context, p string) ([]byte, bool, error) {
	b, err := transport.ReadFile(ctx, t.Transport, p, t.Become)
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
	opts.Become = t.Become
	if t.Journal != nil {
		backup, err := t.Journal.recordFile(ctx, t.Module, p)
		if err != nil {
			return err
		}
		opts.Backup = backup
	}
	return transport.WriteFile(ctx, t.Transport, p, data, opts)
}

// RemoveFile deletes a file on the host, keeping a backup like WriteFile.
func (t *Target) RemoveFile(ctx context.Context, p string) error {
	backup := ""
	if t.Journal != nil {
		var err error
		if backup, err = t.Journal.recordFile(ctx, t.Module, p); err != nil {
			return err
		}
	}
	return transport.RemoveFile(ctx, t.Transport, p, backup, t.Become)
}

// sysctlScript sets one kernel value: with sysctl(8) where installed, else
// by writing /proc/sys directly (minimal images lack procps).
const sysctlScript = `if command -v sysctl >/dev/null 2>&1; then exec sysctl -q -w "$1=$2"; fi
printf '%s\n' "$2" > "/proc/sys/$(printf %s "$1" | tr . /)"`

// linkedSysctls are keys the kernel changes as a side effect of writing
// another: vm.overcommit_kbytes and vm.overcommit_ratio zero each other.
var linkedSysctls = map[string][]string{
	"vm.overcommit_kbytes": {"vm.overcommit_ratio"},
	"vm.overcommit_ratio":  {"vm.overcommit_kbytes"},
}

// SetSysctl sets a live kernel value, recording the previous one.
func (t *Target) SetSysctl(ctx context.Context, key, value string) error {
	if strings.ContainsAny(key, "/ \n") || strings.Contains(key, "..") {
		return fmt.Errorf("invalid sysctl key %q", key)
	}
	if t.Journal != nil {
		// Writing one of a linked pair zeroes the other: record both, so
		// rollback can give back whichever was in force.
		keys := append([]string{key}, linkedSysctls[key]...)
		before := map[string]string{}
		for _, k := range keys {
			v, err := t.ReadSysctl(ctx, k)
			if err != nil {
				return err
			}
			before[k] = v
		}
		if err := t.Journal.recordSysctl(ctx, t.Module, before, keys...); err != nil {
			return err
		}
	}
	if _, err := t.Run(ctx, "sh", "-c", sysctlScript, "sh", key, value); err != nil {
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
