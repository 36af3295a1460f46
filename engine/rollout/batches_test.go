package rollout

import (
	"reflect"
	"testing"

	"github.com/pgtune/pgtune/engine/playbook"
)

func TestSizes(t *testing.T) {
	n := func(c int) playbook.BatchSize { return playbook.BatchSize{Count: c} }
	p := func(f float64) playbook.BatchSize { return playbook.BatchSize{Percent: f} }
	tests := []struct {
		name   string
		hosts  int
		serial []playbook.BatchSize
		want   []int
	}{
		{"no serial: one batch", 7, nil, []int{7}},
		{"no hosts", 0, []playbook.BatchSize{n(2)}, nil},
		{"count divides", 6, []playbook.BatchSize{n(2)}, []int{2, 2, 2}},
		{"count leaves a short last batch", 7, []playbook.BatchSize{n(3)}, []int{3, 3, 1}},
		{"count above the fleet", 3, []playbook.BatchSize{n(10)}, []int{3}},
		{"percentage rounds down", 30, []playbook.BatchSize{p(10)}, []int{3, 3, 3, 3, 3, 3, 3, 3, 3, 3}},
		{"small percentage is still one host", 5, []playbook.BatchSize{p(1)}, []int{1, 1, 1, 1, 1}},
		{"100%", 9, []playbook.BatchSize{p(100)}, []int{9}},
		{"canary, 10%, the rest", 50, []playbook.BatchSize{n(1), p(10), p(100)}, []int{1, 5, 44}},
		{"last entry repeats", 10, []playbook.BatchSize{n(1), n(3)}, []int{1, 3, 3, 3}},
		{"list longer than the fleet", 2, []playbook.BatchSize{n(1), n(1), n(5), p(50)}, []int{1, 1}},
		{"one host, canary list", 1, []playbook.BatchSize{n(1), p(10), p(100)}, []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Sizes(tt.hosts, tt.serial)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Sizes(%d, %v) = %v, want %v", tt.hosts, tt.serial, got, tt.want)
			}
			sum := 0
			for _, s := range got {
				sum += s
			}
			if sum != tt.hosts {
				t.Errorf("batches hold %d hosts, want %d", sum, tt.hosts)
			}
		})
	}
}

func TestBudget(t *testing.T) {
	pct := func(f float64) *float64 { return &f }
	tests := []struct {
		name                                              string
		budget                                            Budget
		batch, batchHosts, batchFailed, batchHeld, failed int
		stop                                              bool
		reason                                            string
	}{
		{"no budget, one failure goes on", Budget{Hosts: 10}, 1, 2, 1, 0, 1, false, ""},
		{"0%: the first failure stops", Budget{Hosts: 10, MaxFailPercentage: pct(0)}, 1, 2, 1, 0, 1, true,
			"1 of 10 hosts failed (10.0%), more than max_fail_percentage 0%"},
		{"0% and no failure goes on", Budget{Hosts: 10, MaxFailPercentage: pct(0)}, 1, 2, 0, 0, 0, false, ""},
		{"100% never stops on the budget", Budget{Hosts: 10, MaxFailPercentage: pct(100)}, 3, 4, 3, 0, 9, false, ""},
		{"at the budget goes on (more than, not as many as)", Budget{Hosts: 10, MaxFailPercentage: pct(20)}, 2, 4, 1, 0, 2, false, ""},
		{"over the budget stops", Budget{Hosts: 10, MaxFailPercentage: pct(20)}, 2, 4, 2, 0, 3, true,
			"3 of 10 hosts failed (30.0%), more than max_fail_percentage 20%"},
		{"counted over the run, not the batch", Budget{Hosts: 100, MaxFailPercentage: pct(5)}, 6, 10, 1, 0, 6, true,
			"6 of 100 hosts failed (6.0%), more than max_fail_percentage 5%"},
		{"all-fail batch stops whatever the budget", Budget{Hosts: 100, MaxFailPercentage: pct(100)}, 1, 1, 1, 0, 1, true,
			"every host of batch 1 failed (1 of 1), whatever the failure budget"},
		{"all-fail batch stops without a budget", Budget{Hosts: 100}, 2, 5, 5, 0, 5, true,
			"every host of batch 2 failed (5 of 5), whatever the failure budget"},
		{"any_errors_fatal", Budget{Hosts: 100, AnyErrorsFatal: true}, 1, 10, 1, 0, 1, true, "any_errors_fatal: 1 host failed"},
		{"any_errors_fatal, no failure", Budget{Hosts: 100, AnyErrorsFatal: true}, 1, 10, 0, 0, 0, false, ""},
		{"failed and held back: no host got through", Budget{Hosts: 100}, 2, 3, 1, 2, 3, true,
			"every host of batch 2 failed (3 of 3: 1 failed, 2 held back by failed members of their clusters), whatever the failure budget"},
		{"held back alone: no new failure, goes on", Budget{Hosts: 100}, 3, 2, 0, 2, 3, false, ""},
		{"held back count in the budget", Budget{Hosts: 10, MaxFailPercentage: pct(20)}, 2, 4, 1, 1, 3, true,
			"3 of 10 hosts failed (30.0%), more than max_fail_percentage 20%"},
		{"empty batch", Budget{Hosts: 0, MaxFailPercentage: pct(0)}, 1, 0, 0, 0, 0, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.budget.Stop(tt.batch, tt.batchHosts, tt.batchFailed, tt.batchHeld, tt.failed)
			if (got != "") != tt.stop || got != tt.reason {
				t.Errorf("Stop = %q, want %q", got, tt.reason)
			}
		})
	}
}
