package pgconf

import (
	"fmt"
	"strconv"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
)

// patroniRefusal plans nothing for a server Patroni manages, and refuses
// apply with what pgconf would otherwise have done. Patroni regenerates
// the postgresql.conf it starts the server with (an include_dir appended
// there vanishes at its next rewrite, and its own settings win over a
// drop-in), and a restart behind its back with pg_ctl or systemd can make
// it fail over. Until settings and restarts go through Patroni itself,
// pgtune keeps its hands off; check says so and shows the member.
func patroniRefusal(pg *facts.Postgres, topo *facts.Topology, dropin string) *plan.ModulePlan {
	if topo == nil || topo.Patroni == nil {
		return nil
	}
	pat := topo.Patroni
	who := describePatroniMember(pat)
	p := &plan.ModulePlan{Module: Name}
	p.Add(plan.Change{Kind: plan.KindAction, Target: "Patroni-managed member " + who,
		Before: "shared_buffers and huge_pages as Patroni sets them",
		After:  "left alone: pgtune does not yet change Patroni-managed members"})
	p.Note(fmt.Sprintf("managed by Patroni (%s, role %s): pgtune would write %s, append include_dir to %s (which Patroni generates and overwrites) and restart PostgreSQL with pg_ctl behind Patroni's back; none of it is done",
		who, topo.Role, dropin, pg.ConfigFile))
	if pat.PendingRestart {
		p.Note("Patroni reports a restart pending on this member")
	}
	if pat.APIError != "" {
		p.Note("Patroni REST API: " + pat.APIError)
	}
	p.Refuse = fmt.Errorf("managed by Patroni (%s): refusing to write %s, to append include_dir to the postgresql.conf Patroni generates (%s) and to restart PostgreSQL behind Patroni's back; set these through Patroni until pgtune supports it",
		who, dropin, pg.ConfigFile)
	return p
}

// describePatroniMember names a member: scope, name and REST API.
func describePatroniMember(pat *facts.Patroni) string {
	s := "cluster " + orUnknown(pat.Scope) + ", member " + orUnknown(pat.Name)
	if pat.APIURL != "" {
		s += ", REST API " + pat.APIURL
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return strconv.Quote(s)
}
