package playbook

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pgtune/pgtune/engine/expr"
)

// entry is one node of the document with the path leading to it: the
// play index, then mapping keys, with "[i]" for list elements.
type entry struct {
	node *yaml.Node
	key  *yaml.Node // the mapping key, nil for list elements and plays
	path []string
}

// index lists every mapping value and list element of the document.
// yaml.TypeError only gives a line, so errors are matched back to nodes
// here to get the column and what the value belongs to.
func index(data []byte) []entry {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) == 0 {
		return nil
	}
	var out []entry
	seen := map[*yaml.Node]bool{}
	var walk func(n *yaml.Node, path []string)
	walk = func(n *yaml.Node, path []string) {
		if seen[n] {
			return
		}
		seen[n] = true
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := append(append([]string(nil), path...), k.Value)
				out = append(out, entry{node: v, key: k, path: p})
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := append(append([]string(nil), path...), fmt.Sprintf("[%d]", i))
				out = append(out, entry{node: c, path: p})
				walk(c, p)
			}
		}
	}
	walk(doc.Content[0], nil)
	return out
}

var (
	reLine     = regexp.MustCompile(`^line (\d+): (.*)$`)
	reNotFound = regexp.MustCompile("^field (.*) not found in type ")
	reCannot   = regexp.MustCompile("^cannot unmarshal (!!\\w+|[^ ]+)(?: `(.*)`)? into (.*)$")
)

// typeError turns one yaml.TypeError line into a positioned message.
// Problems at the play or policy level were reported by the shape check.
func (l *loader) typeError(idx []entry, policyT reflect.Type, msg string) *expr.PosError {
	m := reLine.FindStringSubmatch(msg)
	if m == nil {
		return &expr.PosError{File: l.file, Msg: msg}
	}
	line, _ := strconv.Atoi(m[1])
	body := m[2]
	if f := reNotFound.FindStringSubmatch(body); f != nil {
		for _, e := range idx {
			if e.key != nil && e.key.Line == line && e.key.Value == f[1] {
				mod, sub, ok := inModule(e.path)
				if !ok || len(sub) == 0 {
					return nil // a play key or a module name: the shape check reports it
				}
				where := mod
				if len(sub) > 1 {
					where += "." + joinPath(sub[:len(sub)-1])
				}
				return l.errAt(e.key, "unknown key %q in %s", f[1], where)
			}
		}
		return &expr.PosError{File: l.file, Line: line, Msg: fmt.Sprintf("unknown key %q", f[1])}
	}
	if c := reCannot.FindStringSubmatch(body); c != nil {
		tag, val, into := c[1], c[2], c[3]
		// Several nodes may start on the line (a block mapping starts at
		// its first key): prefer the one whose Go type is the one named,
		// else the innermost.
		var best *entry
		var bestType reflect.Type
		for i := range idx {
			e := &idx[i]
			n := e.node
			if n.Line != line || n.ShortTag() != tag || (n.Kind == yaml.ScalarNode && truncated(n.Value) != val) {
				continue
			}
			mod, sub, ok := inModule(e.path)
			if !ok {
				continue
			}
			t := typeAt(policyT, l.modules, mod, sub)
			exact := t != nil && derefType(t).String() == into
			if best == nil || exact || !(bestType != nil && derefType(bestType).String() == into) {
				best, bestType = e, t
			}
			if exact {
				break
			}
		}
		if best == nil {
			return nil // at the play or policy level: reported by the shape check
		}
		mod, sub, _ := inModule(best.path)
		want := into
		if bestType != nil {
			want = describeType(bestType)
		}
		what := mod
		if len(sub) > 0 {
			what = fmt.Sprintf("key %q in %s", joinPath(sub), mod)
		}
		return l.errAt(best.node, "%s: expected %s, got %s", what, want, describeNode(best.node))
	}
	return &expr.PosError{File: l.file, Line: line, Msg: body}
}

// truncated is how yaml.v3 abbreviates a value in its messages.
func truncated(v string) string {
	if len(v) > 10 {
		return v[:7] + "..."
	}
	return v
}

// inModule splits a path [play, "policy", module, sub...].
func inModule(path []string) (mod string, sub []string, ok bool) {
	if len(path) < 3 || path[1] != "policy" {
		return "", nil, false
	}
	return path[2], path[3:], true
}

func joinPath(p []string) string {
	var b strings.Builder
	for i, s := range p {
		if i > 0 && !strings.HasPrefix(s, "[") {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

// exprError completes an error from a ${...} value: file, exact position,
// and which key it belongs to (the scalar starting last before it).
func (l *loader) exprError(idx []entry, err error) *expr.PosError {
	var pe *expr.PosError
	errors.As(expr.Locate(err, l.file, l.data), &pe)
	var best *entry
	for i := range idx {
		e := &idx[i]
		n := e.node
		if n.Kind != yaml.ScalarNode || n.Line > pe.Line || (n.Line == pe.Line && n.Column > pe.Column) {
			continue
		}
		if best == nil || n.Line > best.node.Line || (n.Line == best.node.Line && n.Column > best.node.Column) {
			best = e
		}
	}
	if best != nil {
		if mod, sub, ok := inModule(best.path); ok && len(sub) > 0 {
			out := *pe
			out.Msg = fmt.Sprintf("key %q in %s: %s", joinPath(sub), mod, pe.Msg)
			return &out
		}
	}
	return pe
}

var valueType = reflect.TypeOf(expr.Value{})

// typeAt follows a path of yaml keys through the params type of mod.
func typeAt(policyT reflect.Type, modules []string, mod string, sub []string) reflect.Type {
	var t reflect.Type
	for i, name := range modules {
		if name == mod {
			t = policyT.Field(i).Type
		}
	}
	for _, k := range sub {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == nil {
			return nil
		}
		switch {
		case strings.HasPrefix(k, "["):
			if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
				return nil
			}
			t = t.Elem()
		case t.Kind() == reflect.Map:
			t = t.Elem()
		case t.Kind() == reflect.Struct:
			t = fieldType(t, k)
		default:
			return nil
		}
	}
	return t
}

// fieldType finds the field yaml decodes key into, following ",inline".
func fieldType(t reflect.Type, key string) reflect.Type {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if r := fieldType(ft, key); r != nil {
					return r
				}
			}
			continue
		}
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		if name == key {
			return f.Type
		}
	}
	return nil
}

func derefType(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == valueType {
		return "a value or a ${...} expression"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return t.String()
}
