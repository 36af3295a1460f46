package engine

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/transport"
)

// sysctlRecorder answers every command and records the kernel keys set;
// setting key "stop" runs at.
type sysctlRecorder struct {
	set  *[]string
	stop string
	at   func()
}

func (r sysctlRecorder) Run(_ context.Context, cmd transport.Command) (transport.Result, error) {
	if cmd.Op == OpSetSysctl {
		*r.set = append(*r.set, cmd.Args[4])
		if cmd.Args[4] == r.stop {
			r.at()
		}
	}
	return transport.Result{}, nil
}

func (sysctlRecorder) Close() error { return nil }

// TestRunUndoStops: a stop (Ctrl-C in rollback) keeps the next module's
// steps from starting but never splits a module: its steps and its after
// hook (a restart on the old settings) run whole once begun. A module
// with nothing to put back is no reason to report an interruption.
func TestRunUndoStops(t *testing.T) {
	step := func(module, key string, change bool) undoStep {
		s := undoStep{entry: JournalEntry{Kind: "sysctl", Module: module, Key: key, Before: "0"}}
		if change {
			s.change = &plan.Change{Kind: plan.KindSysctl, Target: key}
		}
		return s
	}
	steps := []undoStep{
		step("overcommit", "vm.overcommit_memory", true),
		step("overcommit", "vm.overcommit_kbytes", true),
		step("pgconf", "vm.unchanged", false),
		step("hugepages", "vm.nr_hugepages", true),
	}
	for _, tc := range []struct {
		name      string
		stopAfter string // the after hook of this module closes stop ("": never; "-": closed before)
		stopAt    string // or setting this key does
		set       []string
		hooks     []string
		stopped   bool
	}{
		{name: "no stop", set: []string{"vm.overcommit_memory", "vm.overcommit_kbytes", "vm.nr_hugepages"}, hooks: []string{"overcommit", "hugepages"}},
		{name: "stopped before", stopAfter: "-", stopped: true},
		{name: "stopped in the first module", stopAfter: "overcommit", set: []string{"vm.overcommit_memory", "vm.overcommit_kbytes"},
			hooks: []string{"overcommit"}, stopped: true},
		{name: "stopped in the middle of a module", stopAt: "vm.overcommit_memory", set: []string{"vm.overcommit_memory", "vm.overcommit_kbytes"},
			hooks: []string{"overcommit"}, stopped: true},
		{name: "stopped in the last module", stopAfter: "hugepages", set: []string{"vm.overcommit_memory", "vm.overcommit_kbytes", "vm.nr_hugepages"},
			hooks: []string{"overcommit", "hugepages"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var set, hooks []string
			stop := make(chan struct{})
			if tc.stopAfter == "-" {
				close(stop)
			}
			tg := &Target{Name: "h1", Transport: sysctlRecorder{set: &set, stop: tc.stopAt, at: func() { close(stop) }}}
			after := func(_ context.Context, module string) error {
				hooks = append(hooks, module)
				if module == tc.stopAfter {
					close(stop)
				}
				return nil
			}
			err := runUndo(context.Background(), tg, steps, undoOptions{after: after, stop: stop})
			if got := errors.Is(err, ErrInterrupted); got != tc.stopped || !tc.stopped && err != nil {
				t.Errorf("err = %v, want interrupted: %t", err, tc.stopped)
			}
			if !reflect.DeepEqual(set, tc.set) || !reflect.DeepEqual(hooks, tc.hooks) {
				t.Errorf("set %q, hooks %q; want %q, %q", set, hooks, tc.set, tc.hooks)
			}
		})
	}
}
