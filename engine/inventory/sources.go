package inventory

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pgtune/pgtune/engine/expr"
)

// Options are what Open needs besides the source.
type Options struct {
	// PlaybookDir is the directory of the playbook in use: its
	// group_vars/ and host_vars/ apply too, over the inventory's.
	PlaybookDir string
	// Defaults apply where no inventory var sets the setting (ansible.cfg).
	Defaults ConnDefaults
}

// Open loads an inventory source as Ansible's -i takes it: a file (YAML,
// INI or ansible-inventory --list JSON), a directory of such files, or a
// comma-separated host list ("db1,db2,"). group_vars/ and host_vars/
// beside the source and beside the playbook are merged in.
func Open(source string, o Options) (*Inventory, error) {
	p := newParser()
	p.defaults = o.Defaults
	var bases []string
	fi, statErr := os.Stat(source)
	switch {
	case statErr == nil && fi.IsDir():
		if err := p.parseDir(source); err != nil {
			return nil, err
		}
		bases = append(bases, source)
	case statErr == nil:
		if err := p.parseFile(source); err != nil {
			return nil, err
		}
		bases = append(bases, filepath.Dir(source))
	case strings.Contains(source, ","):
		if err := p.parseHostList(source); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("inventory: %w", statErr)
	}
	if len(p.hostOrder) == 0 {
		return nil, &expr.PosError{File: source, Msg: "inventory has no hosts"}
	}
	for _, b := range bases {
		if err := p.loadVarsDirs(b, 0); err != nil {
			return nil, err
		}
	}
	if o.PlaybookDir != "" {
		if err := p.loadVarsDirs(o.PlaybookDir, 1); err != nil {
			return nil, err
		}
	}
	return p.build(source)
}

func (p *parser) parseFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	if bytes.HasPrefix(data, []byte("#!")) {
		return &expr.PosError{File: path, Line: 1, Msg: "this is an inventory script; pgtune does not run scripts: save what it prints " +
			"(" + path + " --list > inventory.json) and give pgtune that file"}
	}
	return p.parseSource(path, data)
}

// ignoredInDir are what Ansible skips in an inventory directory: hidden
// files, the vars directories and the extensions of its
// INVENTORY_IGNORE_EXTS default.
var ignoredExts = []string{".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst", ".orig", ".ini", ".cfg", ".retry"}

func ignoredInDir(name string) bool {
	switch {
	case strings.HasPrefix(name, "."), name == "group_vars", name == "host_vars", name == "vars_plugins":
		return true
	}
	for _, ext := range ignoredExts {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// parseDir reads every source in a directory, in name order, as Ansible
// does.
func (p *parser) parseDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	for _, e := range entries { // sorted by name
		if ignoredInDir(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if e.IsDir() {
			err = p.parseDir(path)
		} else {
			err = p.parseFile(path)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parseHostList reads "host1,host2:2222," (Ansible's host_list source):
// every host ungrouped.
func (p *parser) parseHostList(s string) error {
	p.file, p.dir = s, "."
	p.group("ungrouped", 0)
	for _, h := range strings.Split(s, ",") {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		names, port := []string{h}, ""
		if _, _, bracketed, _ := bracketedHost(h); bracketed || !strings.ContainsAny(h, "[]") {
			var err error
			if names, port, err = expandHost(h); err != nil {
				return &expr.PosError{File: s, Msg: fmt.Sprintf("host %q: %v", h, err)}
			}
		}
		var defs []varDef
		if port != "" {
			d, err := p.checkDef(varDef{key: "ansible_port", value: portValue(port), file: s})
			if err != nil {
				return err
			}
			defs = append(defs, d)
		}
		for _, n := range names {
			if err := p.addHost("ungrouped", n, 0, defs); err != nil {
				return err
			}
		}
	}
	return nil
}

const (
	formatYAML = iota
	formatINI
	formatJSON
)

// sourceFormat tells which of Ansible's formats a file is written in.
// Files named .yml, .yaml or .json are YAML (Ansible's yaml plugin), unless
// they start with an INI header or are ansible-inventory --list output;
// other files are INI unless they hold a YAML mapping.
func sourceFormat(file string, data []byte) int {
	if isScriptJSON(data) {
		return formatJSON
	}
	if iniSection(data) > 0 {
		return formatINI
	}
	switch strings.ToLower(filepath.Ext(file)) {
	case ".yml", ".yaml", ".json":
		return formatYAML
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil || len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return formatINI
	}
	return formatYAML
}

// isScriptJSON reports whether data is what ansible-inventory --list (or
// an inventory script) prints: a _meta key, or groups whose hosts are
// lists (a YAML inventory written as JSON has mappings there).
func isScriptJSON(data []byte) bool {
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return false
	}
	if _, ok := top["_meta"]; ok {
		return true
	}
	for _, raw := range top {
		if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
			return true
		}
		var g map[string]json.RawMessage
		if json.Unmarshal(raw, &g) == nil {
			for _, k := range []string{"hosts", "children"} {
				if t := bytes.TrimSpace(g[k]); len(t) > 0 && t[0] == '[' {
					return true
				}
			}
		}
	}
	return false
}

// iniSection returns the line of a leading "[group]" header (a trailing
// comment allowed): a YAML inventory never starts with a flow list.
func iniSection(data []byte) int {
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";") {
			continue
		}
		if iniHeader.MatchString(line) {
			return i + 1
		}
		return 0
	}
	return 0
}

// parseScriptJSON reads ansible-inventory --list output: groups with
// hosts, children and vars lists, host vars under _meta.hostvars. It is
// read as YAML (JSON is YAML) to keep line numbers for messages.
func (p *parser) parseScriptJSON(data []byte) error {
	root, err := expr.ParseYAML(p.file, data)
	if err != nil {
		return err
	}
	if root == nil || root.Kind != yaml.MappingNode {
		return posErr(p.file, root, "expected a JSON object of groups")
	}
	var hostvars *yaml.Node
	before := len(p.hostOrder)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value == "_meta" {
			if v.Kind == yaml.MappingNode {
				for j := 0; j+1 < len(v.Content); j += 2 {
					if v.Content[j].Value == "hostvars" {
						hostvars = v.Content[j+1]
					}
				}
			}
			continue
		}
		if err := p.jsonGroup(k, v); err != nil {
			return err
		}
	}
	if hostvars != nil && !isNull(hostvars) {
		if hostvars.Kind != yaml.MappingNode {
			return posErr(p.file, hostvars, "_meta.hostvars must be an object of hosts, not %s", describe(hostvars))
		}
		for j := 0; j+1 < len(hostvars.Content); j += 2 {
			name := hostvars.Content[j].Value
			if _, listed := p.hostLine[name]; !listed {
				continue // Ansible only takes vars of hosts a group lists
			}
			defs, err := p.vars(hostvars.Content[j+1], fmt.Sprintf("hostvars of %q", name))
			if err != nil {
				return err
			}
			p.hostVars[name] = append(p.hostVars[name], defs...)
		}
	}
	if len(p.hostOrder) == before {
		return &expr.PosError{File: p.file, Line: root.Line, Msg: "inventory has no hosts"}
	}
	return nil
}

func (p *parser) jsonGroup(k, v *yaml.Node) error {
	name, err := p.name(k, "group")
	if err != nil {
		return err
	}
	p.group(name, k.Line)
	hostsNode, childNode, varsNode := v, (*yaml.Node)(nil), (*yaml.Node)(nil)
	switch v.Kind {
	case yaml.SequenceNode:
	case yaml.MappingNode:
		hostsNode = nil
		for i := 0; i+1 < len(v.Content); i += 2 {
			switch v.Content[i].Value {
			case "hosts":
				hostsNode = v.Content[i+1]
			case "children":
				childNode = v.Content[i+1]
			case "vars":
				varsNode = v.Content[i+1]
			}
		}
	default:
		return posErr(p.file, v, "group %q must be a list of hosts or an object with hosts, children and vars, not %s", name, describe(v))
	}
	for _, list := range []*yaml.Node{hostsNode, childNode} {
		if list != nil && !isNull(list) && list.Kind != yaml.SequenceNode {
			return posErr(p.file, list, "group %q: expected a list of names, not %s", name, describe(list))
		}
	}
	if hostsNode != nil {
		for _, h := range hostsNode.Content {
			hn, err := p.name(h, "host")
			if err != nil {
				return err
			}
			if err := p.addHost(name, hn, h.Line, nil); err != nil {
				return err
			}
		}
	}
	if childNode != nil {
		for _, c := range childNode.Content {
			cn, err := p.name(c, "group")
			if err != nil {
				return err
			}
			if cn == "all" {
				return posErr(p.file, c, `group "all" cannot be a child of %q`, name)
			}
			p.group(cn, c.Line)
			p.link(name, cn)
		}
	}
	if varsNode != nil {
		defs, err := p.vars(varsNode, fmt.Sprintf("vars of group %q", name))
		if err != nil {
			return err
		}
		p.groupVars[name] = append(p.groupVars[name], defs...)
	}
	return nil
}

// varsExts are the names Ansible tries for group_vars/NAME and
// host_vars/NAME, in its order.
var varsExts = []string{".yml", ".yaml", ".json", ""}

// loadVarsDirs reads BASE/group_vars/GROUP and BASE/host_vars/HOST for the
// inventory's groups and hosts; src 0 is beside the inventory, 1 beside
// the playbook.
func (p *parser) loadVarsDirs(base string, src int) error {
	for _, g := range sortedKeys(p.groups) {
		defs, err := p.varsFiles(filepath.Join(base, "group_vars"), g)
		if err != nil {
			return err
		}
		p.dirGroupVars[src][g] = append(p.dirGroupVars[src][g], defs...)
	}
	for _, h := range p.hostOrder {
		defs, err := p.varsFiles(filepath.Join(base, "host_vars"), h)
		if err != nil {
			return err
		}
		p.dirHostVars[src][h] = append(p.dirHostVars[src][h], defs...)
	}
	return nil
}

// varsFiles reads DIR/NAME.yml, .yaml, .json and DIR/NAME, each a file or
// a directory of such files (read in name order, later files win).
func (p *parser) varsFiles(dir, name string) ([]varDef, error) {
	var files []string
	for _, ext := range varsExts {
		path := filepath.Join(dir, name+ext)
		fi, err := os.Stat(path)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, fmt.Errorf("inventory: %w", err)
		}
		if !fi.IsDir() {
			files = append(files, path)
			continue
		}
		sub, err := varsDirFiles(path)
		if err != nil {
			return nil, err
		}
		files = append(files, sub...)
	}
	var out []varDef
	for _, f := range files {
		defs, err := p.varsFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, defs...)
	}
	return out, nil
}

// varsDirFiles lists a vars directory's files as Ansible reads them:
// recursively, in name order, skipping hidden and backup files and
// extensions other than .yml, .yaml, .json or none.
func varsDirFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || strings.HasSuffix(n, "~") {
			continue
		}
		path := filepath.Join(dir, n)
		if e.IsDir() {
			sub, err := varsDirFiles(path)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
			continue
		}
		if ext := filepath.Ext(n); ext == "" || slices.Contains(varsExts, ext) {
			out = append(out, path)
		}
	}
	return out, nil
}

// varsFile reads one vars file: a YAML (or JSON) mapping of vars.
func (p *parser) varsFile(path string) ([]varDef, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	saved := p.file
	defer func() { p.file = saved }()
	p.file = path
	root, err := expr.ParseYAML(path, data)
	if err != nil || root == nil {
		return nil, err
	}
	return p.vars(root, "a vars file")
}

// portValue is the :PORT of host:PORT as the number it is.
func portValue(s string) any {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return s
}
