// Package inventory loads Ansible-style YAML inventories: groups with
// hosts, children and vars, nested to any depth, vars inherited the way
// Ansible merges them, and the connection settings pgtune needs resolved
// and checked for every host.
package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pgtune/pgtune/engine/expr"
)

// Inventory is a loaded inventory file.
type Inventory struct {
	File   string
	Hosts  []*Host // sorted by name
	Groups map[string]*Group

	byName map[string]*Host
}

// Group is one group as the file defines it (a group defined in several
// places is merged).
type Group struct {
	Name     string
	Hosts    []string // hosts listed directly in the group, sorted
	Children []string // sorted
	Vars     map[string]any

	parents []string
	// depth is the longest path from "all" (Ansible sorts by it: deeper
	// groups win), priority is ansible_group_priority (default 1).
	depth, priority int
	line            int
}

// Host is one host with everything inherited.
type Host struct {
	Name   string
	Groups []string       // every group it belongs to, incl. "all", sorted
	Vars   map[string]any // merged vars
	Conn   Conn           // connection settings resolved from Vars

	// Line is where the host is first listed in the file (0 for the
	// implicit localhost).
	Line int
}

// Conn is how to reach a host and where its PostgreSQL lives.
type Conn struct {
	Connection      string // "ssh" (default) or "local"
	Address         string // ssh_host | ansible_host (default: host name)
	Port            int    // ssh_port | ansible_port (0 = default / ssh_config)
	User            string // ssh_user | ansible_user
	PrivateKeyFile  string // ssh_private_key_file | ansible_ssh_private_key_file
	KnownHostsFile  string // ssh_known_hosts_file
	HostKeyChecking string // ssh_host_key_checking: "strict" | "accept-new"; "" lets the ssh_config decide, else strict
	ConfigFile      string // ssh_config_file, relative paths resolved against the inventory's dir
	Become          bool   // become | ansible_become

	PGData, PGBin, PGConfigFile, PGRestart string // pg_data, pg_bin, pg_config_file, pg_restart
}

// Load reads and parses an inventory file.
func Load(path string) (*Inventory, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	return Parse(path, data)
}

// Localhost is the inventory used without -i: this machine, no SSH.
func Localhost() *Inventory {
	h := &Host{
		Name:   "localhost",
		Groups: []string{"all", "ungrouped"},
		Vars:   map[string]any{"connection": "local"},
		Conn:   Conn{Connection: "local", Address: "localhost", HostKeyChecking: "strict"},
	}
	return &Inventory{
		Hosts: []*Host{h},
		Groups: map[string]*Group{
			"all":       {Name: "all", Children: []string{"ungrouped"}, Vars: map[string]any{}, priority: 1},
			"ungrouped": {Name: "ungrouped", Hosts: []string{"localhost"}, Vars: map[string]any{}, parents: []string{"all"}, depth: 1, priority: 1},
		},
		byName: map[string]*Host{"localhost": h},
	}
}

// Host returns the host of that name.
func (inv *Inventory) Host(name string) (*Host, bool) {
	h, ok := inv.byName[name]
	return h, ok
}

// varDef is one var as written at one place, kept with its position so
// that bad values are reported where they were written.
type varDef struct {
	key   string
	value any
	node  *yaml.Node
}

type parser struct {
	file   string
	dir    string
	groups map[string]*Group
	// group and host vars in document order; later definitions win.
	groupVars map[string][]varDef
	hostVars  map[string][]varDef
	hostLine  map[string]int
	hostOrder []string
	inGroup   map[string]map[string]bool
}

// Parse parses inventory YAML; file names it in errors and anchors
// relative ssh_config_file paths.
func Parse(file string, data []byte) (*Inventory, error) {
	if line := iniSection(data); line > 0 {
		return nil, &expr.PosError{File: file, Line: line, Msg: "this looks like an INI inventory; pgtune reads YAML inventories " +
			"(convert it with: ansible-inventory -i " + file + " --list --yaml)"}
	}
	root, err := expr.ParseYAML(file, data)
	if err != nil {
		return nil, err
	}
	if root == nil {
		return nil, &expr.PosError{File: file, Msg: "inventory is empty (expected a mapping such as all: {hosts: {...}})"}
	}
	if root.Kind != yaml.MappingNode {
		return nil, posErr(file, root, "an inventory is a mapping of groups (all:, or group names), not %s", describe(root))
	}
	p := &parser{
		file:      file,
		dir:       filepath.Dir(file),
		groups:    map[string]*Group{},
		groupVars: map[string][]varDef{},
		hostVars:  map[string][]varDef{},
		hostLine:  map[string]int{},
		inGroup:   map[string]map[string]bool{},
	}
	p.group("all", 0)
	pairs, err := p.pairs(root)
	if err != nil {
		return nil, err
	}
	for _, kv := range pairs {
		name, err := p.name(kv[0], "group")
		if err != nil {
			return nil, err
		}
		parent := "all"
		if name == "all" {
			parent = ""
		}
		if err := p.parseGroup(name, parent, kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	if len(p.hostOrder) == 0 {
		return nil, &expr.PosError{File: file, Line: root.Line, Msg: "inventory has no hosts"}
	}
	return p.build()
}

// iniSection returns the line of a leading "[group]" header: a YAML
// inventory never starts with a flow list, an INI one always has these.
func iniSection(data []byte) int {
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		if len(line) > 2 && line[0] == '[' && line[len(line)-1] == ']' && !strings.ContainsAny(line[1:len(line)-1], "[], ") {
			return i + 1
		}
		return 0
	}
	return 0
}

// pairs returns a mapping's key/value nodes with merge keys (<<) expanded
// the way YAML defines them: explicit keys win over merged ones.
func (p *parser) pairs(n *yaml.Node) ([][2]*yaml.Node, error) {
	n = deref(n)
	var out [][2]*yaml.Node
	explicit := map[string]bool{}
	var merged [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			srcs := []*yaml.Node{deref(v)}
			if srcs[0].Kind == yaml.SequenceNode {
				srcs = srcs[0].Content
			}
			for _, s := range srcs {
				s = deref(s)
				if s.Kind != yaml.MappingNode {
					return nil, posErr(p.file, s, "a merge key (<<) needs a mapping, not %s", describe(s))
				}
				sub, err := p.pairs(s)
				if err != nil {
					return nil, err
				}
				merged = append(merged, sub...)
			}
			continue
		}
		explicit[deref(k).Value] = true
		out = append(out, [2]*yaml.Node{k, v})
	}
	seen := map[string]bool{}
	for _, kv := range merged {
		name := deref(kv[0]).Value
		if explicit[name] || seen[name] {
			continue // earlier merge sources win over later ones
		}
		seen[name] = true
		out = append(out, kv)
	}
	return out, nil
}

func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// name reads a group or host name key.
func (p *parser) name(k *yaml.Node, what string) (string, error) {
	k = deref(k)
	if k.Kind != yaml.ScalarNode {
		return "", posErr(p.file, k, "a %s name must be a string, not %s", what, describe(k))
	}
	if k.Value == "" {
		return "", posErr(p.file, k, "empty %s name", what)
	}
	if strings.ContainsAny(k.Value, "\n\r\x00") {
		return "", posErr(p.file, k, "%s name %q contains a line break or NUL", what, k.Value)
	}
	return k.Value, nil
}

func (p *parser) group(name string, line int) *Group {
	g := p.groups[name]
	if g == nil {
		g = &Group{Name: name, Vars: map[string]any{}, priority: 1, line: line}
		p.groups[name] = g
	}
	return g
}

func (p *parser) parseGroup(name, parent string, key, n *yaml.Node) error {
	g := p.group(name, key.Line)
	if parent != "" && !slices.Contains(g.parents, parent) {
		g.parents = append(g.parents, parent)
		pg := p.groups[parent]
		pg.Children = append(pg.Children, name)
	}
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return posErr(p.file, n, "group %q must be a mapping with hosts:, children: or vars:, not %s", name, describe(n))
	}
	pairs, err := p.pairs(n)
	if err != nil {
		return err
	}
	for _, kv := range pairs {
		k, v := deref(kv[0]), deref(kv[1])
		switch k.Value {
		case "hosts":
			if err := p.parseHosts(name, v); err != nil {
				return err
			}
		case "children":
			if isNull(v) {
				continue
			}
			if v.Kind != yaml.MappingNode {
				return posErr(p.file, v, "children of group %q must be a mapping of group names, not %s", name, describe(v))
			}
			cp, err := p.pairs(v)
			if err != nil {
				return err
			}
			for _, c := range cp {
				child, err := p.name(c[0], "group")
				if err != nil {
					return err
				}
				if child == "all" {
					return posErr(p.file, c[0], `group "all" cannot be a child of %q`, name)
				}
				if err := p.parseGroup(child, name, c[0], c[1]); err != nil {
					return err
				}
			}
		case "vars":
			defs, err := p.vars(v, fmt.Sprintf("vars of group %q", name))
			if err != nil {
				return err
			}
			p.groupVars[name] = append(p.groupVars[name], defs...)
		default:
			return posErr(p.file, k, "unknown key %q in group %q (expected hosts, children or vars)", k.Value, name)
		}
	}
	return nil
}

func (p *parser) parseHosts(group string, n *yaml.Node) error {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return posErr(p.file, n, "hosts of group %q must be a mapping of host names (host: or host: {vars}), not %s", group, describe(n))
	}
	pairs, err := p.pairs(n)
	if err != nil {
		return err
	}
	g := p.groups[group]
	for _, kv := range pairs {
		pattern, err := p.name(kv[0], "host")
		if err != nil {
			return err
		}
		names, port, err := expandHost(pattern)
		if err != nil {
			return posErr(p.file, kv[0], "host %q: %v", pattern, err)
		}
		v := deref(kv[1])
		var defs []varDef
		if !isNull(v) {
			if v.Kind != yaml.MappingNode {
				return posErr(p.file, v, "host %q must be followed by a mapping of its vars or nothing, not %s", pattern, describe(v))
			}
			if defs, err = p.vars(v, fmt.Sprintf("vars of host %q", pattern)); err != nil {
				return err
			}
		}
		if port != "" {
			// host:port is Ansible's shorthand for ansible_port.
			pn := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: port, Line: kv[0].Line, Column: kv[0].Column}
			d, err := p.def("ansible_port", pn)
			if err != nil {
				return err
			}
			defs = append([]varDef{d}, defs...)
		}
		for _, name := range names {
			if err := checkText("host name", name); err != nil {
				return posErr(p.file, kv[0], "%v", err)
			}
			if _, ok := p.hostLine[name]; !ok {
				p.hostLine[name] = kv[0].Line
				p.hostOrder = append(p.hostOrder, name)
			}
			if !p.inGroup[group][name] {
				if p.inGroup[group] == nil {
					p.inGroup[group] = map[string]bool{}
				}
				p.inGroup[group][name] = true
				g.Hosts = append(g.Hosts, name)
			}
			p.hostVars[name] = append(p.hostVars[name], defs...)
		}
	}
	return nil
}

// vars reads a vars mapping, checking connection settings where written.
func (p *parser) vars(n *yaml.Node, what string) ([]varDef, error) {
	if isNull(n) {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, posErr(p.file, n, "%s must be a mapping, not %s", what, describe(n))
	}
	pairs, err := p.pairs(n)
	if err != nil {
		return nil, err
	}
	var out []varDef
	for _, kv := range pairs {
		k := deref(kv[0])
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return nil, posErr(p.file, k, "%s: a var name must be a non-empty string", what)
		}
		d, err := p.def(k.Value, kv[1])
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

func (p *parser) def(key string, n *yaml.Node) (varDef, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return varDef{}, posErr(p.file, n, "%s: %v", key, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	d := varDef{key: key, value: v, node: deref(n)}
	if f, ok := connKeys[key]; ok {
		if _, err := f.parse(d.value); err != nil {
			return varDef{}, posErr(p.file, d.node, "%s: %v", key, err)
		}
	}
	if key == "ansible_group_priority" {
		if _, err := parseInt(d.value); err != nil {
			return varDef{}, posErr(p.file, d.node, "%s: %v", key, err)
		}
	}
	return d, nil
}

// build links groups, orders them as Ansible does and merges vars.
func (p *parser) build() (*Inventory, error) {
	if err := p.depths(); err != nil {
		return nil, err
	}
	inv := &Inventory{File: p.file, Groups: p.groups, byName: map[string]*Host{}}
	for name, defs := range p.groupVars {
		g := p.groups[name]
		for _, d := range defs {
			g.Vars[d.key] = d.value
			if d.key == "ansible_group_priority" {
				g.priority, _ = parseInt(d.value)
			}
		}
	}
	// Hosts under all: and in no other group are "ungrouped", as in Ansible.
	member := map[string]map[string]bool{} // host → groups, direct and inherited
	var walkUp func(h, g string)
	walkUp = func(h, g string) {
		if member[h][g] {
			return
		}
		member[h][g] = true
		for _, par := range p.groups[g].parents {
			walkUp(h, par)
		}
	}
	for _, h := range p.hostOrder {
		member[h] = map[string]bool{"all": true}
	}
	names := sortedKeys(p.groups)
	for _, gname := range names {
		for _, h := range p.groups[gname].Hosts {
			walkUp(h, gname)
		}
	}
	for _, h := range p.hostOrder {
		if len(member[h]) == 1 {
			ug := p.groups["ungrouped"]
			if ug == nil {
				ug = p.group("ungrouped", 0)
				ug.parents = []string{"all"}
				ug.depth = 1
				p.groups["all"].Children = append(p.groups["all"].Children, "ungrouped")
			}
			ug.Hosts = append(ug.Hosts, h)
			member[h]["ungrouped"] = true
		}
	}
	for _, g := range p.groups {
		sort.Strings(g.Hosts)
		g.Children = uniqSorted(g.Children)
	}
	for _, name := range p.hostOrder {
		h := &Host{Name: name, Vars: map[string]any{}, Line: p.hostLine[name]}
		for g := range member[name] {
			h.Groups = append(h.Groups, g)
		}
		sort.Strings(h.Groups)
		// Ansible's order: shallower groups first, then lower priority,
		// then by name; each later group overrides; host vars last.
		order := slices.Clone(h.Groups)
		sort.Slice(order, func(i, j int) bool {
			a, b := p.groups[order[i]], p.groups[order[j]]
			if a.depth != b.depth {
				return a.depth < b.depth
			}
			if a.priority != b.priority {
				return a.priority < b.priority
			}
			return a.Name < b.Name
		})
		var levels [][]varDef
		for _, g := range order {
			levels = append(levels, p.groupVars[g])
		}
		levels = append(levels, p.hostVars[name])
		conn, err := resolve(name, levels, p.dir)
		if err != nil {
			return nil, &expr.PosError{File: p.file, Line: h.Line, Msg: fmt.Sprintf("host %q: %v", name, err)}
		}
		for _, l := range levels {
			for _, d := range l {
				h.Vars[d.key] = d.value
			}
		}
		h.Conn = conn
		inv.byName[name] = h
		inv.Hosts = append(inv.Hosts, h)
	}
	sort.Slice(inv.Hosts, func(i, j int) bool { return inv.Hosts[i].Name < inv.Hosts[j].Name })
	return inv, nil
}

// depths computes each group's longest distance from "all" and refuses
// cycles in children:.
func (p *parser) depths() error {
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	var path []string
	var visit func(name string, depth int) error
	visit = func(name string, depth int) error {
		g := p.groups[name]
		if state[name] == visiting {
			i := slices.Index(path, name)
			return &expr.PosError{File: p.file, Line: g.line,
				Msg: fmt.Sprintf("group %q contains itself (%s)", name, strings.Join(append(slices.Clone(path[i:]), name), " → "))}
		}
		if state[name] == done && g.depth >= depth {
			return nil
		}
		if depth > g.depth {
			g.depth = depth
		}
		state[name] = visiting
		path = append(path, name)
		for _, c := range uniqSorted(g.Children) {
			if err := visit(c, depth+1); err != nil {
				return err
			}
		}
		path = path[:len(path)-1]
		state[name] = done
		return nil
	}
	return visit("all", 0)
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "an alias"
}

// posErr reports FILE:LINE: MSG (the inventory's errors carry the line
// only; the node may be nil for errors about the whole file).
func posErr(file string, n *yaml.Node, format string, args ...any) error {
	e := &expr.PosError{File: file, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line = n.Line
	}
	return e
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func uniqSorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return slices.Compact(s)
}

func parseInt(v any) (int, error) {
	switch t := v.(type) {
	case int:
		return t, nil
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(t))
		if err == nil {
			return n, nil
		}
	}
	return 0, fmt.Errorf("expected an integer, got %s", show(v))
}

func show(v any) string {
	switch t := v.(type) {
	case string:
		return strconv.Quote(t)
	case map[string]any, map[any]any:
		return "a mapping"
	case []any:
		return "a list"
	case nil:
		return "nothing"
	}
	return fmt.Sprint(v)
}
