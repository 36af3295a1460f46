package expr

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Explanation is a value's formula with one host's numbers in it, so a
// reviewer can redo the arithmetic: the source as written, the same text
// with every name replaced by its value, each name's value, the result.
type Explanation struct {
	Source      string    // "floor(facts.mem_total * 0.25)"
	Substituted string    // "floor(25275226112 * 0.25)"; "" for a plain value
	Operands    []Operand // the names the formula reads, in order of appearance
	Result      string    // "6318806528"
}

// Operand is one name a formula reads and its value for the host.
type Operand struct {
	Name  string
	Value string
}

// Explain evaluates v and shows its work as far as HCL exposes it: the
// variables an expression references (not the intermediate results of
// its operators or functions). The unit constants (GiB, …) stay named.
func (s *Scope) Explain(v Value) (Explanation, error) {
	out, err := s.get(v)
	if err != nil {
		return Explanation{Source: v.Raw}, err
	}
	ex := Explanation{Source: v.Raw, Result: Format(out)}
	if v.expr == nil {
		return ex, nil
	}
	ctx := &hcl.EvalContext{Variables: s.vars, Functions: functions}
	type edit struct {
		start, end int
		text       string
	}
	var edits []edit
	seen := map[string]bool{}
	for _, t := range v.expr.Variables() {
		if _, unit := Units[t.RootName()]; unit {
			continue
		}
		val, diags := t.TraverseAbs(ctx)
		if diags.HasErrors() {
			continue
		}
		r := t.SourceRange()
		if r.Start.Byte < 0 || r.End.Byte > len(v.Raw) || r.Start.Byte >= r.End.Byte {
			continue
		}
		name := v.Raw[r.Start.Byte:r.End.Byte]
		text := Format(val)
		edits = append(edits, edit{r.Start.Byte, r.End.Byte, text})
		if !seen[name] {
			seen[name] = true
			ex.Operands = append(ex.Operands, Operand{Name: name, Value: text})
		}
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].start > edits[j].start })
	sub := v.Raw
	for _, e := range edits {
		sub = sub[:e.start] + e.text + sub[e.end:]
	}
	ex.Source, ex.Substituted = unwrap(v.Raw), unwrap(sub)
	return ex, nil
}

// unwrap drops the ${ } around a value that is one interpolation.
func unwrap(s string) string {
	if strings.HasPrefix(s, "${") && strings.HasSuffix(s, "}") && strings.Count(s, "${") == 1 {
		return strings.TrimSpace(s[2 : len(s)-1])
	}
	return s
}

// Format renders a value as a person reads it: whole numbers in full,
// others in the shortest exact form; strings as they are.
func Format(v cty.Value) string {
	if v.IsNull() || !v.IsKnown() {
		return "(no value)"
	}
	switch v.Type() {
	case cty.Number:
		f := v.AsBigFloat()
		if f.IsInt() {
			i, _ := f.Int(nil)
			return i.String()
		}
		x, _ := f.Float64()
		return strconv.FormatFloat(x, 'f', -1, 64)
	case cty.String:
		return v.AsString()
	case cty.Bool:
		return fmt.Sprint(v.True())
	}
	return fmt.Sprintf("%#v", v)
}
