package main

import (
	"fmt"
)

// runValidate loads the inventory and playbook and resolves every play's
// hosts, touching no host: a pre-commit check for policy repositories.
func (a *App) runValidate(args []string) int {
	o, err := a.parse("validate", args, 1, nil)
	if err != nil {
		return a.usageError(err)
	}
	l, mods, err := a.load(o)
	if err != nil {
		return a.fail(err)
	}
	if err := a.runner(o, mods).Validate(l.inv, l.book, l.hosts); err != nil {
		return a.fail(err)
	}
	name := l.book.File
	fmt.Fprintf(a.Stdout, "%s: %d play(s), %d host(s): ok\n", name, len(l.book.Plays), len(l.hosts))
	return 0
}
