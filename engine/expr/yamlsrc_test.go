package expr

import "testing"

func TestParseYAML(t *testing.T) {
	tests := []struct{ doc, err string }{
		{"a: 1\n", ""},
		{"", ""},
		{"# only a comment\n", ""},
		{"a: b: c\n", "f.yml:1: mapping values are not allowed in this context"},
		{"x: 1\ny: [1,2\nz: 3\n", "f.yml:2: did not find expected ',' or ']'"},
		{"a:\n  b: 1\n c: 2\n", "f.yml:3: did not find expected key"},
		{"- a\nb: 1\n", "f.yml:2: did not find expected '-' indicator"},
		{"a: 'x\n", "f.yml:1: found unexpected end of stream"},
		{"a: 1\nb: \"\\q\"\n", "f.yml:2: found unknown escape character"},
		{"a: 1\nb: *nope\n", "f.yml:2: a value that starts with * is a YAML alias, and no anchor has its name: quote the value"},
		{"a: 1\nb:\n  c: 1\n  c: 2\n", `f.yml:4:3: key "c" is already defined at line 3`},
		{"a: 1\nb: x\x01\n", "f.yml:2:5: control character U+0001 is not allowed"},
		{"a: \x00\n", "f.yml:1:4: control character U+0000 is not allowed"},
		{"a: 1\n\xff: 1\n", "f.yml:2:1: invalid UTF-8"},
		{"k: |\n  ab\n bad\n", "f.yml:3: did not find expected key"},
		{"a: b\n\tc: d\n", "f.yml:2: found a tab character that violates indentation"},
		{"a: 1\n---\nb: 2\n", "f.yml:2: only one YAML document is allowed per file"},
		{"a: 1\nb: &x [*x]\n", "f.yml:2:4: anchor 'x' value contains itself"},
		{"a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: &d [*c, *c]\ne: &e [*d, *d]\nf: &f [*e, *e]\ng: &g [*f, *f]\nh: &h [*g, *g]\ni: &i [*h, *h]\nj: &j [*i, *i]\nk: &k [*j, *j]\nl: &l [*k, *k]\nm: &m [*l, *l]\nn: &n [*m, *m]\no: &o [*n, *n]\np: &p [*o, *o]\nq: &q [*p, *p]\nr: &r [*q, *q]\ns: &s [*r, *r]\nt: &t [*s, *s]\nu: &u [*t, *t]\n", "f.yml: document contains excessive aliasing"},
	}
	for _, tt := range tests {
		_, err := ParseYAML("f.yml", []byte(tt.doc))
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tt.err {
			t.Errorf("%q:\n got: %s\nwant: %s", tt.doc, got, tt.err)
		}
	}
}
