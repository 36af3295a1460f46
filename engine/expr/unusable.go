package expr

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Unusable marks names under root (vars) that are defined but cannot be
// used, such as an inventory value written as a Jinja template or
// encrypted with Ansible Vault. An expression that names one fails at the
// name with why (which says where the value was written), instead of
// calling the name unknown.
func (s *Scope) Unusable(root string, why map[string]error) {
	if len(why) == 0 {
		return
	}
	if s.unusable == nil {
		s.unusable = map[string]map[string]error{}
	}
	s.unusable[root] = why
}

func (s *Scope) checkUnusable(v Value) error {
	if len(s.unusable) == 0 {
		return nil
	}
	for _, tr := range v.expr.Variables() {
		why := s.unusable[tr.RootName()]
		if why == nil || len(tr) < 2 {
			continue
		}
		var name string
		var at hcl.Range
		switch step := tr[1].(type) {
		case hcl.TraverseAttr:
			name, at = step.Name, step.SrcRange
			at.Start.Byte++ // past the dot
		case hcl.TraverseIndex:
			if step.Key.Type() != cty.String || !step.Key.IsKnown() {
				continue
			}
			name, at = step.Key.AsString(), step.SrcRange
		default:
			continue
		}
		if err := why[name]; err != nil {
			line, col := v.span.at(v.src, at.Start.Byte)
			return &PosError{File: s.fileOf(v), Line: line, Column: col,
				Msg: fmt.Sprintf("%s.%s cannot be used: %v", tr.RootName(), name, err)}
		}
	}
	return nil
}
