package expr

import (
	"errors"
	"math"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// load decodes `k: VALUE` documents the way the playbook loader does:
// decode, complete load errors with Locate, bind values with BindAll.
func load(t *testing.T, doc string) (Value, error) {
	t.Helper()
	var x struct{ K Value }
	err := yaml.Unmarshal([]byte(doc), &x)
	if err != nil {
		return Value{}, Locate(err, "p.yml", []byte(doc))
	}
	BindAll(&x, "p.yml", []byte(doc))
	return x.K, nil
}

func scope(t *testing.T) *Scope {
	t.Helper()
	s := NewScope("scope.yml")
	vars := map[string]any{
		"facts": map[string]any{
			"mem_total":     int64(16 << 30),
			"hugepage_size": int64(2 << 20),
			"hostname":      "db1",
		},
		"pool":  int64(4 << 30),
		"ratio": 0.8,
		"on":    true,
	}
	for k, v := range vars {
		if err := s.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestInt64(t *testing.T) {
	tests := []struct {
		doc  string
		want int64
		err  string
	}{
		{doc: "k: 5", want: 5},
		{doc: "k: -5", want: -5},
		{doc: "k: 0x10", want: 16},
		{doc: "k: 0o17", want: 15},
		{doc: "k: 1_000", want: 1000},
		{doc: "k: '42'", want: 42},
		{doc: "k: 2.0", want: 2},
		{doc: "k: ${2 * GiB}", want: 2 << 30},
		{doc: "k: ${KiB + MiB}", want: 1<<10 + 1<<20},
		{doc: "k: '${1 * TiB}'", want: 1 << 40},
		{doc: "k: ${facts.mem_total / 4}", want: 4 << 30},
		{doc: "k: ${floor(facts.mem_total * 0.25 / facts.hugepage_size)}", want: 2048},
		{doc: "k: ${ceil(7 / 2)}", want: 4},
		{doc: "k: ${floor(7 / 2)}", want: 3},
		{doc: "k: ${min(pool, 8 * GiB)}", want: 4 << 30},
		{doc: "k: ${max(pool, 8 * GiB)}", want: 8 << 30},
		{doc: "k: ${abs(-3)}", want: 3},
		{doc: "k: ${floor((facts.mem_total - pool) * ratio / KiB) + 2 * MiB}", want: 10066329 + 2<<20},
		{doc: "k: ' ${2 * GiB} '", want: 2 << 30},    // blanks around one expression
		{doc: "k: >\n  ${2 * GiB}\n", want: 2 << 30}, // a block scalar's line feed
		{doc: "k: 9223372036854775807", want: math.MaxInt64},

		{doc: "k: 1.5", err: "p.yml:1:4: expected a whole number, got 1.5 (use floor() or ceil())"},
		{doc: "k: ${3 / 2}", err: "p.yml:1:4: expected a whole number, got 1.5 (use floor() or ceil())"},
		{doc: "k: ${facts.mem_total * 0.3}", err: "p.yml:1:4: expected a whole number, got 5153960755.2 (use floor() or ceil())"},
		{doc: "k: ${1 / 0}", err: `p.yml:1:4: "${1 / 0}" is infinite (division by zero?)`},
		{doc: "k: 18446744073709551615", err: "p.yml:1:4: number out of range"},
		{doc: "k: 99999999999999999999", err: "p.yml:1:4: number out of range"},
		{doc: "k: abc", err: `p.yml:1:4: "abc" is not a number`},
		// Text joined to an expression would be read as one number.
		{doc: "k: \"${2}${0}\"", err: `p.yml:1:5: "${2}${0}" mixes text with ${...}: a number is written as one ${...} expression or a plain number`},
		{doc: "k: \"${2 * GiB}0\"", err: `p.yml:1:5: "${2 * GiB}0" mixes text with ${...}: a number is written as one ${...} expression or a plain number`},
		{doc: "k: ${1}e9", err: `p.yml:1:4: "${1}e9" mixes text with ${...}: a number is written as one ${...} expression or a plain number`},
		{doc: "k: 0${GiB}", err: `p.yml:1:4: "0${GiB}" mixes text with ${...}: a number is written as one ${...} expression or a plain number`},
		// A size with a unit: the error gives the expression instead.
		{doc: "k: 4GiB", err: `p.yml:1:4: "4GiB" is not a number: sizes are in bytes: write "${4 * GiB}"`},
		{doc: "k: '512 MB'", err: `p.yml:1:5: "512 MB" is not a number: sizes are in bytes: write "${512 * MiB}"`},
		{doc: "k: 2g", err: `p.yml:1:4: "2g" is not a number: sizes are in bytes: write "${2 * GiB}"`},
		{doc: "k: 64kB", err: `p.yml:1:4: "64kB" is not a number: sizes are in bytes: write "${64 * KiB}"`},
		{doc: "k: 1TiB", err: `p.yml:1:4: "1TiB" is not a number: sizes are in bytes: write "${1 * TiB}"`},
		{doc: "k: 1.5GiB", err: `p.yml:1:4: "1.5GiB" is not a number: sizes are in bytes: write "${1.5 * GiB}"`},
		{doc: "k: 1.3GiB", err: `p.yml:1:4: "1.3GiB" is not a number: sizes are in bytes: write "${floor(1.3 * GiB)}"`},
		{doc: "k: 4 GiBs", err: `p.yml:1:4: "4 GiBs" is not a number`},
		{doc: "k: 80%", err: `p.yml:1:4: "80%" is not a number`},
		{doc: "k: GiB", err: `p.yml:1:4: "GiB" is not a number`},
		{doc: "k: true", err: "p.yml:1:4: expected a number, got bool"},
		{doc: "k: ${facts}", err: "p.yml:1:4: expected a number, got object"},
		{doc: "k: ${nope * 2}", err: `p.yml:1:6: Unknown variable: There is no variable named "nope".`},
		{doc: "k: ${facts.mem_totl}", err: `p.yml:1:11: Unsupported attribute: This object does not have an attribute named "mem_totl".`},
		{doc: `k: ${"a" * 2}`, err: "p.yml:1:6: Invalid operand: Unsuitable value for left operand: a number is required."},
		{doc: "k: ${foo(1)}", err: `p.yml:1:6: Call to unknown function: There is no function named "foo". Did you mean "floor"?`},
		{doc: "k: ${floor()}", err: `p.yml:1:12: Not enough function arguments: Function "floor" expects 1 argument(s). Missing value for "num".`},
	}
	for _, tt := range tests {
		t.Run(tt.doc, func(t *testing.T) {
			v, err := load(t, tt.doc)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			got, err := scope(t).Int64(v)
			checkErr(t, err, tt.err)
			if err == nil && got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want %q", want)
	case want != "" && err.Error() != want:
		t.Fatalf("error\n got: %s\nwant: %s", err, want)
	}
	if err != nil {
		var pe *PosError
		if !errors.As(err, &pe) {
			t.Fatalf("error %T is not a *PosError", err)
		}
	}
}

func TestOtherTypes(t *testing.T) {
	tests := []struct {
		doc  string
		kind string // float, bool, string
		want any
		err  string
	}{
		{doc: "k: 0.8", kind: "float", want: 0.8},
		{doc: "k: ${ratio * 100}", kind: "float", want: 80.0},
		{doc: "k: 3", kind: "float", want: 3.0},
		{doc: "k: ${nan}", kind: "float", err: `p.yml:1:6: Unknown variable: There is no variable named "nan". Did you mean "on"?`},
		{doc: "k: true", kind: "bool", want: true},
		{doc: "k: 'false'", kind: "bool", want: false},
		{doc: "k: ${on && pool > GiB}", kind: "bool", want: true},
		{doc: "k: ${pool > 8 * GiB}", kind: "bool", want: false},
		{doc: "k: maybe", kind: "bool", err: `p.yml:1:4: "maybe" is not a boolean`},
		{doc: "k: 1", kind: "bool", err: "p.yml:1:4: expected a boolean, got number"},
		{doc: "k: hello", kind: "string", want: "hello"},
		{doc: "k: 'host ${facts.hostname}'", kind: "string", want: "host db1"},
		{doc: "k: ${pool / MiB}MB", kind: "string", want: "4096MB"},
		{doc: "k: ${pool}", kind: "string", want: "4294967296"},
		{doc: "k: 'cost $${x}'", kind: "string", want: "cost ${x}"},
		{doc: "k: 12", kind: "string", want: "12"},
		{doc: "k: ${facts}", kind: "string", err: "p.yml:1:4: expected a string, got object"},
	}
	for _, tt := range tests {
		t.Run(tt.doc, func(t *testing.T) {
			v, err := load(t, tt.doc)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			s := scope(t)
			var got any
			switch tt.kind {
			case "float":
				got, err = s.Float64(v)
			case "bool":
				got, err = s.Bool(v)
			case "string":
				got, err = s.String(v)
			}
			checkErr(t, err, tt.err)
			if err == nil && got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPositions checks that errors point at the offending character for
// every scalar style, both at load time (syntax) and at evaluation time.
func TestPositions(t *testing.T) {
	tests := []struct {
		name, doc, err string
	}{
		{"plain syntax", "k: ${2 *}\n", "p.yml:1:9: Invalid expression: Expected the start of an expression, but found an invalid expression token."},
		{"double syntax", "k: \"${2 *}\"\n", "p.yml:1:10: Invalid expression: Expected the start of an expression, but found an invalid expression token."},
		{"single syntax", "k: '${2 *}'\n", "p.yml:1:10: Invalid expression: Expected the start of an expression, but found an invalid expression token."},
		{"unterminated", "k: ${\n", "p.yml:1:6: Missing expression: Expected the start of an expression, but found the end of the file."},
		{"literal syntax", "a: 1\nk: |\n    x ${1 +\n    *}\n", "p.yml:4:5: Invalid expression: Expected the start of an expression, but found an invalid expression token."},
		{"plain eval", "k: ${nope}\n", `p.yml:1:6: Unknown variable: There is no variable named "nope".`},
		{"after a mapping", "a:\n  b:\n    c: 1\nk:    x ${nope}\n", `p.yml:4:11: Unknown variable: There is no variable named "nope".`},
		{"double escapes", "k: \"\\t\\u00e9${nope + 1}\"\n", `p.yml:1:15: Unknown variable: There is no variable named "nope".`},
		{"double escaped break", "k: \"a \\\n     ${nope}\"\n", `p.yml:2:8: Unknown variable: There is no variable named "nope".`},
		{"double folded", "k: \"a\n  ${nope}\"\n", `p.yml:2:5: Unknown variable: There is no variable named "nope".`},
		{"single quotes", "k: 'it''s ${nope}'\n", `p.yml:1:13: Unknown variable: There is no variable named "nope".`},
		{"multibyte", "k: \"é€${nope}\"\n", `p.yml:1:9: Unknown variable: There is no variable named "nope".`},
		{"literal", "k: |\n  ${nope}\n", `p.yml:2:5: Unknown variable: There is no variable named "nope".`},
		{"literal deeper", "k: |2-\n    abc\n    ${1 +\n      nope}\n", `p.yml:4:7: Unknown variable: There is no variable named "nope".`},
		{"literal comment header", "k: | # note ${x}\n  ${nope}\n", `p.yml:2:5: Unknown variable: There is no variable named "nope".`},
		{"folded", "k: >\n  abc\n  ${nope}\n", `p.yml:3:5: Unknown variable: There is no variable named "nope".`},
		{"multi-line plain", "k: a\n  b ${nope}\n", `p.yml:2:7: Unknown variable: There is no variable named "nope".`},
		{"tag", "k: !!str ${nope}\n", `p.yml:1:12: Unknown variable: There is no variable named "nope".`},
		{"anchor", "k: &a '${nope}'\n", `p.yml:1:10: Unknown variable: There is no variable named "nope".`},
		{"not a scalar", "k: [1]\n", "yaml: unmarshal errors:\n  line 1: cannot unmarshal !!seq into expr.Value"},
		{"nan", "k: .nan\n", `p.yml:1:4: invalid number ".nan"`},
		{"inf", "k: -.inf\n", `p.yml:1:4: invalid number "-.inf"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := load(t, tt.doc)
			if err == nil {
				_, err = scope(t).String(v)
			}
			if err == nil || err.Error() != tt.err {
				t.Fatalf("error\n got: %v\nwant: %s", err, tt.err)
			}
		})
	}
}

func TestValuePos(t *testing.T) {
	tests := []struct {
		doc        string
		line, col  int
		raw        string
		isExpr, ok bool
	}{
		{"k: 5\n", 1, 4, "5", false, true},
		{"k: \"x${1}\"\n", 1, 5, "x${1}", true, true},
		{"k: |\n   ${1}\n", 2, 4, "${1}\n", true, true},
		{"k:\n", 0, 0, "", false, false},
	}
	for _, tt := range tests {
		v, err := load(t, tt.doc)
		if err != nil {
			t.Fatal(err)
		}
		_, line, col := v.Pos()
		if line != tt.line || col != tt.col || v.Raw != tt.raw || v.IsExpr() != tt.isExpr || v.IsSet() != tt.ok {
			t.Errorf("%q: got %d:%d %q expr=%v set=%v", tt.doc, line, col, v.Raw, v.IsExpr(), v.IsSet())
		}
	}
	if _, err := NewScope("s.yml").Int64(Value{}); err == nil || err.Error() != "s.yml: no value given" {
		t.Errorf("unset value: %v", err)
	}
	v, _ := load(t, "a: 1\nk: ${2}\n")
	if got := v.Errorf("too big").Error(); got != "p.yml:2:4: too big" {
		t.Errorf("Errorf: %s", got)
	}
}

func TestDefaultsAndBindAll(t *testing.T) {
	type inner struct {
		V Value `yaml:"v"`
	}
	type params struct {
		Pool  Value            `yaml:"pool"`
		Keep  Value            `yaml:"keep"`
		In    *inner           `yaml:"in"`
		List  []Value          `yaml:"list"`
		Map   map[string]Value `yaml:"map"`
		Other int              `yaml:"other"`
	}
	p := params{Pool: Literal("25%"), Keep: Literal(int64(7))}
	doc := "pool: ${x}\nin:\n  v: ${y}\nlist: [1, '${z}']\nmap:\n  a: ${w}\n"
	if err := yaml.Unmarshal([]byte(doc), &p); err != nil {
		t.Fatal(err)
	}
	BindAll(&p, "b.yml", []byte(doc))
	s := NewScope("")
	if n, err := s.Int64(p.Keep); err != nil || n != 7 {
		t.Errorf("default kept: %d %v", n, err)
	}
	for _, c := range []struct {
		v    Value
		want string
	}{
		{p.Pool, `b.yml:1:9: Unknown variable: There is no variable named "x".`},
		{p.In.V, `b.yml:3:8: Unknown variable: There is no variable named "y".`},
		{p.List[1], `b.yml:4:14: Unknown variable: There is no variable named "z".`},
		{p.Map["a"], `b.yml:6:8: Unknown variable: There is no variable named "w".`},
	} {
		if _, err := s.Int64(c.v); err == nil || err.Error() != c.want {
			t.Errorf("got %v, want %s", err, c.want)
		}
	}
}

func TestParseDirect(t *testing.T) {
	v, err := Parse("x ${1 + }", "f.hcl", 3, 10)
	if err == nil || err.Error() != "f.hcl:3:18: Invalid expression: Expected the start of an expression, but found an invalid expression token." {
		t.Fatalf("got %v", err)
	}
	v, err = Parse("${a}", "f.hcl", 3, 10)
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewScope("").Int64(v)
	if err == nil || err.Error() != `f.hcl:3:12: Unknown variable: There is no variable named "a".` {
		t.Fatalf("got %v", err)
	}
}

func TestSet(t *testing.T) {
	s := NewScope("")
	if err := s.Set("x", math.NaN()); err == nil || !strings.Contains(err.Error(), "variable x") {
		t.Errorf("NaN accepted: %v", err)
	}
	if err := s.Set("l", []any{int64(1), "a", map[string]any{"b": true}}); err != nil {
		t.Fatal(err)
	}
	v, _ := Parse("${l[2].b}", "", 1, 1)
	if b, err := s.Bool(v); err != nil || !b {
		t.Errorf("got %v %v", b, err)
	}
}

func TestPosErrorFormat(t *testing.T) {
	for _, c := range []struct {
		e    PosError
		want string
	}{
		{PosError{File: "f", Line: 1, Column: 2, Msg: "m"}, "f:1:2: m"},
		{PosError{File: "f", Line: 1, Msg: "m"}, "f:1: m"},
		{PosError{File: "f", Msg: "m"}, "f: m"},
		{PosError{Line: 3, Column: 4, Msg: "m"}, "3:4: m"},
		{PosError{Msg: "m"}, "m"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("got %q want %q", got, c.want)
		}
	}
}

func TestParseBool(t *testing.T) {
	for s, want := range map[string]bool{"yes": true, "Y": true, "TRUE": true, "t": true, "on": true, "1": true, " yes ": true,
		"no": false, "N": false, "False": false, "f": false, "OFF": false, "0": false} {
		if got, ok := ParseBool(s); !ok || got != want {
			t.Errorf("ParseBool(%q) = %v, %v; want %v, true", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "2", "yes please", "nope", "enable"} {
		if _, ok := ParseBool(s); ok {
			t.Errorf("ParseBool(%q) accepted", s)
		}
	}
}
