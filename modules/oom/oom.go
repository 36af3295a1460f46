// Package oom keeps the OOM killer off the postmaster, as PostgreSQL's
// documentation on Linux memory overcommit recommends: the postmaster runs
// with oom_score_adj -1000, and its children reset themselves to 0 at fork
// (PG_OOM_ADJUST_FILE=/proc/self/oom_score_adj, PG_OOM_ADJUST_VALUE=0 in
// the postmaster's environment), so a runaway backend is what the killer
// picks and the postmaster survives to recover from it. A shield without
// the reset is worse than none: every backend would inherit it, and the
// killer would take anything but PostgreSQL.
//
// Where systemd runs the cluster (PID 1 is systemd and a unit's main
// process is the postmaster) a drop-in gives the unit the same at every
// start, and OOMPolicy=continue so that a backend's OOM kill does not
// stop the whole unit. Clusters pgtune starts itself (pg_ctl) get the
// same at every start it performs (ShieldStarted).
package oom

import (
	"fmt"

	"github.com/pgtune/pgtune/engine/expr"
)

// Name is the module's key in a playbook.
const Name = "oom"

const (
	// adjustFile is what every child of the postmaster writes its
	// adjustment to: its own.
	adjustFile = "/proc/self/oom_score_adj"
	// backendScoreAdj is what the children reset themselves to.
	backendScoreAdj = 0
	// dropinName is the systemd drop-in's file name.
	dropinName = "pgtune-oom.conf"
	// oomPolicy keeps the unit running when the kernel kills one of its
	// processes (a backend): the postmaster recovers by itself.
	oomPolicy = "continue"
)

// Params are the module's policy parameters.
type Params struct {
	// PostmasterScoreAdj is the postmaster's oom_score_adj, in [-1000,
	// 1000]; -1000 (the default) exempts it from the OOM killer.
	PostmasterScoreAdj expr.Value `yaml:"postmaster_score_adj"`
	// Systemd is auto (a drop-in for the unit that runs the cluster, when
	// systemd runs it) or off (never touch systemd).
	Systemd expr.Value `yaml:"systemd"`
}

// Module is the oom module.
type Module struct{}

// New returns the module.
func New() *Module { return &Module{} }

func (*Module) Name() string { return Name }

// Requires is empty: the shield needs nothing planned before it. pgconf
// requires oom instead, so that the drop-in and the start environment
// are in place before its restart, the one restart both need.
func (*Module) Requires() []string { return nil }

// Outputs declares what Check plans for expressions (oom.restart):
// names and types, for validate.
func (*Module) Outputs() map[string]any {
	return map[string]any{OutPostmasterAdj: int64(0), OutRestart: false}
}

func (*Module) NewParams() any {
	return &Params{PostmasterScoreAdj: expr.Literal(-1000), Systemd: expr.Literal("auto")}
}

type settings struct {
	postmasterAdj int
	systemd       bool
}

// Validate checks, without a host, every param that needs none.
func (m *Module) Validate(raw any) error {
	p, ok := raw.(*Params)
	if !ok {
		return fmt.Errorf("params: got %T", raw)
	}
	_, err := p.eval(expr.NewScope(""), true)
	return err
}

// eval evaluates and checks the params in sc; with static, values that
// need a host are skipped.
func (p *Params) eval(sc *expr.Scope, static bool) (settings, error) {
	var s settings
	if v := p.PostmasterScoreAdj; !static || v.Static() {
		n, err := sc.Int64(v)
		if err != nil {
			return s, fmt.Errorf("postmaster_score_adj: %w", err)
		}
		if n < -1000 || n > 1000 {
			return s, sc.Errorf(v, "postmaster_score_adj: %d is not in [-1000, 1000]", n)
		}
		s.postmasterAdj = int(n)
	}
	if v := p.Systemd; !static || v.Static() {
		mode, err := sc.String(v)
		if err != nil {
			return s, fmt.Errorf("systemd: %w", err)
		}
		if b, ok := expr.ParseBool(mode); ok && !b {
			mode = "off" // an inventory's unquoted off is false (YAML 1.1, as Ansible)
		}
		switch mode {
		case "auto":
			s.systemd = true
		case "off":
		default:
			return s, sc.Errorf(v, "systemd: %q is not auto or off", mode)
		}
	}
	return s, nil
}
