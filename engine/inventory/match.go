package inventory

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Match selects hosts with an Ansible host pattern: "all" (or "*"), group
// and host names, globs (web*, db?), ~regex, subscripts (web[0], web[1:2],
// web[-1]), and combinations separated by ":" or ",": "a:b" union,
// "a:&b" intersection, "a:!b" exclusion. As in Ansible, unions are taken
// first, then intersections, then exclusions, whatever their order. Every
// term must match something: a typo must not silently select or spare
// hosts. The result is sorted by name.
func (inv *Inventory) Match(pattern string) ([]*Host, error) {
	// A name that is a host or group as a whole is that, even when it
	// holds a ":" (an IPv6 address such as "::1" or "fe80::1").
	if names, ok := inv.exact(strings.TrimSpace(pattern)); ok && strings.Contains(pattern, ":") {
		return inv.hostsNamed(names), nil
	}
	terms := splitPattern(pattern)
	if len(terms) == 0 {
		return nil, fmt.Errorf("empty host pattern")
	}
	var union, and, not []string
	for _, t := range terms {
		switch {
		case strings.HasPrefix(t, "&"):
			and = append(and, strings.TrimSpace(t[1:]))
		case strings.HasPrefix(t, "!"):
			not = append(not, strings.TrimSpace(t[1:]))
		default:
			union = append(union, t)
		}
	}
	if len(union) == 0 {
		union = []string{"all"}
	}
	set := map[string]bool{}
	for _, t := range union {
		hs, err := inv.term(t)
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			set[h] = true
		}
	}
	for _, t := range and {
		hs, err := inv.term(t)
		if err != nil {
			return nil, err
		}
		keep := map[string]bool{}
		for _, h := range hs {
			if set[h] {
				keep[h] = true
			}
		}
		set = keep
	}
	for _, t := range not {
		hs, err := inv.term(t)
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			delete(set, h)
		}
	}
	out := make([]*Host, 0, len(set))
	for _, h := range inv.Hosts { // already sorted by name
		if set[h.Name] {
			out = append(out, h)
		}
	}
	return out, nil
}

// Named returns the hosts pattern selects by naming them: through a
// union or intersection term other than "all" or "*" (a host name, a
// group, a glob, a regex), minus its exclusions. A host that "all" alone
// brings in is not named. The default-targets rule uses it: a play that
// names a host works on it even without a PostgreSQL cluster.
func (inv *Inventory) Named(pattern string) ([]*Host, error) {
	selected, err := inv.Match(pattern)
	if err != nil {
		return nil, err
	}
	if names, ok := inv.exact(strings.TrimSpace(pattern)); ok && strings.Contains(pattern, ":") {
		return inv.hostsNamed(names), nil
	}
	named := map[string]bool{}
	for _, t := range splitPattern(pattern) {
		if strings.HasPrefix(t, "!") {
			continue
		}
		t = strings.TrimSpace(strings.TrimPrefix(t, "&"))
		if t == "all" || t == "*" {
			continue
		}
		hs, err := inv.term(t)
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			named[h] = true
		}
	}
	var out []*Host
	for _, h := range selected {
		if named[h.Name] {
			out = append(out, h)
		}
	}
	return out, nil
}

// Limit narrows hosts (a play's selection) to those pattern matches, as
// --limit does. Every term of pattern must name something in the
// inventory; an empty result is not an error here (another play may
// still have hosts), the caller decides.
func (inv *Inventory) Limit(hosts []*Host, pattern string) ([]*Host, error) {
	sel, err := inv.Match(pattern)
	if err != nil {
		return nil, fmt.Errorf("--limit: %w", err)
	}
	keep := map[string]bool{}
	for _, h := range sel {
		keep[h.Name] = true
	}
	var out []*Host
	for _, h := range hosts {
		if keep[h.Name] {
			out = append(out, h)
		}
	}
	return out, nil
}

// splitPattern splits on "," and on ":" outside [subscripts]; a ~regex
// term runs to the next comma since a regex may hold colons.
func splitPattern(p string) []string {
	var out []string
	add := func(t string) {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	for i := 0; i <= len(p); {
		k := i
		for k < len(p) && strings.IndexByte(" &!", p[k]) >= 0 {
			k++
		}
		if k < len(p) && p[k] == '~' {
			e := strings.IndexByte(p[k:], ',')
			if e < 0 {
				e = len(p)
			} else {
				e += k
			}
			add(p[i:e])
			i = e + 1
			continue
		}
		j, depth := k, 0
		for ; j < len(p); j++ {
			c := p[j]
			if c == '[' {
				depth++
			} else if c == ']' && depth > 0 {
				depth--
			} else if c == ',' || (c == ':' && depth == 0) {
				break
			}
		}
		add(p[i:j])
		i = j + 1
	}
	return out
}

var subscriptRe = regexp.MustCompile(`^(.+)\[(-?\d+)?(:)?(-?\d+)?\]$`)

// term resolves one pattern term to host names.
func (inv *Inventory) term(t string) ([]string, error) {
	if t == "all" || t == "*" {
		return inv.names(inv.Hosts), nil
	}
	if strings.HasPrefix(t, "~") {
		re, err := regexp.Compile(t[1:])
		if err != nil {
			return nil, fmt.Errorf("host pattern %q: %v", t, err)
		}
		hs := inv.matchFunc(re.MatchString)
		if len(hs) == 0 {
			return nil, fmt.Errorf("no host or group matches %q", t)
		}
		return hs, nil
	}
	if hs, ok := inv.exact(t); ok {
		return hs, nil
	}
	if m := subscriptRe.FindStringSubmatch(t); m != nil {
		if base, ok := inv.exact(m[1]); ok {
			return subscript(t, base, m[2], m[3] != "", m[4])
		}
	}
	if strings.ContainsAny(t, "*?[") {
		if _, err := path.Match(t, ""); err != nil {
			return nil, fmt.Errorf("host pattern %q: %v", t, err)
		}
		hs := inv.matchFunc(func(name string) bool {
			ok, _ := path.Match(t, name)
			return ok
		})
		if len(hs) > 0 {
			return hs, nil
		}
	}
	return nil, fmt.Errorf("no host or group matches %q", t)
}

// exact resolves a group name (all its hosts, children included) or a
// host name; a name that is both (Ansible allows it) means both.
func (inv *Inventory) exact(name string) ([]string, bool) {
	if _, ok := inv.Groups[name]; ok {
		var out []string
		for _, h := range inv.Hosts {
			if h.Name == name || slices.Contains(h.Groups, name) {
				out = append(out, h.Name)
			}
		}
		return out, true
	}
	if _, ok := inv.byName[name]; ok {
		return []string{name}, true
	}
	return nil, false
}

// matchFunc returns the hosts whose name, or one of whose groups' names,
// matches.
func (inv *Inventory) matchFunc(match func(string) bool) []string {
	var out []string
	for _, h := range inv.Hosts {
		if match(h.Name) {
			out = append(out, h.Name)
			continue
		}
		for _, g := range h.Groups {
			if match(g) {
				out = append(out, h.Name)
				break
			}
		}
	}
	return out
}

// subscript picks hosts by position (sorted by name); like Ansible,
// [a:b] includes b.
func subscript(t string, hosts []string, from string, isRange bool, to string) ([]string, error) {
	sort.Strings(hosts)
	n := len(hosts)
	idx := func(s string, def int) (int, error) {
		if s == "" {
			return def, nil
		}
		i, err := strconv.Atoi(s)
		if err != nil {
			return 0, err
		}
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			return 0, fmt.Errorf("out of range")
		}
		return i, nil
	}
	bad := func() ([]string, error) {
		return nil, fmt.Errorf("host pattern %q: subscript out of range (%d hosts)", t, n)
	}
	if !isRange {
		if from == "" {
			return bad()
		}
		i, err := idx(from, 0)
		if err != nil {
			return bad()
		}
		return hosts[i : i+1], nil
	}
	a, err := idx(from, 0)
	if err != nil {
		return bad()
	}
	b, err := idx(to, n-1)
	if err != nil || b < a {
		return bad()
	}
	return hosts[a : b+1], nil
}

func (inv *Inventory) names(hs []*Host) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Name
	}
	return out
}

// hostsNamed returns the hosts of these names, sorted by name.
func (inv *Inventory) hostsNamed(names []string) []*Host {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var out []*Host
	for _, h := range inv.Hosts {
		if want[h.Name] {
			out = append(out, h)
		}
	}
	return out
}
