package inventory

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Match selects hosts with an Ansible host pattern, as Ansible selects
// them: "all" (or "*"), group and host names, globs (web*, db?, db[!1]*:
// Python's fnmatch), ~regex (matched from the name's start), subscripts
// (web[0], web[1:2], web[-1], pg*[0]), and combinations separated by ":"
// or ",": "a:b" union, "a:&b" intersection, "a:!b" exclusion. As in
// Ansible, unions are taken first, then intersections, then exclusions,
// whatever their order. Every term must match something: a typo must not
// silently select or spare hosts. Subscripts count in Ansible's order
// (groupHosts, enumerate), not by name, so pg[0] is the host Ansible's
// pg[0] is; a slice past the end is cut there and a single index past it
// selects nothing, as in Ansible. The result is sorted by name.
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
		hs, err := inv.term(t, true)
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			set[h] = true
		}
	}
	for _, t := range and {
		hs, err := inv.term(t, false)
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
		hs, err := inv.term(t, false)
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
		union := !strings.HasPrefix(t, "&")
		t = strings.TrimSpace(strings.TrimPrefix(t, "&"))
		if t == "all" || t == "*" {
			continue
		}
		hs, err := inv.term(t, union)
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

// subscriptRe is Ansible's PATTERN_WITH_SUBSCRIPT: a term ending in
// [i], [-i], [a:b], [a:] or the old [a-b] form (which Ansible still reads
// as [a:b], with a warning). Anything else in brackets ([:3], [-2:],
// [!1]) is no subscript but part of a glob, as in Ansible.
var subscriptRe = regexp.MustCompile(`^(.+)\[(?:(-?[0-9]+)|([0-9]+)([:-])([0-9]*))\]$`)

// term resolves one pattern term to host names, as Ansible's
// _match_one_pattern does (union says it is not an &/! term: only there
// does a host name win over a group of the same name).
func (inv *Inventory) term(t string, union bool) ([]string, error) {
	if t == "all" || t == "*" {
		return inv.names(inv.Hosts), nil
	}
	if _, ok := inv.byName[t]; ok && union {
		return []string{t}, nil
	}
	expr := t
	var m []string
	if !strings.HasPrefix(t, "~") {
		if m = subscriptRe.FindStringSubmatch(t); m != nil {
			expr = m[1]
		}
	}
	hosts, err := inv.enumerate(expr)
	if err != nil {
		return nil, err
	}
	if m == nil {
		if len(hosts) == 0 {
			return nil, fmt.Errorf("no host or group matches %q", t)
		}
		return uniq(hosts), nil
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("no host or group matches %q", expr)
	}
	if m[2] != "" {
		hosts, err = subscript(t, hosts, m[2], false, "")
	} else {
		hosts, err = subscript(t, hosts, m[3], true, m[5])
	}
	return uniq(hosts), err
}

// enumerate is Ansible's _enumerate_matches: the hosts of every group
// expr names or matches (a glob, or a ~regex matched from the name's
// start), in the order groups were first named; then, for a glob or a
// regex or when no group matched, the hosts it names or matches, in the
// order they were first listed. Repeats stay: a subscript counts them, as
// Ansible's does.
func (inv *Inventory) enumerate(expr string) ([]string, error) {
	special := strings.HasPrefix(expr, "~") || strings.ContainsAny(expr, ".?*[")
	match := func(name string) bool { return name == expr }
	switch {
	case strings.HasPrefix(expr, "~"):
		re, err := regexp.Compile(expr[1:])
		if err != nil {
			return nil, fmt.Errorf("host pattern %q: %v", expr, err)
		}
		// Python's re.match: anchored at the start, not the end. The
		// leftmost match starts at 0 whenever some match does (wrapping
		// the text in ^(?:...) breaks on \Q).
		match = func(name string) bool {
			loc := re.FindStringIndex(name)
			return loc != nil && loc[0] == 0
		}
	case special:
		re, err := globRegexp(expr)
		if err != nil {
			return nil, fmt.Errorf("host pattern %q: %v", expr, err)
		}
		match = re.MatchString
	}
	var out []string
	groups := 0
	for _, g := range inv.groupsInOrder() {
		if match(g) {
			groups++
			out = append(out, inv.groupHosts(g)...)
		}
	}
	if groups == 0 || special {
		for _, h := range inv.hostsInOrder() {
			if match(h) {
				out = append(out, h)
			}
		}
	}
	return out, nil
}

// groupsInOrder and hostsInOrder are the inventory's groups and hosts in
// the order Ansible made them (all and ungrouped first), which a
// subscript on a glob counts in.
func (inv *Inventory) groupsInOrder() []string {
	order := []string{"all"}
	if _, ok := inv.Groups["ungrouped"]; ok {
		order = append(order, "ungrouped")
	}
	rest := inv.groupOrder
	if rest == nil {
		rest = sortedKeys(inv.Groups)
	}
	for _, g := range rest {
		if g != "all" && g != "ungrouped" {
			order = append(order, g)
		}
	}
	return order
}

func (inv *Inventory) hostsInOrder() []string {
	if inv.hostOrder != nil {
		return inv.hostOrder
	}
	return inv.names(inv.Hosts)
}

func uniq(names []string) []string {
	seen := make(map[string]bool, len(names))
	out := names[:0:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// exact resolves a whole name: a host of that name, which wins over a
// group of the same name as in Ansible, or a group's hosts in Ansible's
// order.
func (inv *Inventory) exact(name string) ([]string, bool) {
	if _, ok := inv.byName[name]; ok {
		return []string{name}, true
	}
	if _, ok := inv.Groups[name]; ok {
		return inv.groupHosts(name), true
	}
	return nil, false
}

// groupHosts returns a group's hosts in Ansible's order (Group.get_hosts):
// those it lists, in the order the inventory lists them (the files of an
// inventory directory in name order), then its children's in the order
// they are listed, then their children's, level by level, each host once.
// Past the direct children Ansible walks each level as a set, so its
// order there varies between runs; pgtune takes the groups of a level in
// the order their parents list them.
func (inv *Inventory) groupHosts(name string) []string {
	seenGroup := map[string]bool{name: true}
	order := []string{name}
	for level := order; len(level) > 0; {
		var next []string
		for _, g := range level {
			for _, c := range inv.Groups[g].childOrder() {
				if !seenGroup[c] {
					seenGroup[c] = true
					next = append(next, c)
				}
			}
		}
		order = append(order, next...)
		level = next
	}
	seen := map[string]bool{}
	var out []string
	for _, g := range order {
		for _, h := range inv.Groups[g].hostOrder() {
			if _, ok := inv.byName[h]; ok && !seen[h] {
				seen[h] = true
				out = append(out, h)
			}
		}
	}
	return out
}

// hostOrder and childOrder are a group's hosts and children in the order
// the inventory lists them (sorted for a group built by hand).
func (g *Group) hostOrder() []string {
	if g.listed == nil {
		return g.Hosts
	}
	return g.listed
}

func (g *Group) childOrder() []string {
	if g.kids == nil {
		return g.Children
	}
	return g.kids
}

// subscript picks hosts by position in Ansible's order (groupHosts); like
// Ansible, [a:b] includes b, [a:] runs to the last host, and a slice past
// the last host is cut there (etcd[0:5] on two hosts is both). A single
// index ([i], [-i]) past the hosts selects none, as in Ansible ("No hosts
// matched"); the other terms of the pattern still count. A range takes no
// negative bound and needs its start ([-2:], [:3]): Ansible reads those as
// no subscript, a pattern that matches nothing. [i:0] is [i], as Ansible
// takes an end of 0 for none.
func subscript(t string, hosts []string, from string, isRange bool, to string) ([]string, error) {
	n := len(hosts)
	num := func(s string) int {
		i, _ := strconv.Atoi(s) // digits, as subscriptRe took them
		return i
	}
	if !isRange {
		if from == "" {
			return nil, fmt.Errorf("no host or group matches %q", t)
		}
		i := num(from)
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			return []string{}, nil
		}
		return hosts[i : i+1], nil
	}
	if from == "" || strings.HasPrefix(from, "-") || strings.HasPrefix(to, "-") {
		return nil, fmt.Errorf("no host or group matches %q", t)
	}
	a, b := num(from), n-1
	if to != "" {
		b = num(to)
	}
	if to != "" && b == 0 {
		// Ansible reads an end of 0 as none given: [i:0] is [i].
		return subscript(t, hosts, from, false, "")
	}
	// Python's hosts[a:b+1]: both ends cut to the hosts there are.
	a, b = min(a, n), min(b+1, n)
	if b < a {
		b = a
	}
	return hosts[a:b], nil
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
