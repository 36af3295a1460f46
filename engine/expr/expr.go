// Package expr evaluates the `${...}` expressions that playbook values may
// hold, per host, against facts, inventory vars and the values earlier
// modules plan. Expressions are HCL templates; positions point at the YAML
// line and column the value came from.
package expr

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	"github.com/zclconf/go-cty/cty/gocty"
	"go.yaml.in/yaml/v3"
)

// Value is a policy parameter: a plain YAML scalar, or a string holding
// `${...}` that is evaluated per host.
type Value struct {
	Raw    string
	Line   int
	Column int
	expr   hcl.Expression // set for templates
	lit    cty.Value      // set for plain scalars
	set    bool
}

// Literal makes a Value from a Go constant, for module defaults.
func Literal(x any) Value {
	v, err := toCty(x)
	if err != nil {
		panic(err)
	}
	return Value{Raw: fmt.Sprint(x), lit: v, set: true}
}

// Parse makes a Value from source text as it would appear in YAML, with
// line and column giving its position in file (used in error messages).
func Parse(src, file string, line, column int) (Value, error) {
	v := Value{Raw: src, Line: line, Column: column, set: true}
	if !strings.Contains(src, "${") {
		v.lit = cty.StringVal(src)
		return v, nil
	}
	e, diags := hclsyntax.ParseTemplate([]byte(src), file, hcl.Pos{Line: line, Column: column, Byte: 0})
	if diags.HasErrors() {
		return v, diagError(diags)
	}
	v.expr = e
	return v, nil
}

// UnmarshalYAML accepts any scalar; strings with `${` are parsed as HCL
// templates so syntax errors surface when the playbook is loaded.
func (v *Value) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &PosError{Line: n.Line, Column: n.Column, Msg: "expected a scalar value or a ${...} expression"}
	}
	col := n.Column
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
		col++ // the value starts after the quote
	}
	switch n.ShortTag() {
	case "!!int", "!!float":
		f, ok := new(big.Float).SetString(strings.ReplaceAll(n.Value, "_", ""))
		if !ok {
			return &PosError{Line: n.Line, Column: n.Column, Msg: fmt.Sprintf("invalid number %q", n.Value)}
		}
		*v = Value{Raw: n.Value, Line: n.Line, Column: col, lit: cty.NumberVal(f), set: true}
		return nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return &PosError{Line: n.Line, Column: n.Column, Msg: err.Error()}
		}
		*v = Value{Raw: n.Value, Line: n.Line, Column: col, lit: cty.BoolVal(b), set: true}
		return nil
	case "!!null":
		*v = Value{}
		return nil
	}
	parsed, err := Parse(n.Value, "", n.Line, col)
	if err != nil {
		return err
	}
	*v = parsed
	return nil
}

// IsSet reports whether the value was given (or defaulted).
func (v Value) IsSet() bool { return v.set }

// IsExpr reports whether the value holds an expression.
func (v Value) IsExpr() bool { return v.expr != nil }

func (v Value) String() string { return v.Raw }

// PosError is an error at a position in a file.
type PosError struct {
	File         string
	Line, Column int
	Msg          string
}

func (e *PosError) Error() string {
	switch {
	case e.Line == 0:
		if e.File == "" {
			return e.Msg
		}
		return e.File + ": " + e.Msg
	case e.Column == 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

func diagError(diags hcl.Diagnostics) error {
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		pe := &PosError{Msg: msg}
		if d.Subject != nil {
			pe.File, pe.Line, pe.Column = d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column
		}
		return pe
	}
	return diags
}

// Units are the byte-size constants every expression can use: HCL has no
// `2GiB` literal, so policies write `2 * GiB`.
var Units = map[string]int64{
	"KiB": 1 << 10,
	"MiB": 1 << 20,
	"GiB": 1 << 30,
	"TiB": 1 << 40,
}

var functions = map[string]function.Function{
	"min":   stdlib.MinFunc,
	"max":   stdlib.MaxFunc,
	"floor": stdlib.FloorFunc,
	"ceil":  stdlib.CeilFunc,
	"abs":   stdlib.AbsoluteFunc,
}

// Scope is what one host's expressions can see. It is not safe for
// concurrent use; each host gets its own.
type Scope struct {
	// File names the playbook in error messages.
	File string
	vars map[string]cty.Value
}

// NewScope returns a scope holding the unit constants.
func NewScope(file string) *Scope {
	s := &Scope{File: file, vars: map[string]cty.Value{}}
	for k, n := range Units {
		s.vars[k] = cty.NumberIntVal(n)
	}
	return s
}

// Set binds name to a Go value: numbers, strings, bools, and maps and
// slices of them.
func (s *Scope) Set(name string, x any) error {
	v, err := toCty(x)
	if err != nil {
		return fmt.Errorf("variable %s: %w", name, err)
	}
	s.vars[name] = v
	return nil
}

// Eval evaluates v in the scope.
func (s *Scope) Eval(v Value) (cty.Value, error) {
	if !v.set {
		return cty.NullVal(cty.DynamicPseudoType), nil
	}
	if v.expr == nil {
		return v.lit, nil
	}
	ctx := &hcl.EvalContext{Variables: s.vars, Functions: functions}
	out, diags := v.expr.Value(ctx)
	if diags.HasErrors() {
		err := diagError(diags)
		if pe, ok := err.(*PosError); ok && pe.File == "" {
			pe.File = s.File
		}
		return cty.NilVal, err
	}
	if !out.IsWhollyKnown() || out.IsNull() {
		return cty.NilVal, s.errAt(v, "expression has no value")
	}
	return out, nil
}

func (s *Scope) errAt(v Value, format string, args ...any) error {
	return &PosError{File: s.File, Line: v.Line, Column: v.Column, Msg: fmt.Sprintf(format, args...)}
}

func (s *Scope) number(v Value) (*big.Float, error) {
	out, err := s.Eval(v)
	if err != nil {
		return nil, err
	}
	if out.Type() == cty.String {
		f, ok := new(big.Float).SetString(strings.TrimSpace(out.AsString()))
		if !ok {
			return nil, s.errAt(v, "%q is not a number", out.AsString())
		}
		return f, nil
	}
	if out.Type() != cty.Number {
		return nil, s.errAt(v, "expected a number, got %s", out.Type().FriendlyName())
	}
	return out.AsBigFloat(), nil
}

// Float64 evaluates v as a number.
func (s *Scope) Float64(v Value) (float64, error) {
	f, err := s.number(v)
	if err != nil {
		return 0, err
	}
	x, _ := f.Float64()
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return 0, s.errAt(v, "number out of range")
	}
	return x, nil
}

// Int64 evaluates v as a whole number; a fraction is an error so that a
// size never gets silently truncated (use floor() or ceil()).
func (s *Scope) Int64(v Value) (int64, error) {
	f, err := s.number(v)
	if err != nil {
		return 0, err
	}
	if !f.IsInt() {
		return 0, s.errAt(v, "expected a whole number, got %s (use floor() or ceil())", f.Text('g', 12))
	}
	n, acc := f.Int64()
	if acc != big.Exact {
		return 0, s.errAt(v, "number out of range")
	}
	return n, nil
}

// Bool evaluates v as a boolean.
func (s *Scope) Bool(v Value) (bool, error) {
	out, err := s.Eval(v)
	if err != nil {
		return false, err
	}
	if out.Type() == cty.String {
		b, perr := strconv.ParseBool(out.AsString())
		if perr != nil {
			return false, s.errAt(v, "%q is not a boolean", out.AsString())
		}
		return b, nil
	}
	if out.Type() != cty.Bool {
		return false, s.errAt(v, "expected a boolean, got %s", out.Type().FriendlyName())
	}
	return out.True(), nil
}

// String evaluates v as a string (numbers and bools are rendered).
func (s *Scope) String(v Value) (string, error) {
	out, err := s.Eval(v)
	if err != nil {
		return "", err
	}
	switch out.Type() {
	case cty.String:
		return out.AsString(), nil
	case cty.Number:
		return out.AsBigFloat().Text('f', -1), nil
	case cty.Bool:
		return strconv.FormatBool(out.True()), nil
	}
	return "", s.errAt(v, "expected a string, got %s", out.Type().FriendlyName())
}

func toCty(x any) (cty.Value, error) {
	switch t := x.(type) {
	case cty.Value:
		return t, nil
	case map[string]any:
		m := make(map[string]cty.Value, len(t))
		for k, e := range t {
			v, err := toCty(e)
			if err != nil {
				return cty.NilVal, err
			}
			m[k] = v
		}
		return cty.ObjectVal(m), nil
	case []any:
		l := make([]cty.Value, len(t))
		for i, e := range t {
			v, err := toCty(e)
			if err != nil {
				return cty.NilVal, err
			}
			l[i] = v
		}
		return cty.TupleVal(l), nil
	case nil:
		return cty.NullVal(cty.DynamicPseudoType), nil
	}
	ty, err := gocty.ImpliedType(x)
	if err != nil {
		return cty.NilVal, err
	}
	return gocty.ToCtyValue(x, ty)
}
