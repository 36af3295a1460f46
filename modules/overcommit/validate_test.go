package overcommit

import (
	"context"
	"testing"

	"github.com/pgtune/pgtune/modules/internal/fakehost"
)

// TestBadParamsSameEverywhere: params that need no host are refused by
// Validate, and Check refuses them with the same message on every host,
// whatever its memory or huge page support, before reading any of its
// values.
func TestBadParamsSameEverywhere(t *testing.T) {
	small := fakehost.New()
	small.MemTotalKB = 3145727
	noHugetlb := fakehost.New()
	noHugetlb.HugePageKB = 0
	delete(noHugetlb.Sysctl, "vm.nr_hugepages")
	hosts := map[string]*fakehost.Host{"16GiB": fakehost.New(), "3GiB-odd": small, "no-hugetlb": noHugetlb}

	tests := []struct {
		name   string
		params func(t *testing.T, p *Params)
		err    string
	}{
		{"ratio above one", func(t *testing.T, p *Params) { p.Ratio = val(t, "1.5") },
			"policy.yml:21:17: ratio must be in (0, 1], got 1.5"},
		{"ratio zero", func(t *testing.T, p *Params) { p.Ratio = val(t, "0") },
			"policy.yml:21:17: ratio must be in (0, 1], got 0"},
		{"ratio in words", func(t *testing.T, p *Params) { p.Ratio = val(t, "high") },
			`ratio: policy.yml:21:17: "high" is not a number`},
		{"negative headroom", func(t *testing.T, p *Params) { p.Headroom = val(t, "${-2 * GiB}") },
			"policy.yml:21:17: headroom must not be negative, got -2147483648"},
		{"fractional headroom", func(t *testing.T, p *Params) { p.Headroom = val(t, "${GiB / 3}") },
			"headroom: policy.yml:21:17: expected a whole number, got 357913941.333 (use floor() or ceil())"},
		{"kbytes zero", func(t *testing.T, p *Params) { p.Kbytes = val(t, "0") },
			"policy.yml:21:17: kbytes must be positive, got 0"},
		{"max_committed above one", func(t *testing.T, p *Params) { p.MaxCommitted = val(t, "2") },
			"policy.yml:21:17: max_committed must be in (0, 1], got 2"},
		{"unknown on_conflict", func(t *testing.T, p *Params) { p.OnConflict = val(t, "ignore") },
			`policy.yml:21:17: on_conflict must be "fail" or "comment", got "ignore"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := DefaultParams()
			tt.params(t, p)
			if err := New().Validate(p); err == nil || err.Error() != tt.err {
				t.Fatalf("Validate: %v\nwant %s", err, tt.err)
			}
			for name, h := range hosts {
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

// With kbytes set, ratio and headroom are not used, so Validate does not
// judge them (as Check does not).
func TestValidateIgnoresRatioUnderKbytes(t *testing.T) {
	p := DefaultParams()
	p.Kbytes = val(t, "1048576")
	p.Ratio = val(t, "1.5")
	if err := New().Validate(p); err != nil {
		t.Fatal(err)
	}
}
