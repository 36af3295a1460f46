package pgconf

import (
	"context"
	"testing"

	"github.com/pgtune/pgtune/engine/facts"
)

// TestValidate: params that need no host are refused without one, and
// Check refuses them the same way whether or not the host has a cluster.
func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		set  func(*Params)
		err  string
	}{
		{"on_override", func(p *Params) { p.OnOverride = mustParse("ignore") }, `t.yml:1:1: on_override: "ignore" is not fail or fix`},
		{"restart in words", func(p *Params) { p.Restart = mustParse("sometimes") }, `restart: t.yml:1:1: "sometimes" is not a boolean`},
		{"dropin", func(p *Params) { p.Dropin = mustParse("conf.d/x.txt") },
			`t.yml:1:1: dropin "conf.d/x.txt": the file name must end in .conf and not start with a dot`},
		{"negative pool", func(p *Params) { p.Pool = mustParse("${-2 * GiB}") }, "t.yml:1:1: pool: -2147483648 is not a positive size"},
		{"switchover_timeout not a duration", func(p *Params) { p.SwitchoverTimeout = mustParse("soon") },
			`t.yml:1:1: switchover_timeout: "soon" is not a duration (30s, 2m) or a number of seconds`},
		{"switchover_timeout too short", func(p *Params) { p.SwitchoverTimeout = mustParse("500ms") },
			"t.yml:1:1: switchover_timeout: 500ms is not between 1s and 1h0m0s"},
		{"switchover_timeout too long", func(p *Params) { p.SwitchoverTimeout = mustParse("2h") },
			"t.yml:1:1: switchover_timeout: 2h0m0s is not between 1s and 1h0m0s"},
		{"switchover_timeout fraction", func(p *Params) { p.SwitchoverTimeout = mustParse("2.5") },
			"t.yml:1:1: switchover_timeout: 2.5s is not a whole number of seconds"},
		{"switchover_timeout in seconds", func(p *Params) { p.SwitchoverTimeout = mustParse("${3 * 60}") }, ""},
		{"fine, host values left for Check", func(p *Params) { p.Pool = mustParse("${hugepages.pool}") }, ""},
	}
	pg := &facts.Postgres{Major: 15, DataDir: "/d", Owner: "postgres", ConfigFile: "/d/postgresql.conf"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New()
			p := m.NewParams().(*Params)
			tc.set(p)
			err := m.Validate(p)
			if got := errText(err); got != tc.err {
				t.Fatalf("Validate: %s\nwant %s", got, tc.err)
			}
			if tc.err == "" {
				return
			}
			for _, tg := range []*struct {
				name string
				pg   *facts.Postgres
			}{{"no cluster", nil}, {"a cluster", pg}} {
				_, err := m.Check(context.Background(), unitTarget(tg.pg, ""), p)
				if got := errText(err); got != tc.err {
					t.Errorf("%s: Check: %s\nwant %s", tg.name, got, tc.err)
				}
			}
		})
	}
	if err := New().Validate(New().NewParams()); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
