package expr

import (
	"reflect"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// SetValue binds name to a cty value as it is: validate binds unknown
// values of the types a host would give (see UnknownOf).
func (s *Scope) SetValue(name string, v cty.Value) { s.vars[name] = v }

// Check evaluates v without requiring a value: the way validate checks an
// expression against a scope of unknown values of known types. Unknown
// functions, names and attributes and type errors are reported at
// file:line:col; a result that stays unknown (it needs a host) is fine.
func (s *Scope) Check(v Value) error {
	if v.expr == nil {
		return nil
	}
	_, err := s.evalExpr(v)
	return err
}

// CheckAll calls Check on every Value reachable from x (a pointer to a
// params struct) and returns the first error, in field order.
func (s *Scope) CheckAll(x any) error {
	var first error
	walkValues(reflect.ValueOf(x), 0, func(v Value) {
		if first == nil {
			first = s.Check(v)
		}
	})
	return first
}

// CheckAttrs reports, at the name in the file, the first attribute of
// root that v uses and has refuses; why says what is wrong with it.
func (v Value) CheckAttrs(root string, has func(string) bool, why func(name string) string) error {
	if v.expr == nil {
		return nil
	}
	for _, tr := range v.expr.Variables() {
		if tr.RootName() != root || len(tr) < 2 {
			continue
		}
		var name string
		var off int
		switch step := tr[1].(type) {
		case hcl.TraverseAttr:
			name, off = step.Name, step.SrcRange.Start.Byte+1 // past the dot
		case hcl.TraverseIndex:
			if step.Key.Type() != cty.String || !step.Key.IsKnown() {
				continue
			}
			name, off = step.Key.AsString(), step.SrcRange.Start.Byte
		default:
			continue
		}
		if !has(name) {
			return v.nameErr(off, "%s", why(name))
		}
	}
	return nil
}

// CheckAllAttrs calls CheckAttrs on every Value reachable from x.
func CheckAllAttrs(x any, root string, has func(string) bool, why func(string) string) error {
	var first error
	walkValues(reflect.ValueOf(x), 0, func(v Value) {
		if first == nil {
			first = v.CheckAttrs(root, has, why)
		}
	})
	return first
}

// UnknownOf returns an unknown value of the type expressions would see x
// by (after its JSON form, as the runner binds facts and outputs):
// numbers, strings and bools keep their type; a struct (or a pointer to
// one) is an object of its JSON field names; anything else (maps, slices,
// nil, pointers that may be null) is of any type. A string field tagged
// `expr:"text"` is known not to be a number: it is bound to a sample
// non-numeric string so that using it as a number is a type error, as it
// is on every host.
func UnknownOf(x any) cty.Value {
	if x == nil {
		return cty.DynamicVal
	}
	return unknownOf(reflect.TypeOf(x), "", true)
}

func unknownOf(t reflect.Type, tag string, top bool) cty.Value {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return cty.UnknownVal(cty.Number)
	case reflect.Bool:
		return cty.UnknownVal(cty.Bool)
	case reflect.String:
		if tag == "text" {
			return cty.StringVal(textSample)
		}
		return cty.UnknownVal(cty.String)
	case reflect.Pointer:
		if top {
			return unknownOf(t.Elem(), tag, true)
		}
	case reflect.Struct:
		if !top {
			break // nested structs may be null or omitted
		}
		attrs := map[string]cty.Value{}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if name, ok := jsonName(f); ok {
				attrs[name] = unknownOf(f.Type, f.Tag.Get("expr"), false)
			}
		}
		return cty.ObjectVal(attrs)
	}
	return cty.DynamicVal
}

// textSample stands for a string fact that is never a number.
const textSample = "<text>"

// ObjectOf makes an object value of attrs, for scopes built by hand.
func ObjectOf(attrs map[string]cty.Value) cty.Value {
	if len(attrs) == 0 {
		return cty.EmptyObjectVal
	}
	return cty.ObjectVal(attrs)
}

// UnknownAttrs returns an object of attrs, each an unknown value of the
// type of its sample Go value (nil: any type).
func UnknownAttrs(samples map[string]any) cty.Value {
	attrs := make(map[string]cty.Value, len(samples))
	for k, x := range samples {
		if x == nil {
			attrs[k] = cty.DynamicVal
			continue
		}
		attrs[k] = unknownOf(reflect.TypeOf(x), "", false)
	}
	return ObjectOf(attrs)
}

// CheckAllRoots reports, at the name in the file, the first variable
// reachable from x whose root name refuse objects to (a non-empty reason).
func CheckAllRoots(x any, refuse func(root string) string) error {
	var first error
	walkValues(reflect.ValueOf(x), 0, func(v Value) {
		if first != nil || v.expr == nil {
			return
		}
		for _, tr := range v.expr.Variables() {
			if why := refuse(tr.RootName()); why != "" {
				first = v.nameErr(tr.SourceRange().Start.Byte, "%s", why)
				return
			}
		}
	})
	return first
}
