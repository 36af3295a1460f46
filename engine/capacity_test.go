package engine

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/pgtune/pgtune/engine/plan"
)

// pool is a module whose kernel value is capacity: a bigger number grows
// it (as a huge page pool's).
type pool struct{ panicky }

func (pool) Name() string { return "pool" }
func (pool) GrowsCapacity(kind, _, from, to string) bool {
	a, _ := strconv.Atoi(from)
	b, _ := strconv.Atoi(to)
	return kind == "sysfs" && b > a
}

// Rollback takes the steps that grow capacity first, in their order, and
// leaves every other step (shrinks included) where it was.
func TestGrowFirst(t *testing.T) {
	step := func(module, target, before, after string) undoStep {
		return undoStep{entry: JournalEntry{Kind: "sysfs", Module: module, Path: target},
			change: &plan.Change{Target: target, Before: before, After: after}}
	}
	steps := []undoStep{
		step("server", "/conf", "a", "b"),
		step("pool", "/small", "512", "0"), // shrinks: stays after the server
		{entry: JournalEntry{Kind: "file", Module: "pool", Path: "/boot"}, change: &plan.Change{Target: "/boot"}},
		step("pool", "/big", "0", "1"),
		step("pool", "/node", "0", "2"),
		step("other", "/x", "0", "9"),                                       // not a capacity module
		{entry: JournalEntry{Kind: "sysfs", Module: "pool", Path: "/same"}}, // nothing to do
	}
	var got []string
	for _, s := range growFirst(steps, map[string]CapacityGrower{"pool": pool{}}) {
		got = append(got, s.entry.Module+":"+s.entry.Path)
	}
	want := []string{"pool:/big", "pool:/node", "server:/conf", "pool:/small", "pool:/boot", "other:/x", "pool:/same"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if got := growFirst(steps, nil); !reflect.DeepEqual(got, steps) {
		t.Errorf("without capacity modules the order changed")
	}
}

// named is a module with a name and requirements only.
type named struct {
	panicky
	name     string
	requires []string
}

func (n named) Name() string       { return n.name }
func (n named) Requires() []string { return n.requires }

// holding is a named module that holds a shrink back.
type holding struct {
	named
	ShrinkAfterDependents
}

// A held shrink is made after the last step whose module requires the
// shrinking one, directly or through another; after its own step when
// none does.
func TestShrinkAfter(t *testing.T) {
	mk := func(m Module) *step { return &step{module: m} }
	steps := []*step{
		mk(holding{named: named{name: "pool"}}),
		mk(named{name: "shield"}),
		mk(named{name: "server", requires: []string{"pool", "shield"}}),
		mk(named{name: "limit", requires: []string{"server"}}), // through server
		mk(named{name: "thp"}),
		mk(holding{named: named{name: "alone"}}),
		mk(named{name: "late", requires: []string{"missing"}}),
	}
	got := shrinkAfter(steps)
	want := map[int]int{0: 3, 5: 5}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
