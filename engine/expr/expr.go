// Package expr evaluates the `${...}` expressions that playbook values may
// hold, per host, against facts, inventory vars and the values earlier
// modules plan. Expressions are HCL templates; positions point at the YAML
// line and column the value came from.
package expr

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"regexp"
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
	Raw string
	// Line and Column locate the first character of the value's text in
	// its file (after an opening quote; the first content line of a block
	// scalar).
	Line   int
	Column int
	expr   hcl.Expression // set for templates
	lit    cty.Value      // set for plain scalars
	set    bool
	// Where the value came from, so that errors inside a template point
	// at the right file, line and column; see Bind.
	file string
	src  []byte
	span span
}

// Literal makes a Value from a Go constant, for module defaults.
func Literal(x any) Value {
	v, err := toCty(x)
	if err != nil {
		panic(err)
	}
	return Value{Raw: fmt.Sprint(x), lit: v, set: true}
}

// MustParse is Parse for defaults written in code: a syntax error there is
// a bug, so it panics.
func MustParse(src string) Value {
	v, err := Parse(src, "", 0, 0)
	if err != nil {
		panic(err)
	}
	return v
}

// Parse makes a Value from source text as it would appear in YAML, with
// line and column giving its position in file (used in error messages).
func Parse(src, file string, line, column int) (Value, error) {
	v := Value{Raw: src, Line: line, Column: column, set: true, file: file,
		span: span{line: line, col: column, style: 0, text: src, direct: true}}
	if !strings.Contains(src, "${") {
		v.lit = cty.StringVal(src)
		return v, nil
	}
	e, err := parseTemplate(src)
	if err != nil {
		err.File = file
		err.Line, err.Column = v.span.at(nil, err.off)
		return v, err
	}
	v.expr = e
	return v, nil
}

// parseTemplate parses src as an HCL template whose positions are byte
// offsets into src (mapped to the file later).
func parseTemplate(src string) (e hcl.Expression, perr *PosError) {
	defer func() {
		// The HCL parser is not meant to panic, but a policy file must
		// never crash the tool.
		if r := recover(); r != nil {
			e, perr = nil, &PosError{Msg: fmt.Sprintf("invalid expression: %v", r)}
		}
	}()
	e, diags := hclsyntax.ParseTemplate([]byte(src), "", hcl.Pos{Line: 1, Column: 1, Byte: 0})
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	return e, nil
}

// UnmarshalYAML accepts any scalar; strings with `${` are parsed as HCL
// templates so syntax errors surface when the playbook is loaded. A
// mapping or a list is reported as a yaml.TypeError so that the decoder
// goes on and reports every bad key of the document at once.
func (v *Value) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal %s into expr.Value", n.Line, n.ShortTag())}}
	}
	sp := span{line: n.Line, col: n.Column, style: n.Style, text: n.Value}
	line, col := sp.at(nil, 0)
	base := Value{Raw: n.Value, Line: line, Column: col, set: true, span: sp}
	switch n.ShortTag() {
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			base.lit = cty.NumberIntVal(i)
			break
		}
		var u uint64
		if err := n.Decode(&u); err == nil {
			base.lit = cty.NumberUIntVal(u)
			break
		}
		return &PosError{Line: line, Column: col, Msg: fmt.Sprintf("invalid number %q", n.Value), span: &sp}
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return &PosError{Line: line, Column: col, Msg: fmt.Sprintf("invalid number %q", n.Value), span: &sp}
		}
		base.lit = cty.NumberFloatVal(f)
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return &PosError{Line: line, Column: col, Msg: fmt.Sprintf("invalid boolean %q", n.Value), span: &sp}
		}
		base.lit = cty.BoolVal(b)
	case "!!null":
		*v = Value{}
		return nil
	default:
		if !strings.Contains(n.Value, "${") {
			base.lit = cty.StringVal(n.Value)
			break
		}
		e, err := parseTemplate(n.Value)
		if err != nil {
			err.span = &sp
			err.Line, err.Column = sp.at(nil, err.off)
			return err
		}
		base.expr = e
	}
	*v = base
	return nil
}

// Bind records the file a decoded value came from and that file's
// content, so that errors found when the value is evaluated point at the
// exact line and column even inside quoted, escaped or block scalars.
func (v *Value) Bind(file string, src []byte) {
	v.file = file
	if v.span.direct || v.span.line == 0 {
		return
	}
	v.src = src
	v.Line, v.Column = v.span.at(src, 0)
}

// BindAll calls Bind on every Value reachable from x (a pointer to a
// params struct): struct fields, pointers, slices, arrays and maps.
func BindAll(x any, file string, src []byte) {
	bindAll(reflect.ValueOf(x), file, src, 0)
}

var valueType = reflect.TypeOf(Value{})

func bindAll(rv reflect.Value, file string, src []byte, depth int) {
	if !rv.IsValid() || depth > 64 {
		return
	}
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !rv.IsNil() {
			bindAll(rv.Elem(), file, src, depth+1)
		}
	case reflect.Struct:
		if rv.Type() == valueType {
			if rv.CanAddr() {
				rv.Addr().Interface().(*Value).Bind(file, src)
			}
			return
		}
		for i := 0; i < rv.NumField(); i++ {
			if rv.Type().Field(i).IsExported() {
				bindAll(rv.Field(i), file, src, depth+1)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < rv.Len(); i++ {
			bindAll(rv.Index(i), file, src, depth+1)
		}
	case reflect.Map:
		// Map elements are not addressable: bind a copy and store it back.
		if rv.Type().Elem() == valueType {
			it := rv.MapRange()
			for it.Next() {
				e := it.Value().Interface().(Value)
				e.Bind(file, src)
				rv.SetMapIndex(it.Key(), reflect.ValueOf(e))
			}
			return
		}
		it := rv.MapRange()
		for it.Next() {
			bindAll(it.Value(), file, src, depth+1)
		}
	}
}

// Locate completes an error returned while decoding YAML into a Value:
// it adds the file name and, given the file's content, moves the
// position to the exact character inside the scalar. Other errors are
// returned unchanged.
func Locate(err error, file string, src []byte) error {
	var pe *PosError
	if !errors.As(err, &pe) {
		return err
	}
	if pe.File == "" {
		pe.File = file
	}
	if pe.span != nil && !pe.span.direct {
		pe.Line, pe.Column = pe.span.at(src, pe.off)
	}
	return err
}

// Pos returns where the value came from ("" and zeros for defaults).
func (v Value) Pos() (file string, line, column int) { return v.file, v.Line, v.Column }

// Errorf makes an error located at the value, for checks done after
// evaluation (a size out of bounds, say).
func (v Value) Errorf(format string, args ...any) error {
	return &PosError{File: v.file, Line: v.Line, Column: v.Column, Msg: fmt.Sprintf(format, args...)}
}

// IsSet reports whether the value was given (or defaulted).
func (v Value) IsSet() bool { return v.set }

// IsExpr reports whether the value holds an expression.
func (v Value) IsExpr() bool { return v.expr != nil }

func (v Value) String() string { return v.Raw }

// PosError is an error at a position in a file. It prints as
// FILE:LINE:COL: MSG (FILE:LINE: MSG without a column, FILE: MSG without
// a line).
type PosError struct {
	File         string
	Line, Column int
	Msg          string
	// For errors inside a scalar: the scalar and the byte offset in its
	// value, so that Locate can map the position once the source is known.
	span *span
	off  int
}

func (e *PosError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, "%d:", e.Column)
		}
	}
	if b.Len() > 0 {
		b.WriteString(" ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// diagError turns HCL diagnostics into a PosError whose off is the byte
// offset of the problem in the template text.
func diagError(diags hcl.Diagnostics) *PosError {
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + d.Detail
		}
		// One problem, one line: HCL details come as paragraphs.
		pe := &PosError{Msg: strings.Join(strings.Fields(msg), " ")}
		if d.Subject != nil {
			pe.off = d.Subject.Start.Byte
		}
		return pe
	}
	return &PosError{Msg: diags.Error()}
}

// Units are the byte-size constants every expression can use: HCL has no
// `2GiB` literal, so policies write `2 * GiB`.
var Units = map[string]int64{
	"KiB": 1 << 10,
	"MiB": 1 << 20,
	"GiB": 1 << 30,
	"TiB": 1 << 40,
}

// sizeSuffixes are the unit spellings a size written as a string may end
// in ("4GiB", "512 MB", "2g"), by the constant that means them. Like
// PostgreSQL's own settings, kB/MB/GB are taken as powers of 1024.
var sizeSuffixes = map[string]string{
	"k": "KiB", "kb": "KiB", "kib": "KiB",
	"m": "MiB", "mb": "MiB", "mib": "MiB",
	"g": "GiB", "gb": "GiB", "gib": "GiB",
	"t": "TiB", "tb": "TiB", "tib": "TiB",
}

var sizeRE = regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]+)\s*$`)

// sizeHint is the expression form of a size written with a unit ("4GiB":
// `: sizes are in bytes: write "${4 * GiB}"`), for the error that says
// such a string is not a number; "" for any other string. HCL has no
// unit literals, so the unit is a constant the number is multiplied by; a
// product that is not whole bytes is floored.
func sizeHint(str string) string {
	m := sizeRE.FindStringSubmatch(str)
	if m == nil {
		return ""
	}
	unit, ok := sizeSuffixes[strings.ToLower(m[2])]
	if !ok {
		return ""
	}
	e := m[1] + " * " + unit
	if n, ok := new(big.Float).SetString(m[1]); ok && !n.Mul(n, new(big.Float).SetInt64(Units[unit])).IsInt() {
		e = "floor(" + e + ")"
	}
	return fmt.Sprintf(`: sizes are in bytes: write "${%s}"`, e)
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
	// unusable: root → names that exist but cannot be used, with why
	// (see Unusable).
	unusable map[string]map[string]error
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
	out, err := s.evalExpr(v)
	if err != nil {
		return cty.NilVal, err
	}
	if !out.IsWhollyKnown() || out.IsNull() {
		return cty.NilVal, s.errAt(v, "expression has no value")
	}
	return out, nil
}

func (s *Scope) evalExpr(v Value) (out cty.Value, err error) {
	defer func() {
		// cty panics on a few impossible operations (NaN results, say);
		// a policy value must fail its host, not crash the run.
		if r := recover(); r != nil {
			out, err = cty.NilVal, s.errAt(v, "cannot evaluate %q: %v", v.Raw, r)
		}
	}()
	if err := s.checkUnusable(v); err != nil {
		return cty.NilVal, err
	}
	ctx := &hcl.EvalContext{Variables: s.vars, Functions: functions}
	out, diags := v.expr.Value(ctx)
	if diags.HasErrors() {
		pe := diagError(diags)
		pe.File = s.fileOf(v)
		pe.Line, pe.Column = v.span.at(v.src, pe.off)
		return cty.NilVal, pe
	}
	return out, nil
}

func (s *Scope) fileOf(v Value) string {
	if v.file != "" {
		return v.file
	}
	return s.File
}

func (s *Scope) errAt(v Value, format string, args ...any) error {
	return &PosError{File: s.fileOf(v), Line: v.Line, Column: v.Column, Msg: fmt.Sprintf(format, args...)}
}

// Errorf makes an error located at v, naming the scope's file when the
// value does not know its own.
func (s *Scope) Errorf(v Value, format string, args ...any) error {
	return s.errAt(v, format, args...)
}

// get evaluates a value that must be there; Eval itself returns null for
// a value that was never set.
func (s *Scope) get(v Value) (cty.Value, error) {
	if !v.set {
		return cty.NilVal, s.errAt(v, "no value given")
	}
	return s.Eval(v)
}

func (s *Scope) number(v Value) (*big.Float, error) {
	if err := s.oneExpression(v); err != nil {
		return nil, err
	}
	out, err := s.get(v)
	if err != nil {
		return nil, err
	}
	var f *big.Float
	switch out.Type() {
	case cty.String:
		var ok bool
		f, ok = new(big.Float).SetString(strings.TrimSpace(out.AsString()))
		if !ok {
			return nil, s.errAt(v, "%q is not a number%s", out.AsString(), sizeHint(out.AsString()))
		}
	case cty.Number:
		f = out.AsBigFloat()
	default:
		return nil, s.errAt(v, "expected a number, got %s", out.Type().FriendlyName())
	}
	if f.IsInf() {
		return nil, s.errAt(v, "%q is infinite (division by zero?)", v.Raw)
	}
	return f, nil
}

// oneExpression refuses a number written as text around ${...}: the
// parts would be joined as text and read as one number ("${2 * GiB}0" is
// 20 GiB, "${1}e9" a billion), a typo that changes a size silently. A
// number is a plain number or a single ${...}, blanks around it allowed
// (a YAML block scalar ends with a line feed).
func (s *Scope) oneExpression(v Value) error {
	t, ok := v.expr.(*hclsyntax.TemplateExpr)
	if !ok {
		return nil
	}
	exprs := 0
	for _, part := range t.Parts {
		if lit, ok := part.(*hclsyntax.LiteralValueExpr); ok && lit.Val.Type() == cty.String && strings.TrimSpace(lit.Val.AsString()) == "" {
			continue
		}
		if _, ok := part.(*hclsyntax.LiteralValueExpr); ok || exprs > 0 {
			return s.errAt(v, "%q mixes text with ${...}: a number is written as one ${...} expression or a plain number", v.Raw)
		}
		exprs++
	}
	return nil
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

// ParseBool reads a boolean written the way Ansible accepts one (yes/no,
// true/false, on/off, y/n, t/f, 1/0, in any case): playbooks and
// inventories come from Ansible users, and YAML 1.2 leaves "yes" a string.
func ParseBool(s string) (value, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "yes", "y", "true", "t", "on", "1":
		return true, true
	case "no", "n", "false", "f", "off", "0":
		return false, true
	}
	return false, false
}

// Bool evaluates v as a boolean.
func (s *Scope) Bool(v Value) (bool, error) {
	out, err := s.get(v)
	if err != nil {
		return false, err
	}
	if out.Type() == cty.String {
		b, ok := ParseBool(out.AsString())
		if !ok {
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
	out, err := s.get(v)
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
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return cty.NilVal, fmt.Errorf("%v is not a usable number", t)
		}
	case float32:
		if math.IsNaN(float64(t)) || math.IsInf(float64(t), 0) {
			return cty.NilVal, fmt.Errorf("%v is not a usable number", t)
		}
	}
	ty, err := gocty.ImpliedType(x)
	if err != nil {
		return cty.NilVal, err
	}
	return gocty.ToCtyValue(x, ty)
}
