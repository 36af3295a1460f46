package engine

import (
	"errors"
	"fmt"
	"sort"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/playbook"
)

// Schema lists the names policy expressions may use: facts.* (by their
// JSON names), host.name, vars.* (any name: inventory vars differ per
// host), the outputs of every module (any name), and the unit constants.
func Schema(mods map[string]Module) *expr.Schema {
	s := expr.NewSchema()
	s.Add("facts", expr.JSONNames(facts.Facts{})...)
	s.Add("host", "name")
	s.Add("vars")
	for name := range mods {
		s.Add(name)
	}
	return s
}

// ValidatePolicy checks every play's params without contacting any host:
// each module's Validate (types and bounds of the values that need no
// host), then the names every expression uses against Schema. Errors are
// located at file:line:col; all of them are returned, play by play.
func ValidatePolicy(book *playbook.Playbook, mods map[string]Module) error {
	schema := Schema(mods)
	var errs []error
	for _, p := range book.Plays {
		names := append([]string(nil), p.Sections...)
		sort.Strings(names)
		for _, name := range names {
			m, ok := mods[name]
			if !ok {
				continue // the loader refuses unknown modules
			}
			params := p.Policy[name]
			if err := m.Validate(params); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				continue
			}
			if err := expr.CheckAllNames(params, schema); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}
