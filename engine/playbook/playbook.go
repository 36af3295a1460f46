// Package playbook loads playbooks: a YAML list of plays, each naming the
// hosts it targets and a policy whose sections are module parameters.
// Decoding is strict: an unknown key or a value of the wrong type is an
// error naming file, line and column.
package playbook

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pgtune/pgtune/engine/expr"
)

// Registry maps a module name to a function returning a new pointer to
// its params struct, defaults filled in.
type Registry map[string]func() any

// Playbook is a loaded playbook file.
type Playbook struct {
	File  string
	Plays []*Play
	// Rollout is the run's batches and failure budget (rollout.go).
	Rollout Rollout
}

// Play is one play of a playbook.
type Play struct {
	Name  string
	Hosts string // host pattern; a YAML list of patterns is joined with ","
	Line  int    // where the play starts
	// Policy maps each module named in the play's policy to its decoded
	// params (the pointer the registry returned); absent sections are
	// absent.
	Policy map[string]any
	// Sections lists the policy's modules in YAML order (the run order
	// comes from the modules' dependencies, not from this).
	Sections []string
	// Rollout holds the rollout keys this play sets (rollout.go).
	Rollout Rollout
}

// Label names the play in messages: its name, or its position.
func (p *Play) Label(i int) string {
	if p.Name != "" {
		return fmt.Sprintf("play %q", p.Name)
	}
	return fmt.Sprintf("play %d", i+1)
}

var playKeys = append([]string{"hosts", "name", "policy"}, rolloutKeys...)

// Load reads and parses a playbook file.
func Load(path string, reg Registry) (*Playbook, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("playbook: %w", err)
	}
	return Parse(path, data, reg)
}

// Parse parses playbook YAML; file names it in errors. All problems found
// are reported at once, one per line, in file order.
func Parse(file string, data []byte, reg Registry) (*Playbook, error) {
	modules := make([]string, 0, len(reg))
	for name, newParams := range reg {
		if t := reflect.TypeOf(newParams()); t == nil || t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
			return nil, fmt.Errorf("playbook: module %q: params must be a pointer to a struct, got %v", name, t)
		}
		modules = append(modules, name)
	}
	sort.Strings(modules)
	root, err := expr.ParseYAML(file, data)
	if err != nil {
		return nil, err
	}
	l := &loader{file: file, data: data, reg: reg, modules: modules}
	if root == nil {
		return nil, &expr.PosError{File: file, Msg: "playbook is empty (expected a list of plays: - hosts: ... policy: ...)"}
	}
	pb := &Playbook{File: file}
	switch {
	case root.Kind == yaml.MappingNode:
		return nil, l.errAt(root, `a playbook is a list of plays (start each play with "- "), not a mapping`)
	case root.Kind != yaml.SequenceNode:
		return nil, l.errAt(root, "a playbook is a list of plays, not %s", describeNode(root))
	case len(root.Content) == 0:
		return nil, l.errAt(root, "playbook has no plays")
	}
	for i, n := range root.Content {
		pb.Plays = append(pb.Plays, l.play(i, n))
	}
	// The strict pass runs even after shape errors so that one run lists
	// every problem; it skips what the shape check already reported.
	l.strict()
	l.mergeRollout(pb)
	if len(l.errs) == 0 {
		l.params(pb, root)
	}
	if len(l.errs) > 0 {
		return nil, l.err()
	}
	return pb, nil
}

type loader struct {
	file    string
	data    []byte
	reg     Registry
	modules []string
	errs    []*expr.PosError
}

func (l *loader) errAt(n *yaml.Node, format string, args ...any) *expr.PosError {
	return &expr.PosError{File: l.file, Line: n.Line, Column: n.Column, Msg: fmt.Sprintf(format, args...)}
}

func (l *loader) add(n *yaml.Node, format string, args ...any) {
	l.errs = append(l.errs, l.errAt(n, format, args...))
}

// err sorts the problems by position, drops repeats and joins them.
func (l *loader) err() error {
	sort.SliceStable(l.errs, func(i, j int) bool {
		a, b := l.errs[i], l.errs[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	const max = 20
	var out []error
	seen := map[string]bool{}
	for _, e := range l.errs {
		e.Msg = strings.ReplaceAll(e.Msg, "\n", " ") // one problem per line
		if s := e.Error(); !seen[s] && len(out) < max {
			seen[s] = true
			out = append(out, e)
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return errors.Join(out...)
}

// play checks one play's shape: the keys it may have, hosts and policy
// present, policy sections naming known modules.
func (l *loader) play(i int, n *yaml.Node) *Play {
	p := &Play{Line: n.Line, Policy: map[string]any{}}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		l.add(n, "play %d must be a mapping (name:, hosts:, policy:), not %s", i+1, describeNode(n))
		return p
	}
	var hosts, policy *yaml.Node
	for j := 0; j+1 < len(n.Content); j += 2 {
		k, v := n.Content[j], n.Content[j+1]
		if v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		switch k.Value {
		case "name":
			if v.Kind != yaml.ScalarNode {
				l.add(v, `key "name" in play %d: expected a string, got %s`, i+1, describeNode(v))
				continue
			}
			if v.ShortTag() != "!!null" {
				p.Name = v.Value
			}
		case "hosts":
			hosts = v
		case "policy":
			policy = v
		case "<<":
			l.add(k, "merge keys (<<) are not supported in a play")
		case "serial", "max_fail_percentage", "any_errors_fatal", "pause_between_batches":
			l.rolloutKey(p, k, v)
		default:
			l.add(k, "unknown key %q in play (known: %s)", k.Value, strings.Join(playKeys, ", "))
		}
	}
	label := p.Label(i)
	switch {
	case hosts == nil:
		l.add(n, `%s has no hosts: (a group, host or pattern such as "all")`, label)
	case hosts.Kind == yaml.ScalarNode:
		p.Hosts = strings.TrimSpace(hosts.Value)
		if p.Hosts == "" || hosts.ShortTag() == "!!null" {
			p.Hosts = ""
			l.add(hosts, `%s: hosts is empty (a group, host or pattern such as "all")`, label)
		}
	case hosts.Kind == yaml.SequenceNode:
		var pats []string
		for _, e := range hosts.Content {
			if e.Kind == yaml.AliasNode {
				e = e.Alias
			}
			if e.Kind != yaml.ScalarNode || strings.TrimSpace(e.Value) == "" {
				l.add(e, "%s: each entry of hosts must be a host pattern, not %s", label, describeNode(e))
				continue
			}
			pats = append(pats, strings.TrimSpace(e.Value))
		}
		if len(pats) == 0 && len(hosts.Content) == 0 {
			l.add(hosts, "%s: hosts is empty", label)
		}
		p.Hosts = strings.Join(pats, ",")
	default:
		l.add(hosts, "%s: hosts must be a host pattern or a list of them, not %s", label, describeNode(hosts))
	}
	known := strings.Join(l.modules, ", ")
	switch {
	case policy == nil:
		l.add(n, "%s has no policy: (sections: %s)", label, known)
	case policy.Kind == yaml.ScalarNode && policy.ShortTag() == "!!null",
		policy.Kind == yaml.MappingNode && len(policy.Content) == 0:
		l.add(policy, "%s: policy is empty (sections: %s)", label, known)
	case policy.Kind != yaml.MappingNode:
		l.add(policy, "%s: policy must be a mapping of modules (%s), not %s", label, known, describeNode(policy))
	default:
		for j := 0; j+1 < len(policy.Content); j += 2 {
			k := policy.Content[j]
			switch {
			case k.Value == "<<":
				l.add(k, "merge keys (<<) are not supported in a policy")
			case l.reg[k.Value] == nil:
				l.add(k, "unknown module %q (known: %s)", k.Value, known)
			default:
				p.Sections = append(p.Sections, k.Value)
			}
		}
	}
	return p
}

// strict decodes the whole document with unknown keys refused. yaml.v3
// only offers that on a Decoder (Node.Decode has no KnownFields), so the
// document type is built at run time: a list of plays whose policy is a
// struct with one pointer field per registered module.
func (l *loader) strict() {
	fields := make([]reflect.StructField, len(l.modules))
	for i, name := range l.modules {
		fields[i] = reflect.StructField{
			Name: fmt.Sprintf("M%d", i),
			Type: reflect.TypeOf(l.reg[name]()),
			Tag:  reflect.StructTag(fmt.Sprintf(`yaml:%q`, name)),
		}
	}
	policyT := reflect.StructOf(fields)
	playT := reflect.StructOf(append([]reflect.StructField{
		{Name: "Name", Type: reflect.TypeOf(yaml.Node{}), Tag: `yaml:"name"`},
		{Name: "Hosts", Type: reflect.TypeOf(yaml.Node{}), Tag: `yaml:"hosts"`},
		{Name: "Policy", Type: reflect.PointerTo(policyT), Tag: `yaml:"policy"`},
	}, rolloutFields()...))
	doc := reflect.New(reflect.SliceOf(playT))
	dec := yaml.NewDecoder(bytes.NewReader(l.data))
	dec.KnownFields(true)
	err := safeDecode(func() error { return dec.Decode(doc.Interface()) })
	if err == nil {
		return
	}
	idx := index(l.data)
	var te *yaml.TypeError
	var pe *expr.PosError
	switch {
	case errors.As(err, &te):
		for _, msg := range te.Errors {
			if e := l.typeError(idx, policyT, msg); e != nil {
				l.errs = append(l.errs, e)
			}
		}
	case errors.As(err, &pe):
		l.errs = append(l.errs, l.exprError(idx, err))
	default:
		l.errs = append(l.errs, &expr.PosError{File: l.file, Msg: strings.TrimPrefix(err.Error(), "yaml: ")})
	}
}

// params decodes each section into a fresh params value from the
// registry so that keys the section leaves out keep their defaults (the
// strict pass decoded into zero values and only checked).
func (l *loader) params(pb *Playbook, root *yaml.Node) {
	for i, n := range root.Content {
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		play := pb.Plays[i]
		policy := mapValue(n, "policy")
		for _, name := range play.Sections {
			params := l.reg[name]()
			if v := mapValue(policy, name); v != nil && !(v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null") {
				if err := safeDecode(func() error { return v.Decode(params) }); err != nil {
					l.errs = append(l.errs, &expr.PosError{File: l.file, Line: v.Line, Column: v.Column,
						Msg: fmt.Sprintf("%s: %v", name, strings.TrimPrefix(expr.Locate(err, l.file, l.data).Error(), "yaml: "))})
					continue
				}
			}
			expr.BindAll(params, l.file, l.data)
			play.Policy[name] = params
		}
	}
}

// safeDecode turns a panic inside a module's UnmarshalYAML into an error:
// a bad playbook must never crash the tool.
func safeDecode(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cannot decode: %v", r)
		}
	}()
	return f()
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := n.Content[i+1]
			if v.Kind == yaml.AliasNode {
				v = v.Alias
			}
			return v
		}
	}
	return nil
}

func describeNode(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing"
		}
		v := n.Value
		if len(v) > 40 {
			v = v[:37] + "..."
		}
		return fmt.Sprintf("%q", v)
	}
	return "an alias"
}
