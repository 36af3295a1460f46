package thp

import (
	"fmt"

	"github.com/pgtune/pgtune/engine/expr"
)

// settings are the params evaluated for one host.
type settings struct {
	enabled, defrag, file string
}

// Validate checks, without a host, every param that needs none against
// the modes allowed and the boot file's place.
func (m *Module) Validate(params any) error {
	prm, ok := params.(*Params)
	if !ok {
		return fmt.Errorf("thp: unexpected params %T", params)
	}
	_, err := prm.evalIn(expr.NewScope(""), true)
	return err
}

// eval evaluates and checks the params for a host.
func (prm *Params) eval(s *expr.Scope) (settings, error) { return prm.evalIn(s, false) }

// evalIn evaluates the params in s; with static, values that need a host
// are skipped.
func (prm *Params) evalIn(s *expr.Scope, static bool) (settings, error) {
	var out settings
	for _, p := range []struct {
		key string
		v   expr.Value
		dst *string
		why string // why always is refused
	}{
		{"enabled", prm.Enabled, &out.enabled, "the kernel would back every large anonymous mapping with huge pages, so backends' memory grows in huge steps and allocations stall in compaction (latency spikes)"},
		{"defrag", prm.Defrag, &out.defrag, "page faults would stall in direct compaction to find huge pages (latency spikes)"},
	} {
		if static && !p.v.Static() {
			continue
		}
		mode, err := s.String(p.v)
		if err != nil {
			return out, fmt.Errorf("%s: %w", p.key, err)
		}
		switch mode {
		case Never, Madvise:
		case "always":
			return out, s.Errorf(p.v, "%s: always is refused: %s; use never or madvise", p.key, p.why)
		default:
			return out, s.Errorf(p.v, "%s must be never or madvise, got %q", p.key, mode)
		}
		*p.dst = mode
	}
	if v := prm.TmpfilesFile; !static || v.Static() {
		file, err := s.String(v)
		if err != nil {
			return out, fmt.Errorf("tmpfiles_file: %w", err)
		}
		if !ManagedFile(file) {
			return out, s.Errorf(v, "tmpfiles_file must be a clean absolute path of a *.conf file in a tmpfiles.d directory, got %q", file)
		}
		out.file = file
	}
	return out, nil
}
