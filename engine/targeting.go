package engine

import (
	"errors"
	"fmt"
	"sort"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/playbook"
)

// Targets resolves which hosts each play touches, narrowed by limit
// (empty: no narrowing). A host outside every play is not worked on.
func Targets(inv *inventory.Inventory, book *playbook.Playbook, limit string) ([]*inventory.Host, error) {
	var allowed map[string]bool
	if limit != "" {
		hs, err := inv.Match(limit)
		if err != nil {
			return nil, fmt.Errorf("--limit: %w", err)
		}
		allowed = map[string]bool{}
		for _, h := range hs {
			allowed[h.Name] = true
		}
	}
	seen := map[string]bool{}
	var out []*inventory.Host
	for _, p := range book.Plays {
		hs, err := inv.Match(p.Hosts)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: play %q: hosts: %w", book.File, p.Line, p.Name, err)
		}
		for _, h := range hs {
			if seen[h.Name] || (allowed != nil && !allowed[h.Name]) {
				continue
			}
			seen[h.Name] = true
			out = append(out, h)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) == 0 {
		return nil, errors.New("no hosts to work on: no play matches any host (check --limit and the plays' hosts)")
	}
	return out, nil
}

// steps lists the modules a host runs, in dependency order, across the
// plays that match it.
func (r *Runner) steps(book *playbook.Playbook, members []map[string]bool, h *inventory.Host) ([]*step, error) {
	params := map[string]any{}
	from := map[string]string{}
	for i, p := range book.Plays {
		if !members[i][h.Name] {
			continue
		}
		for _, name := range p.Sections {
			if prev, dup := from[name]; dup {
				return nil, fmt.Errorf("%s: module %s is set by two plays (%q and %q) for this host", book.File, name, prev, p.Name)
			}
			from[name] = p.Name
			params[name] = p.Policy[name]
		}
	}
	names := make([]string, 0, len(params))
	for n := range params {
		if _, ok := r.Modules[n]; !ok {
			return nil, fmt.Errorf("unknown module %q", n)
		}
		names = append(names, n)
	}
	order, err := Order(names, func(n string) []string { return r.Modules[n].Requires() })
	if err != nil {
		return nil, err
	}
	out := make([]*step, len(order))
	for i, n := range order {
		out[i] = &step{module: r.Modules[n], params: params[n]}
	}
	return out, nil
}

// playMembers resolves each play's hosts pattern once for the whole run:
// which hosts each play touches.
func playMembers(inv *inventory.Inventory, book *playbook.Playbook) ([]map[string]bool, error) {
	out := make([]map[string]bool, len(book.Plays))
	for i, p := range book.Plays {
		hs, err := inv.Match(p.Hosts)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: play %q: hosts: %w", book.File, p.Line, p.Name, err)
		}
		out[i] = make(map[string]bool, len(hs))
		for _, h := range hs {
			out[i][h.Name] = true
		}
	}
	return out, nil
}
