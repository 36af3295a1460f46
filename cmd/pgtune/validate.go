package main

import (
	"fmt"

	"github.com/pgtune/pgtune/engine"
)

// runValidate loads the inventory and playbook, resolves every play's
// hosts and checks every module's params (types, bounds, the names,
// functions and types expressions use; vars against the inventory's
// hosts when one is named), touching no host: a pre-commit check for policy
// repositories.
func (a *App) runValidate(o *options) int {
	l, mods, err := a.load(o)
	if err != nil {
		return a.fail(err)
	}
	if err := a.runner(o, mods).Validate(l.inv, l.book, l.hosts); err != nil {
		return a.fail(err)
	}
	// With an inventory named (-i, ansible.cfg, ANSIBLE_INVENTORY), a var
	// no selected host defines is an error; without, vars are unknown.
	var hosts *engine.PolicyHosts
	if o.inventory != "" {
		if hosts, err = engine.InventoryHosts(l.inv, l.book, l.hosts); err != nil {
			return a.fail(err)
		}
	}
	if err := engine.ValidatePolicyOn(l.book, mods, hosts); err != nil {
		// One line per problem, each with its file:line:col.
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				a.fail(e)
			}
			return 1
		}
		return a.fail(err)
	}
	name := l.book.File
	fmt.Fprintf(a.Stdout, "%s: %d play(s), %d host(s): ok\n", name, len(l.book.Plays), len(l.hosts))
	return 0
}
