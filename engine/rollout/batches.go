// Package rollout moves an apply through a fleet in batches: batch
// arithmetic (serial), the failure budget over the whole run, stable shards
// of the host list, the run state file on the controller and resuming an
// interrupted run from it.
package rollout

import (
	"fmt"
	"math"

	"github.com/pgtune/pgtune/engine/playbook"
)

// Sizes cuts n hosts into batch sizes following serial: each entry in
// turn, the last one repeated until every host has a batch. A percentage
// is of all n hosts, rounded down, never below one host. No serial: one
// batch of all. Entries beyond the fleet are never reached.
func Sizes(n int, serial []playbook.BatchSize) []int {
	if n <= 0 {
		return nil
	}
	if len(serial) == 0 {
		return []int{n}
	}
	var out []int
	for left, i := n, 0; left > 0; i++ {
		size := sizeOf(serial[min(i, len(serial)-1)], n)
		size = min(size, left)
		out = append(out, size)
		left -= size
	}
	return out
}

func sizeOf(b playbook.BatchSize, n int) int {
	if b.Percent <= 0 {
		return max(1, b.Count)
	}
	// The epsilon keeps 10% of 30 at 3 whatever the float rounding.
	return max(1, int(math.Floor(b.Percent*float64(n)/100+1e-9)))
}

// Budget is when a rollout stops early.
type Budget struct {
	// Hosts is how many hosts the run has, those an earlier attempt
	// verified included.
	Hosts int
	// MaxFailPercentage: stop once more than this share of Hosts failed.
	MaxFailPercentage *float64
	// AnyErrorsFatal: stop after the batch of the first failure.
	AnyErrorsFatal bool
}

// Stop says, after a batch, whether the rollout must stop and why ("":
// go on). batch is the batch's number (from 1), batchHosts its hosts,
// batchFailed how many of them failed (unreachable counts as failed) and
// batchHeld how many a failure of this run held back (members of a
// failed member's cluster, left untouched and reported failed), runFailed
// the failures of the whole run so far, held hosts included.
// A batch where no host got through, and at least one failed, stops the
// rollout whatever the budget: whatever broke it will break the next
// batch too. A batch of held hosts alone is no new evidence.
func (b Budget) Stop(batch, batchHosts, batchFailed, batchHeld, runFailed int) string {
	switch {
	case batchHosts > 0 && batchFailed > 0 && batchFailed+batchHeld == batchHosts:
		of := fmt.Sprintf("%d of %d", batchHosts, batchHosts)
		switch batchHeld {
		case 0:
		case 1:
			of += fmt.Sprintf(": %d failed, 1 held back by a failed member of its cluster", batchFailed)
		default:
			of += fmt.Sprintf(": %d failed, %d held back by failed members of their clusters", batchFailed, batchHeld)
		}
		return fmt.Sprintf("every host of batch %d failed (%s), whatever the failure budget", batch, of)
	case runFailed > 0 && b.AnyErrorsFatal:
		return fmt.Sprintf("any_errors_fatal: %s failed", hostsWord(runFailed))
	case runFailed > 0 && b.MaxFailPercentage != nil && b.Hosts > 0 &&
		float64(runFailed)*100/float64(b.Hosts) > *b.MaxFailPercentage:
		return fmt.Sprintf("%d of %d hosts failed (%.1f%%), more than max_fail_percentage %g%%",
			runFailed, b.Hosts, float64(runFailed)*100/float64(b.Hosts), *b.MaxFailPercentage)
	}
	return ""
}

func hostsWord(n int) string {
	if n == 1 {
		return "1 host"
	}
	return fmt.Sprintf("%d hosts", n)
}
