package hugepages

import (
	"context"
	"regexp"
	"testing"

	"github.com/pgtune/pgtune/modules/internal/fakehost"
)

// hosts are machines that differ in everything a bad policy must not
// depend on: memory, huge page size, hugetlb support.
func hosts() map[string]*fakehost.Host {
	small := fakehost.New()
	small.MemTotalKB, small.MemAvailableKB = 3145727, 2<<20
	large := fakehost.New()
	large.MemTotalKB, large.MemAvailableKB, large.HugePageKB = 528280977, 500<<20, 1<<20
	noHugetlb := fakehost.New()
	noHugetlb.HugePageKB = 0
	delete(noHugetlb.Sysctl, "vm.nr_hugepages")
	return map[string]*fakehost.Host{"16GiB": fakehost.New(), "3GiB-odd": small, "512GiB-1G-pages": large, "no-hugetlb": noHugetlb}
}

// TestBadParamsSameEverywhere: params that need no host are refused by
// Validate, and Check refuses them with the same message on every host,
// before looking at any of the host's values.
func TestBadParamsSameEverywhere(t *testing.T) {
	tests := []struct {
		name   string
		params func(t *testing.T, p *Params)
		err    string
	}{
		{"negative pool", func(t *testing.T, p *Params) { p.Pool = val(t, "-1048576") },
			"policy.yml:7:13: pool must not be negative, got -1048576"},
		{"pool in words", func(t *testing.T, p *Params) { p.Pool = val(t, "lots") },
			`pool: policy.yml:7:13: "lots" is not a number`},
		{"fractional pool", func(t *testing.T, p *Params) { p.Pool = val(t, "${GiB / 3}") },
			"pool: policy.yml:7:13: expected a whole number, got 357913941.333 (use floor() or ceil())"},
		{"pool above a constant max_pool", func(t *testing.T, p *Params) { p.Pool = val(t, "${4 * GiB}"); p.MaxPool = val(t, "${2 * GiB}") },
			"policy.yml:7:13: pool 4.0 GiB (4294967296 bytes) is above max_pool 2.0 GiB; raise max_pool to allow it"},
		{"negative min_available", func(t *testing.T, p *Params) { p.MinAvailable = val(t, "${-1 * MiB}") },
			"policy.yml:7:13: min_available must not be negative, got -1048576"},
		{"unknown on_conflict", func(t *testing.T, p *Params) { p.OnConflict = val(t, "ignore") },
			`policy.yml:7:13: on_conflict must be "fail" or "comment", got "ignore"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultParams()
			tt.params(t, p)
			if err := New().Validate(p); err == nil || err.Error() != tt.err {
				t.Fatalf("Validate: %v\nwant %s", err, tt.err)
			}
			for name, h := range hosts() {
				_, err := New().Check(context.Background(), h.Target("db1"), p)
				if err == nil || err.Error() != tt.err {
					t.Errorf("%s: Check: %v\nwant %s", name, err, tt.err)
				}
				if len(h.Log) != 0 {
					t.Errorf("%s: Check ran commands: %q", name, h.Log)
				}
			}
		})
	}
}

// A pool above max_pool that depends on MemTotal passes Validate and is
// refused by Check on every host, hugetlb or not, before anything is read.
func TestPoolAboveMaxPoolAnyHost(t *testing.T) {
	p := DefaultParams()
	p.Pool = val(t, "${floor(facts.mem_total * 0.8)}")
	if err := New().Validate(p); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	want := regexp.MustCompile(`^policy\.yml:7:13: pool [0-9.]+ GiB \([0-9]+ bytes\) is above max_pool [0-9.]+ GiB \(75% of RAM\); raise max_pool to allow it$`)
	for name, h := range hosts() {
		_, err := New().Check(context.Background(), h.Target("db1"), p)
		if err == nil || !want.MatchString(err.Error()) {
			t.Errorf("%s: Check: %v", name, err)
		}
		if len(h.Log) != 0 {
			t.Errorf("%s: Check ran commands: %q", name, h.Log)
		}
	}
}
