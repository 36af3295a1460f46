package expr

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Static reports whether v can be evaluated without a host: a plain
// scalar, or an expression over the unit constants only (`${-2 * GiB}`).
// Such values are checked by a module's Validate, before any host is
// contacted.
func (v Value) Static() bool {
	if !v.set {
		return false
	}
	if v.expr == nil {
		return true
	}
	for _, tr := range v.expr.Variables() {
		if _, unit := Units[tr.RootName()]; !unit {
			return false
		}
	}
	return true
}

// Schema lists the names expressions may use. Roots maps each top-level
// name (facts, host, vars, a module's outputs) to the attributes it has;
// a nil set means any attribute is allowed (inventory vars, say), and
// nested objects are not checked below their first attribute.
type Schema struct {
	Roots map[string]map[string]bool
}

// NewSchema returns a schema that knows the unit constants.
func NewSchema() *Schema {
	s := &Schema{Roots: map[string]map[string]bool{}}
	for k := range Units {
		s.Roots[k] = map[string]bool{}
	}
	return s
}

// Add declares root with the given attributes; no attributes: any
// attribute is allowed.
func (s *Schema) Add(root string, attrs ...string) {
	if len(attrs) == 0 {
		s.Roots[root] = nil
		return
	}
	set := s.Roots[root]
	if set == nil {
		set = map[string]bool{}
		s.Roots[root] = set
	}
	for _, a := range attrs {
		set[a] = true
	}
}

// JSONNames returns the JSON field names of struct type x (a struct or a
// pointer to one): the names expressions see it by.
func JSONNames(x any) []string {
	t := reflect.TypeOf(x)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if name, ok := jsonName(t.Field(i)); ok {
			out = append(out, name)
		}
	}
	return out
}

// jsonName is the name a struct field has in JSON, and expressions see
// it by; false for a field JSON leaves out.
func jsonName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", false
	}
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	switch name {
	case "-":
		return "", false
	case "":
		name = f.Name
	}
	return name, true
}

// CheckNames reports the first name in v that the schema does not know,
// located at the name in the file, with the names that would be valid.
func (v Value) CheckNames(s *Schema) error {
	if v.expr == nil {
		return nil
	}
	for _, tr := range v.expr.Variables() {
		root := tr.RootName()
		attrs, ok := s.Roots[root]
		if !ok {
			return v.nameErr(tr.SourceRange().Start.Byte, "unknown name %q (known: %s)", root, known(s.Roots))
		}
		if attrs == nil || len(tr) < 2 {
			continue
		}
		attr, ok := tr[1].(hcl.TraverseAttr)
		if !ok || attrs[attr.Name] {
			continue
		}
		// The attribute's range starts at its dot; point at the name.
		return v.nameErr(attr.SrcRange.Start.Byte+1, "unknown name %s.%s (%s has: %s)", root, attr.Name, root, known(attrs))
	}
	return nil
}

func (v Value) nameErr(off int, format string, args ...any) error {
	line, col := v.span.at(v.src, off)
	return &PosError{File: v.file, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

func known[T any](m map[string]T) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// CheckAllNames calls CheckNames on every Value reachable from x (a
// pointer to a params struct) and returns the first error, in field
// order.
func CheckAllNames(x any, s *Schema) error {
	var first error
	walkValues(reflect.ValueOf(x), 0, func(v Value) {
		if first == nil {
			first = v.CheckNames(s)
		}
	})
	return first
}

func walkValues(rv reflect.Value, depth int, fn func(Value)) {
	if !rv.IsValid() || depth > 64 {
		return
	}
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !rv.IsNil() {
			walkValues(rv.Elem(), depth+1, fn)
		}
	case reflect.Struct:
		if rv.Type() == valueType {
			fn(rv.Interface().(Value))
			return
		}
		for i := 0; i < rv.NumField(); i++ {
			if rv.Type().Field(i).IsExported() {
				walkValues(rv.Field(i), depth+1, fn)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < rv.Len(); i++ {
			walkValues(rv.Index(i), depth+1, fn)
		}
	case reflect.Map:
		keys := rv.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
		for _, k := range keys {
			walkValues(rv.MapIndex(k), depth+1, fn)
		}
	}
}
