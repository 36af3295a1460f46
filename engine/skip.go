package engine

import (
	"fmt"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/playbook"
)

// The default-targets rule: pgtune's policy is for PostgreSQL hosts. A
// host that a play reaches only through "all" (or "*") and on which no
// PostgreSQL cluster runs or is configured (no postmaster, no pg_data,
// nothing pg_lsclusters knows) is skipped: reported as such, left
// untouched. A play that names the host — by name, group, glob or regex,
// as a union or an intersection term (see inventory.Named) — works on it
// whatever it runs. So an HA inventory's etcd, HAProxy and backup hosts
// are left alone by `hosts: all` and tuned by `hosts: etcd`.

// namedHosts is every host some play names. Without an inventory (-i not
// given) the one host is this machine, chosen by the user: it is named.
func namedHosts(inv *inventory.Inventory, book *playbook.Playbook) (map[string]bool, error) {
	out := map[string]bool{}
	if inv.File == "" {
		for _, h := range inv.Hosts {
			out[h.Name] = true
		}
		return out, nil
	}
	for _, p := range book.Plays {
		hs, err := inv.Named(p.Hosts)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: play %q: hosts: %w", book.File, p.Line, p.Name, err)
		}
		for _, h := range hs {
			out[h.Name] = true
		}
	}
	return out, nil
}

// skipWithoutCluster marks hr skipped when the rule says so, after its
// facts are gathered: no cluster found (a discovery error means there is
// something to look at, so the host is not skipped) and no play names it.
func skipWithoutCluster(hr *hostRun) bool {
	if hr.named || hr.facts == nil || hr.facts.Postgres != nil || hr.facts.PostgresError != "" {
		return false
	}
	hr.skipped = true
	hr.steps = nil
	return true
}
