// Package inventory loads Ansible-style YAML inventories: groups with
// hosts, children and vars, nested to any depth, vars inherited the way
// Ansible merges them, and the connection settings pgtune needs resolved
// and checked for every host.
package inventory

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/internal/mask"
)

// Inventory is a loaded inventory file.
type Inventory struct {
	File   string
	Hosts  []*Host // sorted by name
	Groups map[string]*Group
	// Warnings are said once per run: Ansible settings pgtune ignores.
	Warnings []string

	byName map[string]*Host
	// groupOrder and hostOrder are the order groups were first named and
	// hosts first listed: Ansible's, which a subscript on a glob counts in.
	groupOrder, hostOrder []string
}

// Group is one group as the file defines it (a group defined in several
// places is merged).
type Group struct {
	Name     string
	Hosts    []string // hosts listed directly in the group, sorted
	Children []string // sorted
	Vars     map[string]any

	// listed and kids are Hosts and Children in the order the inventory
	// lists them (Ansible's order, which host subscripts count in).
	listed, kids []string

	parents []string
	// depth is the longest path from "all" (Ansible sorts by it: deeper
	// groups win), priority is ansible_group_priority (default 1).
	depth, priority int
	line            int
	file            string // where the group is first named
}

// Host is one host with everything inherited.
type Host struct {
	Name   string
	Groups []string       // every group it belongs to, incl. "all", sorted
	Vars   map[string]any // merged vars
	Conn   Conn           // connection settings resolved from Vars

	// File and Line are where the host is first listed (Line 0 for the
	// implicit localhost).
	File string
	Line int

	// Unusable holds the vars pgtune cannot evaluate (Jinja templates,
	// vault-encrypted values), each with the error naming where it was
	// written; they are left out of Vars.
	Unusable map[string]error
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

	// ProxyJump and ProxyCommand come from ansible_ssh_common_args and
	// ansible_ssh_extra_args (-o ProxyJump=…, -J …, -o ProxyCommand=…);
	// empty when not set there (the ssh_config may still set them).
	ProxyJump, ProxyCommand string

	PGData, PGBin, PGConfigFile, PGRestart string // pg_data, pg_bin, pg_config_file, pg_restart

	// Password (ansible_password, ansible_ssh_pass) is tried after the
	// keys; BecomePassword (ansible_become_password, ansible_become_pass)
	// answers sudo's prompt. Both are secrets: masked in every output.
	Password, BecomePassword string
}

// Load reads and parses an inventory file.
func Load(path string) (*Inventory, error) {
	return Open(path, Options{})
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

// ConnError is why the host cannot be connected to as the inventory
// says: a connection var (ansible_host, ansible_password, …) pgtune cannot
// use, with where it was written. nil when every one is usable.
func (h *Host) ConnError() error {
	for _, k := range sortedKeys(h.Unusable) {
		if isConnKey(k) {
			return fmt.Errorf("host %q: %w", h.Name, h.Unusable[k])
		}
	}
	return nil
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
	file  string
	line  int
	// inventory marks a group var written in the inventory itself: only
	// there does ansible_group_priority set the priority (and is no var).
	inventory bool
}

// isPriority reports an ansible_group_priority that Ansible keeps as the
// group's priority rather than as a var.
func (d varDef) isPriority() bool { return d.inventory && d.key == "ansible_group_priority" }

// errAt reports a problem with this definition at FILE:LINE.
func (d varDef) errAt(format string, args ...any) error {
	return &expr.PosError{File: d.file, Line: d.line, Msg: fmt.Sprintf(format, args...)}
}

type parser struct {
	file   string
	dir    string
	groups map[string]*Group
	// group and host vars in document order; later definitions win.
	groupVars map[string][]varDef
	hostVars  map[string][]varDef
	hostLine  map[string]int
	hostFile  map[string]string
	hostOrder []string
	inGroup   map[string]map[string]bool
	// groupOrder is the order groups were first named in.
	groupOrder []string

	// Vars from group_vars/ and host_vars/ beside the inventory sources
	// (index 0) and beside the playbook (index 1).
	dirGroupVars [2]map[string][]varDef
	dirHostVars  [2]map[string][]varDef
	warnings     []string
	defaults     ConnDefaults
}

// Parse parses inventory YAML; file names it in errors and anchors
// relative ssh_config_file paths.
func Parse(file string, data []byte) (*Inventory, error) {
	p := newParser()
	if err := p.parseSource(file, data); err != nil {
		return nil, err
	}
	if len(p.hostOrder) == 0 {
		return nil, &expr.PosError{File: file, Line: 1, Msg: "inventory has no hosts"}
	}
	return p.build(file)
}

func newParser() *parser {
	p := &parser{
		groups:    map[string]*Group{},
		groupVars: map[string][]varDef{},
		hostVars:  map[string][]varDef{},
		hostLine:  map[string]int{},
		hostFile:  map[string]string{},
		inGroup:   map[string]map[string]bool{},
	}
	for i := range p.dirGroupVars {
		p.dirGroupVars[i] = map[string][]varDef{}
		p.dirHostVars[i] = map[string][]varDef{}
	}
	p.group("all", 0)
	return p
}

// parseSource reads one inventory file in whichever format it is written:
// ansible-inventory --list JSON, INI, or YAML.
func (p *parser) parseSource(file string, data []byte) error {
	p.file, p.dir = file, filepath.Dir(file)
	switch sourceFormat(file, data) {
	case formatJSON:
		return p.parseScriptJSON(data)
	case formatINI:
		return p.parseINI(data)
	}
	return p.parseYAML(data)
}

func (p *parser) parseYAML(data []byte) error {
	file := p.file
	root, err := expr.ParseYAML(file, data)
	if err != nil {
		return err
	}
	if root == nil {
		return &expr.PosError{File: file, Msg: "inventory is empty (expected a mapping such as all: {hosts: {...}})"}
	}
	if root.Kind != yaml.MappingNode {
		return posErr(file, root, "an inventory is a mapping of groups (all:, or group names), not %s", describe(root))
	}
	before := len(p.hostOrder)
	pairs, err := p.pairs(root)
	if err != nil {
		return err
	}
	for _, kv := range pairs {
		name, err := p.name(kv[0], "group")
		if err != nil {
			return err
		}
		parent := "all"
		if name == "all" {
			parent = ""
		}
		if err := p.parseGroup(name, parent, kv[0], kv[1]); err != nil {
			return err
		}
	}
	if len(p.hostOrder) == before {
		return &expr.PosError{File: file, Line: root.Line, Msg: "inventory has no hosts"}
	}
	return nil
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
		g = &Group{Name: name, Vars: map[string]any{}, priority: 1, line: line, file: p.file}
		p.groups[name] = g
		p.groupOrder = append(p.groupOrder, name)
	}
	return g
}

func (p *parser) parseGroup(name, parent string, key, n *yaml.Node) error {
	p.group(name, key.Line)
	if parent != "" {
		p.link(parent, name)
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
				return posErr(p.file, v, "host %q must be followed by a mapping of its vars or nothing, not %s", pattern, describe(v, pattern))
			}
			if defs, err = p.vars(v, fmt.Sprintf("vars of host %q", pattern)); err != nil {
				return err
			}
		}
		if port != "" {
			// host:port is Ansible's shorthand for ansible_port.
			d, err := p.checkDef(varDef{key: "ansible_port", value: portValue(port), file: p.file, line: kv[0].Line})
			if err != nil {
				return err
			}
			defs = append([]varDef{d}, defs...)
		}
		for _, name := range names {
			if err := p.addHost(group, name, kv[0].Line, defs); err != nil {
				return err
			}
		}
	}
	return nil
}

// addHost puts a host (already expanded) in a group with its vars.
func (p *parser) addHost(group, name string, line int, defs []varDef) error {
	if err := checkText("host name", name); err != nil {
		return &expr.PosError{File: p.file, Line: line, Msg: err.Error()}
	}
	if strings.HasPrefix(name, "!") || strings.HasPrefix(name, "&") || strings.Contains(name, ",") {
		// --limit and hosts: patterns read these as operators.
		return &expr.PosError{File: p.file, Line: line, Msg: fmt.Sprintf("host name %q cannot start with ! or & or contain a comma", name)}
	}
	if _, ok := p.hostLine[name]; !ok {
		p.hostLine[name] = line
		p.hostFile[name] = p.file
		p.hostOrder = append(p.hostOrder, name)
	}
	if !p.inGroup[group][name] {
		if p.inGroup[group] == nil {
			p.inGroup[group] = map[string]bool{}
		}
		p.inGroup[group][name] = true
		g := p.groups[group]
		g.Hosts = append(g.Hosts, name)
	}
	p.hostVars[name] = append(p.hostVars[name], defs...)
	return nil
}

// link makes child a child group of parent.
func (p *parser) link(parent, child string) {
	g := p.groups[child]
	if slices.Contains(g.parents, parent) {
		return
	}
	g.parents = append(g.parents, parent)
	pg := p.groups[parent]
	pg.Children = append(pg.Children, child)
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
	n = deref(n)
	if n.Tag == "!vault" {
		return p.checkDef(varDef{key: key, value: vaultValue{}, file: p.file, line: n.Line})
	}
	yaml11Bools(n)
	var v any
	if err := n.Decode(&v); err != nil {
		return varDef{}, posErr(p.file, n, "%s: %v", key, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	return p.checkDef(varDef{key: key, value: v, file: p.file, line: n.Line})
}

// yaml11Bools types the unquoted yes/no/on/off of n (nested values too)
// as booleans, as Ansible's YAML 1.1 loader does: `second_file: yes` is
// true there, and a string "yes" in YAML 1.2 (ansible-inventory --list
// shows true; an expression's condition needs a bool).
func yaml11Bools(n *yaml.Node) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Style != 0 || n.ShortTag() != "!!str" {
			return
		}
		switch n.Value {
		case "yes", "Yes", "YES", "on", "On", "ON":
			n.Tag, n.Value = "!!bool", "true"
		case "no", "No", "NO", "off", "Off", "OFF":
			n.Tag, n.Value = "!!bool", "false"
		}
	case yaml.MappingNode:
		for i := 1; i < len(n.Content); i += 2 {
			yaml11Bools(n.Content[i])
		}
	case yaml.SequenceNode:
		for _, c := range n.Content {
			yaml11Bools(c)
		}
	}
}

// checkDef checks a connection setting where it is written.
func (p *parser) checkDef(d varDef) (varDef, error) {
	// A Jinja or vault value fails where it is used (the host's
	// connection, an expression), not the whole inventory: see
	// Host.Unusable and Host.ConnError.
	if err := unusable(d); err != nil {
		if d.key == "ansible_group_priority" {
			return varDef{}, err
		}
		return d, nil
	}
	if f, ok := connKeys[d.key]; ok {
		if _, err := f.parse(d.value); err != nil {
			return varDef{}, d.errAt("%s: %v", d.key, err)
		}
	}
	if d.key == "ansible_group_priority" {
		if _, err := parseInt(d.value); err != nil {
			return varDef{}, d.errAt("%s: %v", d.key, err)
		}
	}
	return d, nil
}

// build links groups, orders them as Ansible does and merges vars.
func (p *parser) build(name string) (*Inventory, error) {
	// A group no other group claims is a child of all, as in Ansible
	// (in the order groups were first named: all's host order).
	for _, gname := range p.groupOrder {
		if gname != "all" && len(p.groups[gname].parents) == 0 {
			p.link("all", gname)
		}
	}
	if err := p.depths(); err != nil {
		return nil, err
	}
	inv := &Inventory{File: name, Groups: p.groups, byName: map[string]*Host{},
		groupOrder: p.groupOrder, hostOrder: p.hostOrder}
	for gname, defs := range p.groupVars {
		for i, d := range defs {
			defs[i].inventory = true
			if d.key == "ansible_group_priority" {
				// Only the inventory sets it (not group_vars/), as in Ansible.
				p.groups[gname].priority, _ = parseInt(d.value)
			}
		}
	}
	member := p.membership()
	for _, g := range p.groups {
		g.listed = slices.Clone(g.Hosts)
		g.kids = slices.Clone(g.Children)
		if g.Name == "all" {
			// Ansible makes ungrouped all's first child.
			if i := slices.Index(g.kids, "ungrouped"); i > 0 {
				g.kids = append([]string{"ungrouped"}, slices.Delete(g.kids, i, i+1)...)
			}
		}
		sort.Strings(g.Hosts)
		g.Children = uniqSorted(g.Children)
		for _, l := range [][]varDef{p.groupVars[g.Name], p.dirGroupVars[0][g.Name], p.dirGroupVars[1][g.Name]} {
			for _, d := range l {
				if unusable(d) == nil && !d.isPriority() {
					g.Vars[d.key] = d.value
				}
			}
		}
	}
	unknown := map[string][]string{} // ansible_* var → hosts
	var defs []varDef                // every var as written, for typoWarnings
	for _, hname := range p.hostOrder {
		h := &Host{Name: hname, Vars: map[string]any{}, Line: p.hostLine[hname], File: p.hostFile[hname]}
		for g := range member[hname] {
			h.Groups = append(h.Groups, g)
		}
		sort.Strings(h.Groups)
		levels := p.levels(h)
		conn, err := resolve(hname, levels, p.defaults)
		if err != nil {
			var pe *expr.PosError
			if errors.As(err, &pe) {
				return nil, err
			}
			return nil, &expr.PosError{File: h.File, Line: h.Line, Msg: fmt.Sprintf("host %q: %v", hname, err)}
		}
		for _, l := range levels {
			defs = append(defs, l...)
			for _, d := range l {
				if err := unusable(d); err != nil {
					if h.Unusable == nil {
						h.Unusable = map[string]error{}
					}
					h.Unusable[d.key] = err
					delete(h.Vars, d.key)
					continue
				}
				delete(h.Unusable, d.key)
				if !d.isPriority() {
					h.Vars[d.key] = d.value
				}
			}
		}
		for k := range h.Vars {
			if strings.HasPrefix(k, "ansible_") && !knownAnsibleVar(k) {
				unknown[k] = append(unknown[k], hname)
			}
		}
		h.Conn = conn
		inv.byName[hname] = h
		inv.Hosts = append(inv.Hosts, h)
	}
	sort.Slice(inv.Hosts, func(i, j int) bool { return inv.Hosts[i].Name < inv.Hosts[j].Name })
	inv.Warnings = append(p.warnings, unknownVarsWarning(unknown)...)
	inv.Warnings = append(inv.Warnings, typoWarnings(defs)...)
	return inv, nil
}

// membership returns every host's groups, direct and inherited, and puts
// hosts that are in no group but all in "ungrouped" (and takes hosts that
// are in another group out of it), as Ansible does.
func (p *parser) membership() map[string]map[string]bool {
	member := map[string]map[string]bool{}
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
	for _, gname := range sortedKeys(p.groups) {
		for _, h := range p.groups[gname].Hosts {
			walkUp(h, gname)
		}
	}
	grouped := map[string]bool{} // listed as ungrouped, but in a group too
	for _, h := range p.hostOrder {
		switch {
		case len(member[h]) == 1:
			ug := p.groups["ungrouped"]
			if ug == nil {
				ug = p.group("ungrouped", 0)
				p.link("all", "ungrouped")
				ug.depth = 1
			}
			ug.Hosts = append(ug.Hosts, h)
			member[h]["ungrouped"] = true
		case member[h]["ungrouped"] && len(member[h]) > 2:
			grouped[h] = true
			delete(member[h], "ungrouped")
		}
	}
	if len(grouped) > 0 {
		ug := p.groups["ungrouped"]
		ug.Hosts = slices.DeleteFunc(ug.Hosts, func(n string) bool { return grouped[n] })
	}
	return member
}

// levels lists a host's var definitions, least specific first, in
// Ansible's order: the inventory's group vars (all, then groups by depth,
// priority and name), group_vars/all beside the inventory then beside the
// playbook, group_vars/GROUP beside the inventory then the playbook, the
// inventory's host vars, host_vars/HOST beside the inventory then the
// playbook.
func (p *parser) levels(h *Host) [][]varDef {
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
	levels = append(levels, p.dirGroupVars[0]["all"], p.dirGroupVars[1]["all"])
	for src := range p.dirGroupVars {
		for _, g := range order {
			if g != "all" {
				levels = append(levels, p.dirGroupVars[src][g])
			}
		}
	}
	return append(levels, p.hostVars[h.Name], p.dirHostVars[0][h.Name], p.dirHostVars[1][h.Name])
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
			return &expr.PosError{File: g.file, Line: g.line,
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
	if err := visit("all", 0); err != nil {
		return err
	}
	// Every group has a parent by now, so one that "all" does not reach
	// is in a loop of children (INI [a:children] b, [b:children] a).
	for _, name := range sortedKeys(p.groups) {
		if state[name] != done {
			if err := visit(name, 1); err != nil {
				return err
			}
		}
	}
	return nil
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe names what n is, for an error; a scalar by its text, unless
// that text or the key it was found under (keys) names a secret: a
// misplaced value may be a password (ansible_become_password indented
// one level too little reads as a host with a scalar).
func describe(n *yaml.Node, keys ...string) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		secret := namesSecret(n.Value)
		for _, k := range keys {
			secret = secret || namesSecret(k)
		}
		if !secret {
			return strconv.Quote(n.Value)
		}
		switch n.ShortTag() {
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		}
		return "a string"
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

// namesSecret reports whether any word of s (letters, digits, _ and -)
// is a name mask.SensitiveName says holds a secret.
func namesSecret(s string) bool {
	for _, w := range strings.FieldsFunc(s, func(r rune) bool {
		return !(r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r))
	}) {
		if mask.SensitiveName(w) {
			return true
		}
	}
	return false
}
