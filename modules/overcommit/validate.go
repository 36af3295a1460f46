package overcommit

import (
	"fmt"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/modules/internal/sysctlconf"
)

// Validate checks, without a host, every param that needs none (plain
// values, expressions over constants) against its type and bounds, with
// the same messages Check gives for evaluated values.
func (m *Module) Validate(params any) error {
	prm, ok := params.(*Params)
	if !ok {
		return fmt.Errorf("overcommit: unexpected params %T", params)
	}
	s := expr.NewScope("")
	if v := prm.MaxCommitted; v.Static() {
		x, err := s.Float64(v)
		if err != nil {
			return fmt.Errorf("max_committed: %w", err)
		}
		if x <= 0 || x > 1 {
			return s.Errorf(v, "max_committed must be in (0, 1], got %g", x)
		}
	}
	if v := prm.Kbytes; v.IsSet() {
		if v.Static() {
			kb, err := s.Int64(v)
			if err != nil {
				return fmt.Errorf("kbytes: %w", err)
			}
			if kb <= 0 {
				return s.Errorf(v, "kbytes must be positive, got %d", kb)
			}
		}
	} else {
		// ratio and headroom only count without kbytes, as in Check.
		if v := prm.Ratio; v.Static() {
			x, err := s.Float64(v)
			if err != nil {
				return fmt.Errorf("ratio: %w", err)
			}
			if x <= 0 || x > 1 {
				return s.Errorf(v, "ratio must be in (0, 1], got %g", x)
			}
		}
		if v := prm.Headroom; v.Static() {
			n, err := s.Int64(v)
			if err != nil {
				return fmt.Errorf("headroom: %w", err)
			}
			if n < 0 {
				return s.Errorf(v, "headroom must not be negative, got %d", n)
			}
		}
	}
	if v := prm.SysctlFile; v.Static() {
		if _, err := s.String(v); err != nil {
			return fmt.Errorf("sysctl_file: %w", err)
		}
	}
	if v := prm.OnConflict; v.Static() {
		x, err := s.String(v)
		if err != nil {
			return fmt.Errorf("on_conflict: %w", err)
		}
		if err := sysctlconf.ValidOnConflict(x); err != nil {
			return s.Errorf(v, "%v", err)
		}
	}
	return nil
}
