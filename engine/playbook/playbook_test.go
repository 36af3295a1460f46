package playbook

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/expr"
)

// Params shaped like the real modules': expression values, plain typed
// fields, a nested struct, a map and a list.
type hugepagesParams struct {
	Pool     expr.Value `yaml:"pool"`
	Fallback string     `yaml:"fallback"`
	Compact  bool       `yaml:"compact"`
}

type limits struct {
	Max expr.Value `yaml:"max"`
	Min int        `yaml:"min"`
}

type pgconfParams struct {
	SharedBuffers  expr.Value        `yaml:"shared_buffers"`
	HugePages      string            `yaml:"huge_pages"`
	Restart        bool              `yaml:"restart"`
	MaxConnections int               `yaml:"max_connections"`
	Limits         limits            `yaml:"limits"`
	Extra          map[string]string `yaml:"extra"`
	Files          []string          `yaml:"files"`
}

type overcommitParams struct {
	Memory int        `yaml:"memory"`
	Kbytes expr.Value `yaml:"kbytes"`
	Ratio  float64    `yaml:"ratio"`
}

func testRegistry() Registry {
	return Registry{
		"hugepages": func() any {
			return &hugepagesParams{Pool: expr.Literal(0.25), Fallback: "fail", Compact: true}
		},
		"pgconf": func() any {
			return &pgconfParams{HugePages: "on", Restart: false, MaxConnections: 100, Limits: limits{Min: 128}}
		},
		"overcommit": func() any { return &overcommitParams{Memory: 2, Ratio: 0.8} },
	}
}

func TestLoad(t *testing.T) {
	pb, err := Load("testdata/memory.yml", testRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if len(pb.Plays) != 2 {
		t.Fatalf("%d plays", len(pb.Plays))
	}
	p := pb.Plays[0]
	if p.Name != "memory policy" || p.Hosts != "postgres:!db9" || p.Line != 2 {
		t.Errorf("play 1: %+v", p)
	}
	if !reflect.DeepEqual(p.Sections, []string{"pgconf", "hugepages", "overcommit"}) {
		t.Errorf("sections %v", p.Sections)
	}
	hp := p.Policy["hugepages"].(*hugepagesParams)
	if hp.Fallback != "fail" || !hp.Compact || !hp.Pool.IsExpr() {
		t.Errorf("hugepages defaults lost: %+v", hp)
	}
	pg := p.Policy["pgconf"].(*pgconfParams)
	if !pg.Restart || pg.HugePages != "on" || pg.MaxConnections != 100 || pg.Limits.Min != 128 || !pg.Limits.Max.IsExpr() {
		t.Errorf("pgconf: %+v", pg)
	}
	oc := p.Policy["overcommit"].(*overcommitParams)
	if oc.Memory != 2 || oc.Ratio != 0.8 || oc.Kbytes.IsSet() {
		t.Errorf("empty section must be all defaults: %+v", oc)
	}
	p2 := pb.Plays[1]
	if p2.Name != "second" || p2.Hosts != "db9,eu" || len(p2.Policy) != 1 {
		t.Errorf("play 2: %+v", p2)
	}
	oc2 := p2.Policy["overcommit"].(*overcommitParams)
	if oc2.Ratio != 0.5 || oc2.Memory != 2 {
		t.Errorf("play 2 overcommit: %+v", oc2)
	}
	// The two plays got separate params values.
	if oc == oc2 {
		t.Error("params shared between plays")
	}

	// Values are bound to the file: evaluation errors point into it.
	s := expr.NewScope("other.yml")
	s.Set("facts", map[string]any{"mem_total": int64(16 << 30)})
	if n, err := s.Int64(hp.Pool); err != nil || n != 4<<30 {
		t.Errorf("pool: %d %v", n, err)
	}
	_, err = s.Int64(pg.SharedBuffers)
	if err == nil || err.Error() != `testdata/memory.yml:6:32: Unknown variable: There is no variable named "hugepages".` {
		t.Errorf("shared_buffers: %v", err)
	}
	_, err = s.Int64(oc2.Kbytes)
	if err == nil || err.Error() != `testdata/memory.yml:18:42: Unknown variable: There is no variable named "hugepages".` {
		t.Errorf("kbytes: %v", err)
	}
	s.Set("hugepages", map[string]any{"pool": int64(4 << 30)})
	if n, err := s.Int64(oc2.Kbytes); err != nil || n != (12<<30)*8/10/1024+2<<20 {
		t.Errorf("kbytes: %d %v", n, err)
	}
}

func TestParseErrors(t *testing.T) {
	reg := testRegistry()
	tests := []struct {
		name, doc, err string
	}{
		{"unknown key", "- hosts: all\n  policy:\n    pgconf:\n      sharedbuffers: 1\n",
			`p.yml:4:7: unknown key "sharedbuffers" in pgconf`},
		{"nested unknown key", "- hosts: all\n  policy:\n    pgconf:\n      limits: {max: 1, maxx: 2}\n",
			`p.yml:4:24: unknown key "maxx" in pgconf.limits`},
		{"unknown module", "- hosts: all\n  policy:\n    hugepage: {}\n",
			`p.yml:3:5: unknown module "hugepage" (known: hugepages, overcommit, pgconf)`},
		{"wrong type", "- hosts: all\n  policy:\n    pgconf:\n      max_connections: lots\n",
			`p.yml:4:24: key "max_connections" in pgconf: expected an integer, got "lots"`},
		{"wrong bool", "- hosts: all\n  policy:\n    pgconf:\n      restart: maybe\n",
			`p.yml:4:16: key "restart" in pgconf: expected a boolean (true or false), got "maybe"`},
		{"list for string", "- hosts: all\n  policy:\n    pgconf:\n      huge_pages: [on]\n",
			`p.yml:4:19: key "huge_pages" in pgconf: expected a string, got a list`},
		{"mapping for expr", "- hosts: all\n  policy:\n    hugepages:\n      pool: {a: 1}\n",
			`p.yml:4:13: key "pool" in hugepages: expected a value or a ${...} expression, got a mapping`},
		{"scalar for section", "- hosts: all\n  policy:\n    overcommit: 2\n",
			`p.yml:3:17: overcommit: expected a mapping, got "2"`},
		{"list element", "- hosts: all\n  policy:\n    pgconf:\n      files: [a, {b: c}]\n",
			`p.yml:4:18: key "files[1]" in pgconf: expected a string, got a mapping`},
		{"bad expression", "- hosts: all\n  policy:\n    hugepages:\n      pool: \"${floor(facts.mem_total *)}\"\n",
			`p.yml:4:39: key "pool" in hugepages: Invalid expression: Expected the start of an expression, but found an invalid expression token.`},
		{"several errors", "- hosts: all\n  policy:\n    pgconf:\n      restart: maybe\n      sharedbuffers: 1\n    overcommit:\n      ratio: high\n",
			"p.yml:4:16: key \"restart\" in pgconf: expected a boolean (true or false), got \"maybe\"\n" +
				"p.yml:5:7: unknown key \"sharedbuffers\" in pgconf\n" +
				"p.yml:7:14: key \"ratio\" in overcommit: expected a number, got \"high\""},
		{"no hosts", "- name: x\n  policy:\n    pgconf: {}\n", `p.yml:1:3: play "x" has no hosts: (a group, host or pattern such as "all")`},
		{"empty hosts", "- hosts: ''\n  policy:\n    pgconf: {}\n", `p.yml:1:10: play 1: hosts is empty (a group, host or pattern such as "all")`},
		{"no policy", "- hosts: all\n", "p.yml:1:3: play 1 has no policy: (sections: hugepages, overcommit, pgconf)"},
		{"empty policy", "- hosts: all\n  policy:\n", "p.yml:2:10: play 1: policy is empty (sections: hugepages, overcommit, pgconf)"},
		{"unknown play key", "- hosts: all\n  become: true\n  policy: {pgconf: }\n", `p.yml:2:3: unknown key "become" in play (known: hosts, name, policy, serial, max_fail_percentage, any_errors_fatal, pause_between_batches)`},
		{"not a list", "hosts: all\npolicy: {}\n", `p.yml:1:1: a playbook is a list of plays (start each play with "- "), not a mapping`},
		{"empty", "# nothing\n", "p.yml: playbook is empty (expected a list of plays: - hosts: ... policy: ...)"},
		{"no plays", "[]\n", "p.yml:1:1: playbook has no plays"},
		{"play not a mapping", "- all\n", `p.yml:1:3: play 1 must be a mapping (name:, hosts:, policy:), not "all"`},
		{"malformed", "- hosts: all\n  policy:\n   pgconf: {}\n    x: 1\n", "p.yml:4: did not find expected key"},
		{"duplicate module", "- hosts: all\n  policy:\n    pgconf: {}\n    pgconf: {}\n", `p.yml:4:5: key "pgconf" is already defined at line 3`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("p.yml", []byte(tt.doc), reg)
			if err == nil || err.Error() != tt.err {
				t.Fatalf("error\n got: %v\nwant: %s", err, tt.err)
			}
			var pe *expr.PosError
			if !errors.As(err, &pe) || pe.File != "p.yml" {
				t.Errorf("not a positioned error: %#v", err)
			}
		})
	}
}

func TestRegistryChecked(t *testing.T) {
	_, err := Parse("p.yml", []byte("- hosts: all\n  policy: {x: }\n"), Registry{"x": func() any { return 5 }})
	if err == nil || !strings.Contains(err.Error(), `module "x": params must be a pointer to a struct`) {
		t.Errorf("got %v", err)
	}
}

func TestAnchorsInParams(t *testing.T) {
	doc := "- hosts: a\n  policy:\n    overcommit: &oc\n      ratio: 0.5\n- hosts: b\n  policy:\n    overcommit: *oc\n"
	pb, err := Parse("p.yml", []byte(doc), testRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if r := pb.Plays[1].Policy["overcommit"].(*overcommitParams).Ratio; r != 0.5 {
		t.Errorf("ratio %v", r)
	}
}
