package engine

import (
	"fmt"
	"sort"
	"strings"
)

// Order sorts the named modules so that each comes after the modules it
// requires. Requirements on modules that are not in the set are ignored
// (the module then plans from facts alone); ties are broken by name so the
// order never depends on YAML position. A cycle is an error naming it.
func Order(names []string, requires func(string) []string) ([]string, error) {
	in := map[string]bool{}
	for _, n := range names {
		in[n] = true
	}
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[string]int{}
	var out []string
	var stack []string
	var visit func(n string) error
	visit = func(n string) error {
		switch state[n] {
		case done:
			return nil
		case visiting:
			i := indexOf(stack, n)
			return fmt.Errorf("module dependency cycle: %s", strings.Join(append(stack[i:], n), " → "))
		}
		state[n] = visiting
		stack = append(stack, n)
		deps := append([]string(nil), requires(n)...)
		sort.Strings(deps)
		for _, d := range deps {
			if !in[d] {
				continue
			}
			if err := visit(d); err != nil {
				return err
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
		out = append(out, n)
		return nil
	}
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	for _, n := range sorted {
		if err := visit(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func indexOf(s []string, x string) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return -1
}
