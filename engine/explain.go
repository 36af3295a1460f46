package engine

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/plan"
)

// HostExplanation is every planned value of one host with its formula.
type HostExplanation struct {
	Name    string
	Error   string // the host's error, if planning failed ("" else)
	Facts   map[string]string
	Modules []ModuleExplanation
}

// ModuleExplanation is one module's parameters, worked out for the host,
// and what it plans from them.
type ModuleExplanation struct {
	Module  string
	Params  []ParamExplanation
	Steps   []string // the module's own arithmetic (Explainer), if it shows it
	Outputs map[string]string
	Changes []plan.Change
	Notes   []string
}

// ParamExplanation is one parameter: its key, where it was written ("" for
// a module default), and its formula worked out.
type ParamExplanation struct {
	Key   string
	Pos   string
	Error string
	expr.Explanation
}

// Explainer is implemented by modules that can show the arithmetic they
// do beyond their parameters (pages from a pool size, a limit from a
// ratio), with the host's numbers: one line each.
type Explainer interface {
	Explain(t *Target, params any, p *plan.ModulePlan) []string
}

// Explain works out, for every planned host, each module's parameters in
// the scope its check saw (facts, vars, earlier modules' outputs), after
// Plan. Secrets are redacted like in the report.
func (s *Session) Explain() []HostExplanation {
	var out []HostExplanation
	for _, hr := range s.hosts {
		he := HostExplanation{Name: hr.host.Name}
		if hr.err != nil {
			he.Error = redact(hr.err.Error(), hr.secrets)
		}
		if hr.facts == nil {
			out = append(out, he)
			continue
		}
		f := hr.facts
		he.Facts = map[string]string{
			"facts.mem_total":     fmt.Sprint(f.MemTotal),
			"facts.hugepage_size": fmt.Sprint(f.HugePageSize),
			"facts.swap_total":    fmt.Sprint(f.SwapTotal),
		}
		t := s.target(hr, nil)
		for _, st := range hr.steps {
			name := st.module.Name()
			t.Module = name
			me := ModuleExplanation{Module: name}
			for _, p := range paramValues(st.params) {
				pe := ParamExplanation{Key: p.key}
				if file, line, col := p.v.Pos(); line > 0 {
					pe.Pos = fmt.Sprintf("%s:%d:%d", file, line, col)
				}
				ex, err := t.Scope.Explain(p.v)
				pe.Explanation = ex
				if err != nil {
					pe.Error = redact(err.Error(), hr.secrets)
				}
				pe.Source, pe.Substituted, pe.Result = redact(pe.Source, hr.secrets), redact(pe.Substituted, hr.secrets), redact(pe.Result, hr.secrets)
				me.Params = append(me.Params, pe)
			}
			if st.plan == nil {
				he.Modules = append(he.Modules, me)
				break // planning stopped here
			}
			if x, ok := st.module.(Explainer); ok {
				for _, l := range x.Explain(t, st.params, st.plan) {
					me.Steps = append(me.Steps, redact(l, hr.secrets))
				}
			}
			me.Outputs = map[string]string{}
			for k, v := range st.plan.Outputs {
				me.Outputs[name+"."+k] = redact(fmt.Sprint(v), hr.secrets)
			}
			me.Changes = st.plan.Changes
			for _, n := range st.plan.Notes {
				me.Notes = append(me.Notes, redact(n, hr.secrets))
			}
			_ = s.bindOutputs(t, name, st.plan)
			he.Modules = append(he.Modules, me)
		}
		out = append(out, he)
	}
	return out
}

type keyedValue struct {
	key string
	v   expr.Value
}

// paramValues lists the set expr.Values of a params struct by their YAML
// keys ("a.b" when nested), in field order.
func paramValues(params any) []keyedValue {
	var out []keyedValue
	var walk func(rv reflect.Value, prefix string, depth int)
	walk = func(rv reflect.Value, prefix string, depth int) {
		if !rv.IsValid() || depth > 16 {
			return
		}
		switch rv.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !rv.IsNil() {
				walk(rv.Elem(), prefix, depth+1)
			}
		case reflect.Struct:
			if v, ok := rv.Interface().(expr.Value); ok {
				if v.IsSet() {
					out = append(out, keyedValue{strings.TrimSuffix(prefix, "."), v})
				}
				return
			}
			for i := 0; i < rv.NumField(); i++ {
				f := rv.Type().Field(i)
				if !f.IsExported() {
					continue
				}
				key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
				if key == "-" {
					continue
				}
				if key == "" {
					key = strings.ToLower(f.Name)
				}
				walk(rv.Field(i), prefix+key+".", depth+1)
			}
		case reflect.Map:
			keys := rv.MapKeys()
			sort.Slice(keys, func(i, j int) bool { return fmt.Sprint(keys[i]) < fmt.Sprint(keys[j]) })
			for _, k := range keys {
				walk(rv.MapIndex(k), prefix+fmt.Sprint(k)+".", depth+1)
			}
		}
	}
	walk(reflect.ValueOf(params), "", 0)
	return out
}
