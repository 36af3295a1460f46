package pgconf

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
)

// Patroni-managed members. Patroni regenerates the postgresql.conf it
// starts the server with (a first line including postgresql.base.conf or
// custom_conf, then its own parameters, which therefore win over anything
// included), passes a few cluster-wide settings on the command line
// (max_connections and the like; not the ones pgtune manages), and builds
// its parameters from the DCS's postgresql.parameters overlaid with the
// member's own patroni.yml postgresql.parameters: the local file wins,
// per member. That is where pgtune writes shared_buffers, huge_pages and
// huge_page_size (each member's shared_buffers follows its own pool), and
// then has Patroni take them: POST /reload (Patroni rewrites
// postgresql.conf and marks the restart pending), POST /restart with
// restart_pending (Patroni stops and starts the server itself, holding
// its leader lock on a primary). pgtune never runs pg_ctl or systemd on a
// Patroni member. Only postgresql.auto.conf (ALTER SYSTEM) beats those
// parameters: such a setting is a finding apply refuses on.

// PatroniState is the Patroni side of a member's plan: the parameters to
// set in its patroni.yml and how to restart it. It holds no credentials
// and no file content (patroni.yml holds passwords): Apply reads the
// file again.
type PatroniState struct {
	Scope, Member, Role string
	ConfigFile          string
	APIURL              string
	TLS                 *facts.PatroniTLS // how its HTTPS is checked (nil: plain HTTP)
	// Set are the postgresql.parameters pgtune writes; Before what the
	// file had for them ("" when unset).
	Set, Before map[string]string
	// Switchover: the primary hands its role to a standby already on the
	// new values before it restarts (primary: switchover).
	Switchover bool
}

// patroniRefusal plans nothing for a Patroni member pgtune cannot work
// with safely (paused cluster, unreadable REST API), and refuses apply
// with the reason; nil when the member can be worked on.
func patroniRefusal(pg *facts.Postgres, topo *facts.Topology) *plan.ModulePlan {
	if topo == nil || topo.Patroni == nil {
		return nil
	}
	pat := topo.Patroni
	who := describePatroniMember(pat)
	var why string
	switch {
	case pat.Paused:
		// Paused, Patroni neither restarts nor fails over on its own;
		// pgtune does not either: a restart would be pgtune's alone to
		// watch, without the leader lock's protection.
		why = "Patroni is paused (maintenance mode) on this cluster: pgtune refuses to change or restart its members while paused; resume it (patronictl resume) and run again"
	case pat.APIURL == "" || pat.APIError != "":
		why = "Patroni's REST API cannot be used (" + orUnknown(pat.APIError) + "): pgtune changes and restarts Patroni members only through it"
	case pat.ConfigFile == "":
		why = "Patroni's config file is unknown: pgtune writes a member's settings there"
	default:
		return nil
	}
	p := &plan.ModulePlan{Module: Name}
	p.Add(plan.Change{Kind: plan.KindAction, Target: "Patroni-managed member " + who,
		Before: "shared_buffers and huge_pages as Patroni sets them",
		After:  "left alone: " + why})
	p.Note(fmt.Sprintf("managed by Patroni (%s, role %s): %s", who, topo.Role, why))
	if pat.PendingRestart {
		p.Note("Patroni reports a restart pending on this member")
	}
	p.Refuse = fmt.Errorf("managed by Patroni (%s): %s (data directory %s)", who, why, pg.DataDir)
	return p
}

// checkPatroni is Check for a Patroni member: the planned configuration is
// Patroni's postgresql.conf with the new parameters, sized as Patroni
// starts the server (its command-line settings included); the change is
// to the member's patroni.yml, the restart through its REST API.
func (c *checkRun) checkPatroni(ctx context.Context, t *engine.Target, p *plan.ModulePlan) error {
	pg, pat := c.pg, t.Facts.Topology.Patroni
	doc, local, err := readPatroniConfig(ctx, t, pat.ConfigFile, pg.Owner)
	if err != nil {
		return err
	}
	api := patroniAPI{URL: pat.APIURL, Auth: local.Auth, Owner: pg.Owner, Member: pat.Name, TLS: pat.TLS}
	if note := insecureNote(pat); note != "" {
		p.Note(note)
	}
	c.dropin = pg.ConfigFile // ours are Patroni's lines: later ones override
	if err := c.readConfiguration(ctx, t); err != nil {
		return err
	}
	c.renderPatroni(placeholder)
	c.overrides = findOverrides(c.pw, c.dropin)
	fit, err := c.size(ctx, t, c.hp)
	if err != nil {
		return err
	}
	set := patroniParams(fit.SharedBuffers, c.hps)
	if _, err := setPatroniParams(doc, set); err != nil {
		return fmt.Errorf("Patroni's config %s: %w", pat.ConfigFile, err)
	}
	ps := &PatroniState{Scope: pat.Scope, Member: pat.Name, Role: t.Facts.Topology.Role, ConfigFile: pat.ConfigFile,
		APIURL: pat.APIURL, TLS: pat.TLS, Set: set, Before: map[string]string{}}
	for k := range set {
		ps.Before[k] = local.Params[k]
	}
	dcs, err := api.dcsParams(ctx, t)
	if err != nil {
		p.Note("Patroni's cluster-wide configuration (GET /config) not read: " + err.Error())
	}
	for _, k := range sortedKeys(dcs) {
		// A finding: the DCS value is what this member would run with
		// but for its patroni.yml.
		p.Note(fmt.Sprintf("Patroni's DCS (GET %s/config, postgresql.parameters) sets %s = %s for the whole cluster; %s's postgresql.parameters overrides it on this member",
			pat.APIURL, k, dcs[k], pat.ConfigFile))
	}
	if pat.PendingRestart {
		p.Note("Patroni reports a restart pending on this member (GET /patroni pending_restart)")
	}
	if err := c.planPatroni(ctx, t, p, fit, ps); err != nil {
		return err
	}
	if st, _ := p.State.(*State); st != nil && st.Restart && ps.Switchover {
		// What makes the switchover impossible whatever the replicas'
		// restarts do is refused now, before any member is touched.
		if _, raw, err := api.cluster(ctx, t); err != nil {
			p.Note("primary: switchover: Patroni's members not read (GET /cluster): " + err.Error())
		} else if why := switchoverImpossible(raw, pat.Name); why != "" {
			p.Note("primary: switchover refused: " + why)
			p.Refuse = fmt.Errorf("%s: primary: switchover refused before any member of the cluster is touched: %s", ps.where(), why)
		}
	}
	return nil
}

// insecureNote is the plan's finding when patroni.yml turns the REST
// API's certificate check off (ctl.insecure: true), "" otherwise.
func insecureNote(pat *facts.Patroni) string {
	if pat.TLS == nil || !pat.TLS.Insecure {
		return ""
	}
	return fmt.Sprintf("%s sets ctl.insecure: true: pgtune calls this member's REST API (%s) without checking its certificate, as patronictl does", pat.ConfigFile, pat.APIURL)
}

// renderPatroni makes the planned configuration: Patroni's postgresql.conf
// with the managed parameters as Patroni will write them, and the
// server's command-line settings (postmaster.opts: Patroni passes
// max_connections and the like there) after everything, where they win
// as on the command line, so that postgres -C sizes what Patroni starts.
func (c *checkRun) renderPatroni(sharedBuffers int64) {
	planned := c.fs.clone()
	planned.put(c.pg.ConfigFile, setConfLines(c.main.Content, patroniParams(sharedBuffers, c.hps)))
	auto := planned.Files[c.autoConf]
	var content []byte
	if auto != nil && auto.Exists {
		content = append(content, auto.Content...)
	}
	if opts := commandLineSettings(c.fs.Files[c.optsFile]); opts != "" {
		content = append(appendLine(content, "# the server's command line (postmaster.opts), as Patroni starts it"), opts...)
		planned.put(c.autoConf, content)
	}
	c.planned = planned
	c.pw, _ = walkConfig(planned, c.pg.ConfigFile, c.autoConf)
}

// patroniParams are the managed parameters as patroni.yml holds them.
func patroniParams(sharedBuffers int64, hps string) map[string]string {
	return map[string]string{
		"huge_pages":     "on",
		"huge_page_size": hps,
		"shared_buffers": strconv.FormatInt(sharedBuffers/1024, 10) + "kB",
	}
}

// setConfLines sets each name = value in a postgresql.conf as Patroni
// writes it: an existing line is replaced, a missing one appended.
func setConfLines(content []byte, set map[string]string) []byte {
	lines := strings.Split(strings.TrimRight(string(content), "\n"), "\n")
	done := map[string]bool{}
	for i, l := range lines {
		name, _, ok := strings.Cut(strings.TrimSpace(l), "=")
		name = strings.ToLower(strings.TrimSpace(name))
		if v, want := set[name]; ok && want {
			lines[i] = name + " = " + quoteConf(v)
			done[name] = true
		}
	}
	for _, k := range sortedKeys(set) {
		if !done[k] {
			lines = append(lines, k+" = "+quoteConf(set[k]))
		}
	}
	return []byte(strings.Join(lines, "\n") + "\n")
}

// commandLineSettings renders postmaster.opts' --name=value and -c
// name=value arguments as configuration lines.
func commandLineSettings(f *confFile) string {
	if f == nil || !f.Exists {
		return ""
	}
	args := splitOpts(strings.TrimSpace(string(f.Content)))
	var b strings.Builder
	for i := 1; i < len(args); i++ {
		a, kv := args[i], ""
		switch {
		case a == "-c" && i+1 < len(args):
			kv = args[i+1]
			i++
		case strings.HasPrefix(a, "--") && strings.Contains(a, "="):
			kv = a[2:]
		default:
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		k = strings.ToLower(strings.ReplaceAll(k, "-", "_"))
		if k == "config_file" || k == "" {
			continue
		}
		fmt.Fprintf(&b, "%s = %s\n", k, quoteConf(v))
	}
	return b.String()
}

// planPatroni fills p for a Patroni member: the patroni.yml parameters,
// the blocking overrides, and the restart through Patroni.
func (c *checkRun) planPatroni(ctx context.Context, t *engine.Target, p *plan.ModulePlan, fit sizing, ps *PatroniState) error {
	pg, s := c.pg, c.s
	st := &State{PG: pg, Dropin: c.dropin, OnOverride: "fail", Overrides: c.overrides, HugePageSize: c.hps,
		SharedBuffers: fit.SharedBuffers, SegmentMB: fit.SegmentMB, SegmentPages: fit.SegmentPages, Patroni: ps}
	p.State = st
	p.Outputs = map[string]any{"shared_buffers": fit.SharedBuffers, "segment": fit.SegmentMB * mib, "segment_pages": fit.SegmentPages}
	for _, o := range c.overrides {
		p.Add(plan.Change{Kind: plan.KindAction, Target: o.Entry.where(),
			Before: fmt.Sprintf("%s = %s", o.Entry.Name, o.Entry.Value),
			After:  "overrides Patroni's parameters on this member (ALTER SYSTEM?): reset it (ALTER SYSTEM RESET) before apply; pgtune does not edit it under Patroni"})
	}
	if !sameParams(ps.Before, ps.Set) {
		// Apply writes it only as the cluster owner's own file
		// (WriteOptions.OwnedBy): said now, not at apply.
		if err := patroniConfigOwned(ctx, t, ps.ConfigFile, pg.Owner); err != nil {
			return err
		}
		p.Add(plan.Change{Kind: plan.KindAction, Target: "Patroni local parameters: " + ps.ConfigFile + " postgresql.parameters",
			Before: describeParams(ps.Before), After: describeParams(ps.Set) + " (then POST " + ps.APIURL + "/reload)"})
	}
	var live map[string]string
	var err error
	if live, err = liveSettings(ctx, t, pg); err != nil {
		return err
	}
	if err := roomForShare(t.Facts, pg, live, s.pool, s.whole, fit.SegmentPages, c.hp); err != nil {
		return err
	}
	if err := primaryPolicy(t.Facts.Topology, &s, p); err != nil {
		return err
	}
	ps.Switchover = s.primary == primarySwitchover && replicatedPrimary(t.Facts.Topology) && s.restart
	before, differs := describeLiveFor(live, c.hps)
	after := fmt.Sprintf("shared_buffers=%s huge_pages=on huge_page_size=%s", formatSize(fit.SharedBuffers), c.hps)
	if differs(fit.SharedBuffers) {
		if s.restart {
			st.Restart = true
			how := "restart through Patroni (POST " + ps.APIURL + "/restart, restart_pending)"
			if ps.Switchover {
				how = "switch over through Patroni (POST " + ps.APIURL + "/switchover to a standby on the new values), then restart this member as a replica through Patroni"
			}
			p.Add(plan.Change{Kind: plan.KindRestart, Target: how, Before: before, After: after})
		} else {
			st.Pending = true
			p.Note(fmt.Sprintf("pending restart: the server runs with %s; %s takes effect at Patroni's next restart of this member (%s)", before, after, s.pendingReason()))
		}
	}
	p.Note(fmt.Sprintf("managed by Patroni (%s, role %s): settings go to its patroni.yml postgresql.parameters, restarts through its REST API",
		describePatroniMember(t.Facts.Topology.Patroni), ps.Role))
	p.Note(fmt.Sprintf("segment %d MB = %d huge pages of a %d-page pool (shared_buffers %s, %d probes)",
		fit.SegmentMB, fit.SegmentPages, fit.PoolPages, formatSize(fit.SharedBuffers), fit.Probes+1))
	return nil
}

// patroniConfigOwned says why pgtune will not write Patroni's config
// file: its path comes from a command line the cluster owner controls, so
// it is written only when it is a regular file of the owner's (stat of
// the file itself, not what a link at its place leads to).
func patroniConfigOwned(ctx context.Context, t *engine.Target, file, owner string) error {
	res, err := t.Run(ctx, "stat", "-c", "%F:%U", file)
	if err != nil {
		return fmt.Errorf("Patroni's config %s: %w", file, err)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != "regular file:"+owner {
		return fmt.Errorf("Patroni's config %s is %s, not a regular file of the cluster owner %s: pgtune writes it only then (its path comes from Patroni's command line, which the cluster owner controls); chown it to %s, or replace a link with the file",
			file, strconv.QuoteToASCII(got), owner, owner)
	}
	return nil
}

func sameParams(a, b map[string]string) bool {
	for k, v := range b {
		if !sameSetting(k, a[k], v) {
			return false
		}
	}
	return true
}

// describeParams renders parameters as "name=value …", sorted.
func describeParams(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		v := m[k]
		if v == "" {
			v = "(unset)"
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, " ")
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

var _ = path.Join
