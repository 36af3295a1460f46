package expr

import (
	"strings"
	"testing"
)

// TestScopeCheckUnknowns: Check over UnknownOf values reports what fails
// whatever the values (unknown functions and attributes, a text used as
// a number) and lets through what a value decides.
func TestScopeCheckUnknowns(t *testing.T) {
	type inner struct{ A int }
	type facts struct {
		N int64             `json:"n"`
		S string            `json:"s"`
		T string            `json:"t" expr:"text"`
		B bool              `json:"b"`
		M map[string]string `json:"m"`
		P *inner            `json:"p"`
		H string            `json:"-"`
	}
	s := NewScope("f.yml")
	s.SetValue("x", UnknownOf(&facts{}))
	s.SetValue("out", UnknownAttrs(map[string]any{"pool": int64(0), "any": nil}))
	for _, c := range []struct{ src, want string }{
		{"${x.n * 2 + out.pool + GiB}", ""},
		{"${x.b ? x.n : 0}", ""},
		{"${floor(x.s)}", ""}, // a string a host may give as a number
		{"${x.m[\"k\"] + 1}", ""},
		{"${x.p.a}", ""},
		{"${out.any.deep}", ""},
		{"${x.t} and ${x.s}", ""},
		{"${x.h}", `f.yml:1:4: Unsupported attribute: This object does not have an attribute named "h".`},
		{"${out.pools}", `f.yml:1:6: Unsupported attribute: This object does not have an attribute named "pools".`},
		{"${floor(x.t)}", `Invalid value for "num" parameter: a number is required.`},
		{"${x.n + \"x\"}", "Unsuitable value for right operand: a number is required."},
		{"${round(x.n)}", `There is no function named "round".`},
		{"${y.n}", `There is no variable named "y".`},
	} {
		v, err := Parse(c.src, "f.yml", 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		err = s.Check(v)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.src, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %s", c.src, err, c.want)
		}
	}
}
