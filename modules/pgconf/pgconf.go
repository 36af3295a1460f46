// Package pgconf sizes shared_buffers so PostgreSQL's whole shared memory
// segment lands on the reserved huge page pool, pins huge_pages = 'on' in a
// conf.d drop-in, restarts the server and verifies the postmaster maps its
// segment on huge pages. If the server refuses to start with the new
// settings, the previous files are restored and the server started again:
// pgtune never leaves postgres down.
package pgconf

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/aymanbagabas/go-udiff"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/modules/oom"
)

// Name is the module's key in a playbook.
const Name = "pgconf"

// Params are the module's policy parameters.
type Params struct {
	// Pool is the huge page pool to fit the segment into, in bytes.
	// Default: the pool the hugepages module plans, else the pool the
	// kernel has now.
	Pool expr.Value `yaml:"pool"`
	// Restart restarts the server when its running values differ; false
	// reports "pending restart" instead.
	Restart expr.Value `yaml:"restart"`
	// OnOverride says what to do with settings that would override the
	// drop-in (postgresql.auto.conf, later includes): fail or fix
	// (comment them out, with a backup).
	OnOverride expr.Value `yaml:"on_override"`
	// Dropin is the drop-in file, relative to the directory of the active
	// postgresql.conf (or absolute).
	Dropin expr.Value `yaml:"dropin"`
	// Primary says how the primary of a replicated cluster (one with
	// standbys) takes the new values: restart (in place, after its
	// standbys), switchover or skip (left pending, and said so). See
	// primary.go.
	Primary expr.Value `yaml:"primary"`
	// SwitchoverTimeout bounds each wait of a plain streaming switchover
	// on the standby it promotes: to catch up, to replay the old
	// primary's shutdown checkpoint, to finish its promotion
	// (switchover.go). A duration ("60s", "2m") or seconds.
	SwitchoverTimeout expr.Value `yaml:"switchover_timeout"`
}

// Module is the pgconf module.
type Module struct{}

// New returns the module.
func New() *Module { return &Module{} }

func (*Module) Name() string       { return Name }
func (*Module) Requires() []string { return []string{"hugepages", "oom"} }

// Outputs declares what Check plans for expressions (pgconf.segment):
// names and types, for validate.
func (*Module) Outputs() map[string]any {
	return map[string]any{"shared_buffers": int64(0), "segment": int64(0), "segment_pages": int64(0)}
}

func (*Module) NewParams() any {
	return &Params{
		Restart:    expr.Literal(true),
		OnOverride: expr.Literal("fail"),
		Dropin:     expr.Literal(defaultDropin),
		Primary:    expr.Literal(primaryRestart),

		SwitchoverTimeout: expr.Literal(defaultSwitchoverTimeout),
	}
}

// defaultDropin is the drop-in's path when the play names none: relative
// to the directory of postgresql.conf.
const defaultDropin = "conf.d/002-hugepages.conf"

// FactSet has the gather read the configuration ahead, as readConfiguration
// first asks for it with the default drop-in (firstRead), as the cluster
// owner: a dry run's check then takes that answer instead of a session
// of its own. With another drop-in, or when the gather's guess of the
// configuration file is not the one discovery settles on, the request
// differs and the check reads in its own round trip, as before.
func (*Module) FactSet() facts.Set {
	return facts.Set{Name: Name, OwnerRuns: []facts.OwnerRun{{Script: readScript,
		Args: firstRead(facts.PMData, facts.PMConfig, facts.PMConfigDir, path.Join(facts.PMConfigDir, defaultDropin))}}}
}

// placeholder is the shared_buffers the drop-in holds while sizing.
const placeholder = 1 << 20

// maxBlockSize is PostgreSQL's largest build-time block size (BLCKSZ).
const maxBlockSize = 32 << 10

// managed are the settings the drop-in owns.
var managed = []string{"huge_pages", "huge_page_size", "shared_buffers"}

// fileChange is one file Apply writes.
type fileChange struct {
	Path    string
	Existed bool
	Before  []byte // previous content (the plan's diff; undo uses the journal's backup)
	After   []byte
	Mode    string // for a new file
	Owner   string // for a new file
}

// override is an assignment that would win over the drop-in.
type override struct {
	Entry entry
	// Fixable is false for the postmaster's command line, which no file
	// edit changes.
	Fixable bool
}

func (o override) String() string {
	return fmt.Sprintf("%s sets %s", o.Entry.where(), strings.TrimSpace(o.Entry.Text))
}

// State is what Check hands to Apply and Verify.
type State struct {
	PG         *facts.Postgres
	Dropin     string
	Files      []fileChange
	Overrides  []override
	OnOverride string
	Restart    bool // a restart is planned
	Pending    bool // a restart is needed but policy says not now
	// Desired values. HugePageSize is the huge_page_size setting: "0"
	// (the kernel's default) or the hugepages module's page_size in kB.
	HugePageSize  string
	SharedBuffers int64
	SegmentMB     int64
	SegmentPages  int64
	// Patroni is set for a Patroni-managed member (patroni.go): no files
	// but its patroni.yml, restarts through its REST API.
	Patroni *PatroniState
	// Switchover: this replicated primary's restart is a switchover to a
	// standby, after which it runs as that standby's standby
	// (switchover.go).
	Switchover bool `json:",omitempty"`
	// SwitchoverTimeout bounds the switchover's waits on the standby it
	// promotes, in seconds (switchover_timeout).
	SwitchoverTimeout int `json:",omitempty"`
}

type settings struct {
	pool       int64
	restart    bool
	onOverride string
	dropin     string
	primary    string
	// whole is the machine's whole pool when the play sets pool (which
	// may then be this cluster's share of it, see share.go).
	whole int64
	// skipPrimary: restart would be planned but this is a replicated
	// primary and the play says primary: skip.
	skipPrimary bool
	// plainSwitchover: a replicated primary without Patroni, and the play
	// says primary: switchover (switchover.go).
	plainSwitchover bool
	// switchoverTimeout is switchover_timeout in whole seconds.
	switchoverTimeout int
}

func (m *Module) params(t *engine.Target, raw any) (settings, error) {
	p, ok := raw.(*Params)
	if !ok {
		return settings{}, fmt.Errorf("params: got %T", raw)
	}
	s, err := p.eval(t.Scope, false)
	if err != nil {
		return s, err
	}
	whole := int64(0)
	if n, ok := t.Int64Output("hugepages", "pool"); ok {
		whole = n
	} else if t.Facts != nil {
		whole = t.Facts.HugePagesTotal * t.Facts.HugePageSize
	}
	if p.Pool.IsSet() {
		s.whole = whole // share.go
		return s, nil
	}
	s.pool = whole
	return s, nil
}

// Validate checks, without a host, every param that needs none (plain
// values, expressions over constants) against its type and bounds.
func (m *Module) Validate(raw any) error {
	p, ok := raw.(*Params)
	if !ok {
		return fmt.Errorf("params: got %T", raw)
	}
	_, err := p.eval(expr.NewScope(""), true)
	return err
}

// eval evaluates and checks the params in sc; with static, values that
// need a host are skipped. An unset pool stays 0 (params fills it in).
func (p *Params) eval(sc *expr.Scope, static bool) (settings, error) {
	skip := func(v expr.Value) bool { return static && !v.Static() }
	var s settings
	var err error
	if !skip(p.Restart) {
		if s.restart, err = sc.Bool(p.Restart); err != nil {
			return s, fmt.Errorf("restart: %w", err)
		}
	}
	if !skip(p.OnOverride) {
		if s.onOverride, err = sc.String(p.OnOverride); err != nil {
			return s, fmt.Errorf("on_override: %w", err)
		}
		if s.onOverride != "fail" && s.onOverride != "fix" {
			return s, sc.Errorf(p.OnOverride, "on_override: %q is not fail or fix", s.onOverride)
		}
	}
	if !skip(p.Dropin) {
		if s.dropin, err = sc.String(p.Dropin); err != nil {
			return s, fmt.Errorf("dropin: %w", err)
		}
		if err := checkDropin(s.dropin); err != nil {
			return s, sc.Errorf(p.Dropin, "%v", err)
		}
	}
	if !skip(p.Primary) {
		if s.primary, err = evalPrimary(sc, p.Primary); err != nil {
			return s, err
		}
	}
	if p.SwitchoverTimeout.IsSet() && !skip(p.SwitchoverTimeout) {
		if s.switchoverTimeout, err = evalSwitchoverTimeout(sc, p.SwitchoverTimeout); err != nil {
			return s, err
		}
	}
	if p.Pool.IsSet() && !skip(p.Pool) {
		if s.pool, err = sc.Int64(p.Pool); err != nil {
			return s, fmt.Errorf("pool: %w", err)
		}
		if s.pool <= 0 {
			return s, sc.Errorf(p.Pool, "pool: %d is not a positive size", s.pool)
		}
	}
	return s, nil
}

func checkDropin(d string) error {
	switch {
	case d == "":
		return fmt.Errorf("dropin: empty path")
	case strings.ContainsAny(d, "\n\r\x00'\\"):
		return fmt.Errorf("dropin %q: line breaks, quotes and backslashes are not allowed", d)
	case !strings.HasSuffix(d, ".conf") || strings.HasPrefix(path.Base(d), "."):
		// include_dir only reads *.conf files not starting with a dot.
		return fmt.Errorf("dropin %q: the file name must end in .conf and not start with a dot", d)
	}
	return nil
}

// Check plans the drop-in, the include line, override fixes and the
// restart. It leaves nothing behind on the host: the sizing runs in a
// scratch data directory that is removed before returning.
func (m *Module) Check(ctx context.Context, t *engine.Target, raw any) (*plan.ModulePlan, error) {
	// Bad params fail the same way on every host, before any fact is read.
	if err := m.Validate(raw); err != nil {
		return nil, err
	}
	p := &plan.ModulePlan{Module: Name}
	pg := t.Facts.Postgres
	if pg == nil {
		if t.Facts.PostgresError != "" {
			return nil, fmt.Errorf("find the cluster: %s", t.Facts.PostgresError)
		}
		p.Note("no PostgreSQL cluster found: shared_buffers left alone")
		return p, nil
	}
	if pg.Major < 15 {
		return nil, fmt.Errorf("PostgreSQL %d has no shared_memory_size; pgtune needs 15 or later (%s)", pg.Major, pg.DataDir)
	}
	s, err := m.params(t, raw)
	if err != nil {
		return nil, err
	}
	hp := t.Facts.HugePageSize
	if hp <= 0 {
		return nil, fmt.Errorf("the kernel reports no huge page size (Hugepagesize in /proc/meminfo)")
	}
	// The segment goes on the pages the hugepages module reserves: a size
	// other than the default is named in huge_page_size, and PostgreSQL
	// sizes shared_memory_size_in_huge_pages in it.
	hps := "0"
	if n, ok := t.Int64Output("hugepages", "page_size"); ok && n > 0 && n != hp {
		hp, hps = n, fmt.Sprintf("%dkB", n>>10)
	}
	if s.pool < hp {
		return nil, fmt.Errorf("no huge page pool to size shared_buffers against (pool %d bytes): reserve huge pages first (hugepages module) or set pool", s.pool)
	}
	if pg.Owner == "" {
		return nil, fmt.Errorf("cannot tell the owner of %s", pg.DataDir)
	}

	c := newCheckRun(pg, s)
	c.hp, c.hps = hp, hps
	// A Patroni-managed member: refused before anything is read when
	// Patroni cannot be worked with (paused, no REST API), else planned
	// through Patroni (patroni.go).
	if rp := patroniRefusal(pg, t.Facts.Topology); rp != nil {
		return rp, nil
	}
	if topo := t.Facts.Topology; topo != nil && topo.Patroni != nil {
		if err := c.checkPatroni(ctx, t, p); err != nil {
			return nil, err
		}
		return p, nil
	}
	if err := c.readConfiguration(ctx, t); err != nil {
		return nil, err
	}
	if err := c.renderDropin(ctx, t); err != nil {
		return nil, err
	}
	if err := c.findOverrides(); err != nil {
		return nil, err
	}
	fit, err := c.size(ctx, t, hp)
	if err != nil {
		return nil, err
	}
	if err := c.plan(ctx, t, p, fit); err != nil {
		return nil, err
	}
	m.noteLeftSlots(ctx, t, p) // slot_journal.go
	return p, nil
}

// checkRun is one Check on one cluster, step by step: read the cluster's
// configuration, render the drop-in into a planned copy of it, find the
// settings that would override the drop-in, size shared_buffers against
// the planned configuration, plan the changes.
type checkRun struct {
	pg *facts.Postgres
	s  settings
	// The configuration's files: the main file's directory, the drop-in,
	// postgresql.auto.conf and postmaster.opts.
	confDir, dropin, autoConf, optsFile string

	fs          *confFS   // the configuration as it is
	main        *confFile // its main file
	planned     *confFS   // as it will be
	pw          *walk     // the planned configuration, walked
	includeLine string    // appended to the main file ("" when not needed)
	overrides   []override
	// hp is the size of the pages the segment goes on; hps the
	// huge_page_size naming it ("0": the kernel's default).
	hp  int64
	hps string
	// live is the running server's settings, read in the sizing round
	// trip (liveErr: why not); liveAsked says they were asked.
	live      map[string]string
	liveErr   error
	liveAsked bool
}

func newCheckRun(pg *facts.Postgres, s settings) *checkRun {
	c := &checkRun{pg: pg, s: s, confDir: path.Dir(pg.ConfigFile)}
	c.dropin = s.dropin
	if !path.IsAbs(c.dropin) {
		c.dropin = path.Join(c.confDir, c.dropin)
	}
	c.dropin = path.Clean(c.dropin)
	c.autoConf = path.Join(pg.DataDir, autoConfName)
	c.optsFile = path.Join(pg.DataDir, optsName)
	return c
}

// readConfiguration snapshots the configuration: the main file, auto.conf,
// the drop-in and its directory, then whatever the includes reach.
func (c *checkRun) readConfiguration(ctx context.Context, t *engine.Target) error {
	pg := c.pg
	c.fs = newConfFS()
	args := firstRead(pg.DataDir, pg.ConfigFile, c.confDir, c.dropin)
	for round := 0; ; round++ {
		if err := readArgs(ctx, t, pg, c.fs, args); err != nil {
			return err
		}
		cur, err := walkConfig(c.fs, pg.ConfigFile, c.autoConf)
		if err != nil {
			return err
		}
		if len(cur.Missing) == 0 {
			break
		}
		if round > maxDepth {
			return fmt.Errorf("configuration includes do not settle after %d rounds", round)
		}
		args = readRequest(pg, cur.Missing)
	}
	c.main = c.fs.Files[pg.ConfigFile]
	if !c.main.Exists {
		return fmt.Errorf("config file %s does not exist", pg.ConfigFile)
	}
	return nil
}

// renderDropin makes the planned files, with a placeholder shared_buffers
// (valid, so the server accepts the file): sizing runs with
// shared_buffers on the command line, which beats every file. When the
// configuration does not read the drop-in, the main file includes it.
func (c *checkRun) renderDropin(ctx context.Context, t *engine.Target) error {
	pg, dropin := c.pg, c.dropin
	planned := c.fs.clone()
	planned.put(dropin, dropinFor(placeholder, c.hps))
	pw, err := walkConfig(planned, pg.ConfigFile, c.autoConf)
	if err != nil {
		return err
	}
	if !pw.reads(dropin) {
		c.includeLine = includeDirective(c.confDir, dropin)
		planned.put(pg.ConfigFile, appendLine(c.main.Content, c.includeLine))
		if pw, err = walkConfig(planned, pg.ConfigFile, c.autoConf); err != nil {
			return err
		}
		if len(pw.Missing) > 0 {
			if err := readInto(ctx, t, pg, c.fs, pw.Missing); err != nil {
				return err
			}
			for _, k := range pw.Missing {
				if k[0] == 'd' {
					planned.Dirs[k[2:]] = c.fs.Dirs[k[2:]]
				} else {
					planned.Files[k[2:]] = c.fs.Files[k[2:]]
				}
			}
			planned.put(dropin, dropinFor(placeholder, c.hps))
			if pw, err = walkConfig(planned, pg.ConfigFile, c.autoConf); err != nil {
				return err
			}
		}
		if !pw.reads(dropin) {
			return fmt.Errorf("%s would not be read even with %q in %s", dropin, c.includeLine, pg.ConfigFile)
		}
	}
	c.planned, c.pw = planned, pw
	return nil
}

// findOverrides finds the settings after the drop-in that would win over
// it, and with on_override: fix comments them out in the planned files.
func (c *checkRun) findOverrides() error {
	c.overrides = findOverrides(c.pw, c.dropin)
	c.overrides = append(c.overrides, commandLineOverrides(c.fs.Files[c.optsFile], c.optsFile, c.pg.Running)...)
	if c.s.onOverride != "fix" {
		return nil
	}
	for _, o := range c.overrides {
		if !o.Fixable {
			continue
		}
		f := c.planned.Files[o.Entry.File]
		content, err := commentOut(f.Content, o.Entry.Line, "disabled by pgtune: it overrode "+displayPath(c.confDir, c.dropin))
		if err != nil {
			return fmt.Errorf("%s: %w", o.Entry.where(), err)
		}
		c.planned.put(o.Entry.File, content)
	}
	return nil
}

// size fits shared_buffers to the pool against the planned configuration
// in a scratch data directory, and checks that the planned files make the
// server read the drop-in's values, as postgres itself says: they must be
// ours unless a known override (not fixed) wins.
func (c *checkRun) size(ctx context.Context, t *engine.Target, hp int64) (sizing, error) {
	pg, s := c.pg, c.s
	pw, err := walkConfig(c.planned, pg.ConfigFile, c.autoConf)
	if err != nil {
		return sizing{}, err
	}
	archive, err := scratchArchive(c.planned, pw, c.autoConf)
	if err != nil {
		return sizing{}, err
	}
	// One round trip: the running server's settings, pass 1 (the segment
	// at shared_buffers = the pool), the drop-in's values as postgres
	// reads them, and pass 2 (fitPool's first candidate, computed and
	// probed on the host). Only a candidate that misses the pool costs
	// another trip.
	poolBytes := roundDown(s.pool, hp)
	qs := []query{{Name: "shared_memory_size", SharedBuffers: poolBytes},
		{Name: "shared_buffers"}, {Name: "huge_pages"}, {Name: "huge_page_size"}}
	if !pg.Running {
		qs = append(qs, query{Name: "block_size"})
	}
	args := sizeArgs{hps: c.hps, pool: poolBytes, live: pg.Running, hugePage: hp, queries: qs}
	known, knownBlock := c.knownLive(t)
	if known != nil {
		args.live, args.block = false, knownBlock
	}
	ans, err := sizeOnHost(ctx, t, pg, archive, args)
	if err != nil {
		return sizing{}, err
	}
	c.live, c.liveErr, c.liveAsked = ans.live, ans.liveErr, pg.Running
	if known != nil {
		c.live, c.liveErr = known, nil
	}
	first := ans.values
	blockText := ""
	if pg.Running {
		if c.liveErr != nil {
			return sizing{}, c.liveErr
		}
		blockText = c.live["block_size"]
	} else {
		blockText = first[4]
	}
	segAtPool, err := facts.ParseInt("postgres -C shared_memory_size", first[0], 0, facts.MaxBytes/mib)
	if err != nil {
		return sizing{}, err
	}
	block, err := facts.ParseInt("block_size", blockText, 1, maxBlockSize)
	if err != nil {
		return sizing{}, err
	}
	fit, err := fitPool(ctx, s.pool, hp, block, segAtPool, func(ctx context.Context, sb int64) (int64, int64, error) {
		if ans.cand.sb == sb {
			return ans.cand.mb, ans.cand.pages, nil // probed in the first trip
		}
		v, err := sizeOnHost(ctx, t, pg, archive, sizeArgs{hps: c.hps, hugePage: hp, queries: []query{
			{Name: "shared_memory_size", SharedBuffers: sb}, {Name: pagesQuery, SharedBuffers: sb}}})
		if err != nil {
			return 0, 0, err
		}
		mb, err := facts.ParseInt("postgres -C shared_memory_size", v.values[0], 0, facts.MaxBytes/mib)
		if err != nil {
			return 0, 0, err
		}
		pages, err := facts.ParseInt("postgres -C shared_memory_size_in_huge_pages", v.values[1], -1, facts.MaxPages)
		if err != nil {
			return 0, 0, err
		}
		return mb, pages, nil
	})
	if err != nil {
		return sizing{}, err
	}
	got := map[string]string{"shared_buffers": first[1], "huge_pages": first[2], "huge_page_size": first[3]}
	for _, name := range managed {
		var same bool
		switch name {
		case "shared_buffers":
			n, err := parseSize(got[name], block)
			same = err == nil && n == placeholder
		case "huge_pages":
			same = sameSetting(name, got[name], "on")
		case "huge_page_size":
			same = sameSetting(name, got[name], c.hps)
		}
		if same || overridden(c.overrides, name, s.onOverride) {
			continue
		}
		return sizing{}, fmt.Errorf("postgres -C %s on the planned configuration answers %q, not the drop-in's value: something overrides %s that pgtune could not locate",
			name, got[name], c.dropin)
	}
	return fit, nil
}

// knownLive is the running server's settings as the topology query read
// them, with its block size: a dry-run check (no journal) takes them
// from there instead of starting psql again. An apply's re-check asks
// afresh: its facts may be as old as the plan it was shown. nil when not
// known for this very postmaster.
func (c *checkRun) knownLive(t *engine.Target) (map[string]string, int64) {
	topo := t.Facts.Topology
	if t.Journal != nil || !c.pg.Running || topo == nil || topo.Settings == nil || t.Facts.Postgres != c.pg {
		return nil, 0
	}
	if topo.Settings["shared_buffers"] == "" {
		return nil, 0
	}
	block, err := facts.ParseInt("block_size", topo.Settings["block_size"], 1, maxBlockSize)
	if err != nil {
		return nil, 0
	}
	return maps.Clone(topo.Settings), block
}

// liveSettings is the running server's settings, as the sizing round
// trip read them: asked once per check.
func (c *checkRun) liveSettings(ctx context.Context, t *engine.Target) (map[string]string, error) {
	if c.liveAsked {
		return c.live, c.liveErr
	}
	return liveSettings(ctx, t, c.pg)
}

// plan fills p: the state and outputs, the changes (files first, in the
// order Apply writes them), and whether the running server needs a
// restart to take the values.
func (c *checkRun) plan(ctx context.Context, t *engine.Target, p *plan.ModulePlan, fit sizing) error {
	pg, s, dropin := c.pg, c.s, c.dropin
	st := &State{PG: pg, Dropin: dropin, OnOverride: s.onOverride, Overrides: c.overrides, HugePageSize: c.hps,
		SharedBuffers: fit.SharedBuffers, SegmentMB: fit.SegmentMB, SegmentPages: fit.SegmentPages}
	p.State = st
	p.Outputs = map[string]any{
		"shared_buffers": fit.SharedBuffers,
		"segment":        fit.SegmentMB * mib,
		"segment_pages":  fit.SegmentPages,
	}
	c.planned.put(dropin, dropinFor(fit.SharedBuffers, c.hps))
	for _, o := range c.overrides {
		if s.onOverride == "fail" || !o.Fixable {
			p.Add(plan.Change{Kind: plan.KindAction, Target: o.Entry.where(),
				Before: fmt.Sprintf("%s = %s", o.Entry.Name, o.Entry.Value),
				After:  overrideAfter(o, s.onOverride, displayPath(c.confDir, dropin))})
		}
	}
	c.planFiles(p, st)
	return c.planRestart(ctx, t, p, st, fit)
}

// planFiles adds the files to write: those whose overrides are commented
// out, the main file when it must include the drop-in, the drop-in.
func (c *checkRun) planFiles(p *plan.ModulePlan, st *State) {
	var files []string
	if c.s.onOverride == "fix" {
		for _, o := range c.overrides {
			if o.Fixable && !slices.Contains(files, o.Entry.File) {
				files = append(files, o.Entry.File)
			}
		}
	}
	if c.includeLine != "" && !slices.Contains(files, c.pg.ConfigFile) {
		files = append(files, c.pg.ConfigFile)
	}
	files = append(files, c.dropin)
	owner := c.pg.Owner + ":"
	for _, f := range files {
		before := c.fs.Files[f]
		after := c.planned.Files[f].Content
		if before != nil && before.Exists && string(before.Content) == string(after) {
			continue
		}
		fc := fileChange{Path: c.fs.target(f), After: after}
		if before != nil && before.Exists {
			fc.Existed, fc.Before = true, before.Content
		} else {
			fc.Mode, fc.Owner = newFileMode(c.main.Mode), owner
		}
		st.Files = append(st.Files, fc)
		p.Add(plan.Change{Kind: plan.KindFile, Target: fc.Path, Before: string(fc.Before), After: string(after),
			Diff: udiff.Unified(diffLabel(fc.Path, fc.Existed, "a"), diffLabel(fc.Path, true, "b"), string(fc.Before), string(after))})
	}
}

// planRestart decides whether the running server must restart to take
// the values (or notes a pending restart), after checking the pool has
// room for the new segment.
func (c *checkRun) planRestart(ctx context.Context, t *engine.Target, p *plan.ModulePlan, st *State, fit sizing) error {
	pg, s := c.pg, c.s
	after := fmt.Sprintf("shared_buffers=%s huge_pages=on huge_page_size=%s", formatSize(fit.SharedBuffers), c.hps)
	var live map[string]string
	if pg.Running {
		var err error
		if live, err = c.liveSettings(ctx, t); err != nil {
			return err
		}
	}
	if err := roomForShare(t.Facts, pg, live, s.pool, s.whole, fit.SegmentPages, c.hp); err != nil {
		return err
	}
	if err := primaryPolicy(t.Facts.Topology, &s, p); err != nil {
		return err
	}
	if pg.Running {
		before, differs := describeLiveFor(live, c.hps)
		if differs(fit.SharedBuffers) || oom.NeedsRestart(t) {
			after = withOOMShield(t, after) // oomshield.go
			if s.restart {
				st.Restart = true
				// Checked once the whole cluster is planned (CheckCluster).
				st.Switchover = s.plainSwitchover
				if st.Switchover {
					st.SwitchoverTimeout = s.switchoverTimeout
				}
				p.Add(plan.Change{Kind: plan.KindRestart, Target: "restart postgresql", Before: before, After: after})
			} else {
				st.Pending = true
				p.Note(fmt.Sprintf("pending restart: the server runs with %s; %s takes effect at the next restart (%s)", before, after, s.pendingReason()))
			}
		}
	} else {
		p.Note(fmt.Sprintf("PostgreSQL is not running: %s takes effect when it starts", after))
		if _, left, err := t.ReadFile(ctx, restartMarker(t, pg)); err == nil && left {
			p.Note("PostgreSQL was left stopped by an unfinished pgtune restart: apply will start it")
		}
	}
	p.Note(fmt.Sprintf("segment %d MB = %d huge pages of a %d-page pool (shared_buffers %s, %d probes)",
		fit.SegmentMB, fit.SegmentPages, fit.PoolPages, formatSize(fit.SharedBuffers), fit.Probes+1))
	return nil
}

// describeLive renders the running values and returns a test for whether
// they differ from the desired shared_buffers with huge_pages on and the
// default huge page size.
func describeLive(live map[string]string) (string, func(int64) bool) {
	return describeLiveFor(live, "0")
}

// describeLiveFor is describeLive for the huge_page_size setting hps.
func describeLiveFor(live map[string]string, want string) (string, func(int64) bool) {
	wantKB, _ := parseSize(want, 1024)
	wantKB /= 1024
	// Out of range reads as 0 (unknown), as an unparsable value did: the
	// product below must not wrap around.
	block, _ := facts.ParseInt("block_size", live["block_size"], 1, maxBlockSize)
	nb, _ := facts.ParseInt("shared_buffers", live["shared_buffers"], 0, facts.MaxBytes/maxBlockSize)
	sb := nb * block
	hps, _ := facts.ParseInt("huge_page_size", live["huge_page_size"], 0, facts.MaxHugePageSize>>10)
	before := fmt.Sprintf("shared_buffers=%s huge_pages=%s huge_page_size=%s", formatSize(sb), live["huge_pages"], formatSize(hps*1024))
	return before, func(wantSB int64) bool {
		return sb != wantSB || hugePagesValue(live["huge_pages"]) != "on" || hps != wantKB
	}
}

func overridden(os []override, name, policy string) bool {
	for _, o := range os {
		if o.Entry.Name == name && (policy == "fail" || !o.Fixable) {
			return true
		}
	}
	return false
}

func overrideAfter(o override, policy, dropin string) string {
	if !o.Fixable {
		return fmt.Sprintf("overrides %s from the postmaster command line (pgtune cannot change it: remove it from the start options)", dropin)
	}
	return fmt.Sprintf("overrides %s (on_override: %s: remove it, or set on_override: fix)", dropin, policy)
}

// findOverrides lists the assignments of managed settings that come after
// the drop-in's own and set a different value.
func findOverrides(w *walk, dropin string) []override {
	var out []override
	for _, name := range managed {
		pos, ours := -1, ""
		for i, e := range w.Entries {
			if e.File == dropin && e.Name == name {
				pos, ours = i, e.Value
			}
		}
		if pos < 0 {
			continue
		}
		for _, e := range w.Entries[pos+1:] {
			if e.Name == name && (name == "shared_buffers" || !sameSetting(name, e.Value, ours)) {
				// shared_buffers: any later assignment wins over ours.
				out = append(out, override{Entry: e, Fixable: true})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b override) int {
		if c := strings.Compare(a.Entry.File, b.Entry.File); c != 0 {
			return c
		}
		return a.Entry.Line - b.Entry.Line
	})
	return out
}

// commandLineOverrides finds managed settings on the postmaster's command
// line (postmaster.opts): they beat every file, and pg_ctl restart reuses
// them.
func commandLineOverrides(f *confFile, file string, running bool) []override {
	if f == nil || !f.Exists || !running {
		return nil
	}
	args := splitOpts(strings.TrimSpace(string(f.Content)))
	var out []override
	for i := 1; i < len(args); i++ {
		a := args[i]
		var kv string
		switch {
		case a == "-B" && i+1 < len(args):
			kv = "shared_buffers=" + args[i+1]
		case strings.HasPrefix(a, "-B") && len(a) > 2:
			kv = "shared_buffers=" + a[2:]
		case a == "-c" && i+1 < len(args):
			kv = args[i+1]
		case strings.HasPrefix(a, "-c") && len(a) > 2:
			kv = a[2:]
		case strings.HasPrefix(a, "--"):
			kv = a[2:]
		default:
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		k = strings.ToLower(strings.ReplaceAll(k, "-", "_"))
		if !ok || !slices.Contains(managed, k) {
			continue
		}
		out = append(out, override{Entry: entry{File: file, Line: 1, Name: k, Value: v, Text: a}, Fixable: false})
	}
	return out
}

// splitOpts splits postmaster.opts: the binary, then each argument in
// double quotes.
func splitOpts(s string) []string {
	var out []string
	for s != "" {
		s = strings.TrimLeft(s, " \t\n")
		if s == "" {
			break
		}
		if s[0] == '"' {
			end := strings.IndexByte(s[1:], '"')
			if end < 0 {
				out = append(out, s[1:])
				break
			}
			out = append(out, s[1:1+end])
			s = s[2+end:]
			continue
		}
		end := strings.IndexAny(s, " \t\n")
		if end < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

// dropinContent is the whole drop-in file for the default huge page size.
func dropinContent(sharedBuffers int64) []byte { return dropinFor(sharedBuffers, "0") }

// dropinFor is the whole drop-in file with huge_page_size = hps.
func dropinFor(sharedBuffers int64, hps string) []byte {
	return []byte(fmt.Sprintf(`# Managed by pgtune (pgconf); rewritten whole on every apply.
# shared_buffers is sized so the whole shared memory segment fits the
# reserved huge page pool; huge_pages = 'on' makes the server refuse to
# start rather than silently run without huge pages.
huge_pages = 'on'
huge_page_size = %s
shared_buffers = %dkB
`, hps, sharedBuffers/1024))
}

// includeDirective is the line that makes postgresql.conf read the
// drop-in: include_dir for its directory, relative to the config
// directory when it lies inside it.
func includeDirective(confDir, dropin string) string {
	dir := path.Dir(dropin)
	if dir == confDir {
		return "include " + quoteConf(path.Base(dropin)) + "\t# added by pgtune"
	}
	return "include_dir = " + quoteConf(displayPath(confDir, dir)) + "\t# added by pgtune"
}

// displayPath shows p relative to dir when it lies inside it.
func displayPath(dir, p string) string {
	if rel, ok := strings.CutPrefix(p, dir+"/"); ok {
		return rel
	}
	return p
}

func diffLabel(p string, exists bool, side string) string {
	if !exists {
		return "/dev/null"
	}
	return side + p
}

// newFileMode is the mode of a new drop-in: that of postgresql.conf
// (0600 by initdb, 0644 on Debian).
func newFileMode(mainMode string) string {
	if mainMode == "" {
		return "0644"
	}
	return "0" + strings.TrimLeft(mainMode, "0")
}

// roomInPool refuses a plan whose segment would not find its pages at
// start: huge pages held by other processes (another cluster, a JVM) stay
// held when this server restarts, and with huge_pages = 'on' it would then
// refuse to start. Pages this server holds itself are freed by its restart.
func roomInPool(f *facts.Facts, pg *facts.Postgres, live map[string]string, pool, segmentPages int64) error {
	return roomInPoolOf(f, pg, live, pool, segmentPages, f.HugePageSize)
}

// runsOnSize says whether the running server's segment sits on pages of
// size hp (its huge_page_size, 0 meaning the default): only then do its
// restart's freed pages count toward that pool.
func runsOnSize(f *facts.Facts, live map[string]string, hp int64) bool {
	kb, err := facts.ParseInt("huge_page_size", live["huge_page_size"], 0, facts.MaxHugePageSize>>10)
	if err != nil || kb == 0 {
		return hp == f.HugePageSize
	}
	return kb<<10 == hp
}

// roomInPoolOf is roomInPool for the pool of page size hp.
func roomInPoolOf(f *facts.Facts, pg *facts.Postgres, live map[string]string, pool, segmentPages, hp int64) error {
	// Mapped pages plus pages promised to mappings not yet touched.
	held := f.HugePagesTotal - f.HugePagesFree + f.HugePagesRsvd
	if hp != f.HugePageSize {
		p, _ := f.Pool(hp)
		held = p.Pages - p.Free + p.Resv // sysfs nr_hugepages counts surplus pages already
	}
	ours := int64(0)
	if pg.Running && pg.HugetlbPages > 0 && runsOnSize(f, live, hp) {
		if n, err := facts.ParseInt("shared_memory_size_in_huge_pages", live["shared_memory_size_in_huge_pages"], 1, facts.MaxPages); err == nil {
			ours = n
		} else {
			ours = (pg.HugetlbPages + hp - 1) / hp
		}
	}
	others := max(0, held-ours)
	room := pool/hp - others
	if segmentPages > room {
		return fmt.Errorf("the shared memory segment needs %d huge pages but only %d of the %d-page pool would be free for this cluster: %d are held by other processes (another PostgreSQL?); shrink their use or grow the pool",
			segmentPages, max(0, room), pool/hp, others)
	}
	return nil
}
