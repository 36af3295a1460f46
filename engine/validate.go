package engine

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/inventory"
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

// PolicyHosts is what validate knows of the hosts when an inventory was
// named: the selected hosts, and which of them each play runs on.
type PolicyHosts struct {
	Hosts   []*inventory.Host
	members []map[string]bool
}

// InventoryHosts resolves each play of book against inv for
// ValidatePolicyOn; hosts are the selected ones.
func InventoryHosts(inv *inventory.Inventory, book *playbook.Playbook, hosts []*inventory.Host) (*PolicyHosts, error) {
	members, err := playMembers(inv, book)
	if err != nil {
		return nil, err
	}
	return &PolicyHosts{Hosts: hosts, members: members}, nil
}

// ValidatePolicy is ValidatePolicyOn with no inventory: vars.* are not
// checked.
func ValidatePolicy(book *playbook.Playbook, mods map[string]Module) error {
	return ValidatePolicyOn(book, mods, nil)
}

// ValidatePolicyOn checks every play's params without contacting any
// host: each module's Validate (types and bounds of the values that need
// no host), the names every expression uses against Schema, then each
// expression evaluated against a scope where every fact, var and module
// output is an unknown value of its type and the functions are the real
// ones (staticScope): unknown functions, names and attributes and type
// errors are found, values that need a host stay unknown. With hosts
// (an inventory was named), a var no selected host defines is an error.
// Errors are located at file:line:col; all of them are returned, play by
// play.
func ValidatePolicyOn(book *playbook.Playbook, mods map[string]Module, hosts *PolicyHosts) error {
	schema := Schema(mods)
	var errs []error
	for i, p := range book.Plays {
		scope := staticScope(book, i, mods, hosts)
		// A module sees only the outputs of the modules planned before
		// it (bindOutputs): a use of a later one fails on the hosts
		// whose order plans it later.
		orders, err := playOrders(book, i, mods, hosts)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: play %q: %w", book.File, p.Name, err))
			continue
		}
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
				continue
			}
			if hosts != nil {
				if err := checkVars(params, hosts.Hosts); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", name, err))
					continue
				}
			}
			if err := checkPlannedBefore(params, name, orders); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				continue
			}
			if err := scope.CheckAll(params); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// playOrders returns the module orders play i's modules are planned in
// on some host, as the runner orders each host's modules (steps): one per
// distinct set of plays play i's hosts are in. Without hosts (or when the
// play selects none of them) which plays share a host is not known: the
// play alone and every play together.
func playOrders(book *playbook.Playbook, i int, mods map[string]Module, hosts *PolicyHosts) ([][]string, error) {
	var sets [][]int
	seen := map[string]bool{}
	if hosts != nil {
		for _, h := range hosts.Hosts {
			if !hosts.members[i][h.Name] {
				continue
			}
			var set []int
			for j := range book.Plays {
				if hosts.members[j][h.Name] {
					set = append(set, j)
				}
			}
			if key := fmt.Sprint(set); !seen[key] {
				seen[key] = true
				sets = append(sets, set)
			}
		}
	}
	if len(sets) == 0 {
		all := make([]int, len(book.Plays))
		for j := range all {
			all[j] = j
		}
		sets = [][]int{{i}, all}
	}
	requires := func(n string) []string {
		if m, ok := mods[n]; ok {
			return m.Requires()
		}
		return nil
	}
	var orders [][]string
	for _, set := range sets {
		var names []string
		for _, j := range set {
			names = append(names, book.Plays[j].Sections...)
		}
		order, err := Order(names, requires)
		if err != nil {
			return nil, err
		}
		orders = append(orders, order)
	}
	return orders, nil
}

// checkPlannedBefore refuses a use of a module's outputs where some order
// plans that module at or after this one.
func checkPlannedBefore(params any, module string, orders [][]string) error {
	for _, order := range orders {
		if err := expr.CheckAllRoots(params, plannedLater(module, order)); err != nil {
			return err
		}
	}
	return nil
}

// plannedLater refuses the modules order plans at or after module (its
// own outputs included): their outputs are not there yet when it plans.
func plannedLater(module string, order []string) func(string) string {
	at := slices.Index(order, module)
	return func(root string) string {
		i := slices.Index(order, root)
		if at < 0 || i < at {
			return ""
		}
		if i == at {
			return fmt.Sprintf("%s cannot use its own outputs (%s.*): they are what it plans", module, root)
		}
		return fmt.Sprintf("%s is planned after %s (order: %s), so %s cannot use its outputs; a module sees only those planned before it",
			root, module, strings.Join(order, " → "), module)
	}
}

// checkVars refuses a vars.NAME that no host defines: it fails on every
// host of the run.
func checkVars(params any, hosts []*inventory.Host) error {
	return expr.CheckAllAttrs(params, "vars", func(name string) bool {
		for _, h := range hosts {
			if _, ok := h.Vars[name]; ok {
				return true
			}
			if _, ok := h.Unusable[name]; ok {
				return true
			}
		}
		return false
	}, func(name string) string {
		n := len(hosts)
		if n == 1 {
			return fmt.Sprintf("vars.%s: the inventory's one host does not define it", name)
		}
		return fmt.Sprintf("vars.%s: none of the inventory's %d hosts defines it", name, n)
	})
}

// staticScope is what play i's expressions see on any host, with
// unknown values where a host is needed: facts of their types (and each
// module's fact set), host.name, vars (any name and type without hosts;
// the names some host defines with them), and the outputs of the modules
// that can run beside the play's on one host (declared by OutputDeclarer;
// any name otherwise). Without hosts, every play's modules count: which
// plays share a host is not known.
func staticScope(book *playbook.Playbook, i int, mods map[string]Module, hosts *PolicyHosts) *expr.Scope {
	s := expr.NewScope(book.File)
	s.SetValue("host", cty.ObjectVal(map[string]cty.Value{"name": cty.UnknownVal(cty.String)}))

	fattrs := expr.UnknownOf(facts.Facts{}).AsValueMap()
	for _, set := range FactSets(mods) {
		fattrs[set.Name] = cty.DynamicVal
	}
	s.SetValue("facts", expr.ObjectOf(fattrs))

	if hosts == nil {
		s.SetValue("vars", cty.DynamicVal)
	} else {
		vattrs := map[string]cty.Value{}
		for _, h := range hosts.Hosts {
			for k := range h.Vars {
				vattrs[k] = cty.DynamicVal
			}
			for k := range h.Unusable {
				vattrs[k] = cty.DynamicVal
			}
		}
		s.SetValue("vars", expr.ObjectOf(vattrs))
	}

	for _, name := range playNeighbours(book, i, hosts) {
		m, ok := mods[name]
		if !ok {
			continue
		}
		if d, ok := m.(OutputDeclarer); ok {
			s.SetValue(name, expr.UnknownAttrs(d.Outputs()))
		} else {
			s.SetValue(name, cty.DynamicVal)
		}
	}
	return s
}

// playNeighbours names the modules play i's hosts may run: its own, and
// those of every play sharing a selected host with it (of every play
// without hosts, or when play i runs on none of them).
func playNeighbours(book *playbook.Playbook, i int, hosts *PolicyHosts) []string {
	var out []string
	shares := func(j int) bool {
		if hosts == nil || j == i {
			return true
		}
		mine := 0
		for _, h := range hosts.Hosts {
			if hosts.members[i][h.Name] {
				mine++
				if hosts.members[j][h.Name] {
					return true
				}
			}
		}
		return mine == 0
	}
	for j, p := range book.Plays {
		if shares(j) {
			out = append(out, p.Sections...)
		}
	}
	return out
}
