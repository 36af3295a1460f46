package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"golang.org/x/crypto/argon2"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/rollout"
	"github.com/pgtune/pgtune/playbooks"
)

// exitInterrupted is the exit code of a run stopped by Ctrl-C (128+SIGINT).
const exitInterrupted = 130

// fleetOptions are the flags of rolling applies, resume and shards. Every
// one of them is declared here (shardFlag, rolloutFlags).
type fleetOptions struct {
	shard          string
	serial         string
	maxFail        string
	anyErrorsFatal bool
	// anyErrorsFatalSet: --any-errors-fatal was given (=true or =false),
	// or taken from the run resumed; the play's value stands otherwise.
	anyErrorsFatalSet bool
	pause             string
	confirmEach       bool
	resume            resumeFlag
}

func shardFlag(fs *pflag.FlagSet, o *options) {
	fs.StringVar(&o.fleet.shard, "shard", "", "only the hosts of shard `i/n`, e.g. 2/4 (stable: by host name; for a CI matrix)")
}

func rolloutFlags(fs *pflag.FlagSet, o *options) {
	fs.StringVar(&o.fleet.serial, "serial", "", "batch `sizes`: 5, 25% or a list 1,10%,100% (overrides the playbook's serial)")
	fs.StringVar(&o.fleet.maxFail, "max-fail-percentage", "", "stop once more than this `percent` of the run's hosts failed")
	fs.BoolVar(&o.fleet.anyErrorsFatal, "any-errors-fatal", false, "stop after the batch of the first failed host")
	fs.StringVar(&o.fleet.pause, "pause-between-batches", "", "wait this `long` between batches (30s, 2m)")
	fs.BoolVar(&o.fleet.confirmEach, "confirm-each-batch", false, "ask before every batch (and each later wave of one), not only the first")
	fs.Var(&o.fleet.resume, "resume", "continue the latest unfinished run (of the -i, --shard and --limit given), or run `RUN` (--resume=RUN or --resume RUN)")
	fs.Lookup("resume").NoOptDefVal = "latest" // --resume alone: the latest run
}

// resumeFlag is --resume alone (the latest run) or --resume=ID.
type resumeFlag struct {
	set bool
	id  string
}

func (r *resumeFlag) String() string { return r.id }
func (r *resumeFlag) Type() string   { return "RUN" }
func (r *resumeFlag) Set(v string) error {
	switch v {
	case "true", "latest":
		*r = resumeFlag{set: true}
	case "false":
		*r = resumeFlag{}
	default:
		*r = resumeFlag{set: true, id: v}
	}
	return nil
}

// runIDLike is what pgtune's run ids look like (newRunID).
var runIDLike = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z-[0-9a-f]+$`)

// resumeArgs lets "--resume ID" stand for "--resume=ID" when ID looks like
// a run id: --resume alone takes no value (it means the latest run, pflag's
// NoOptDefVal), so pflag would read ID as the playbook.
func resumeArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--resume" && i+1 < len(args) && runIDLike.MatchString(args[i+1]) {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}

// inShard keeps the hosts of --shard. A shard with none of the selected
// hosts is no error: a CI matrix may have more shards than the fleet has
// hosts, and every job must still print its (empty) report for the merge.
// note says so; the caller shows it.
func (f fleetOptions) inShard(hosts []*inventory.Host) (out []*inventory.Host, note string, err error) {
	if f.shard == "" {
		return hosts, "", nil
	}
	s, err := rollout.ParseShard(f.shard)
	if err != nil {
		return nil, "", err
	}
	out = s.Filter(hosts)
	if len(out) == 0 {
		return []*inventory.Host{}, fmt.Sprintf("--shard %s: no host of the selection falls in this shard (%d hosts selected): nothing to do", s, len(hosts)), nil
	}
	return out, "", nil
}

// overrides returns the playbook's rollout with the command line's flags
// laid over it.
func (f fleetOptions) overrides(r playbook.Rollout) (playbook.Rollout, error) {
	var err error
	if f.serial != "" {
		if r.Serial, err = playbook.ParseSerial(f.serial); err != nil {
			return r, fmt.Errorf("--serial: %w", err)
		}
	}
	if f.maxFail != "" {
		pct, err := playbook.ParsePercent(f.maxFail)
		if err != nil {
			return r, fmt.Errorf("--max-fail-percentage: %w", err)
		}
		r.MaxFailPercentage = &pct
	}
	if f.anyErrorsFatalSet {
		r.AnyErrorsFatal = f.anyErrorsFatal
	}
	if f.pause != "" {
		if r.PauseBetweenBatches, err = playbook.ParsePause(f.pause); err != nil {
			return r, fmt.Errorf("--pause-between-batches: %w", err)
		}
	}
	return r, nil
}

// rolloutApply is apply: batch by batch, each planned, shown, applied and
// verified before the next, with the run state kept on the controller.
func (a *App) rolloutApply(o *options) int {
	o.fleet.anyErrorsFatalSet = o.given["any-errors-fatal"]
	if o.fleet.confirmEach && o.yes {
		// Either reading would surprise someone: --yes winning asks
		// nothing of whoever wanted every batch confirmed, and the
		// questions stall whoever meant to run unattended.
		return a.fail(errors.New("--yes and --confirm-each-batch contradict each other: --confirm-each-batch asks before every batch (on a terminal), --yes asks nothing; give one of them"))
	}
	dir, err := rollout.Dir()
	if err != nil {
		return a.fail(err)
	}
	var st *rollout.State
	if o.fleet.resume.set {
		want := o.resumeMatch()
		if st, err = rollout.Resume(dir, o.fleet.resume.id, want); err != nil {
			return a.fail(err)
		}
		// Another pgtune may be applying this run right now: take it
		// first, then read it again under the lock, never a snapshot
		// that process has moved past since.
		unlock, err := st.Lock()
		if err != nil {
			return a.fail(err)
		}
		defer unlock()
		if st, err = rollout.Resume(dir, st.ID, want); err != nil {
			return a.fail(err)
		}
		if err := o.resumeFrom(st); err != nil {
			return a.fail(err)
		}
	}
	if o.fleet.confirmEach && !a.IsTerminal() {
		return a.fail(errors.New("--confirm-each-batch asks before every batch on a terminal, and stdin is not one (without a terminal, --yes applies every batch unasked)"))
	}
	l, mods, err := a.load(o)
	if err != nil {
		return a.fail(err)
	}
	var gone []string // hosts of the resumed run the inventory lost
	if st != nil {
		if l.hosts, gone, err = a.runHosts(st, l); err != nil {
			return a.fail(err)
		}
	}
	if len(l.hosts) == 0 {
		// An empty --shard (load noted it): nothing to apply and no run
		// state written, as there is nothing a resume could continue.
		a.render(o, a.newLive(o, "apply", report.ModeApply, a.textOut(o)), &report.Report{Mode: report.ModeApply})
		return 0
	}
	plan, err := o.fleet.overrides(l.book.Rollout)
	if err != nil {
		return a.fail(err)
	}
	sum, err := playbookSum(o.playbook)
	if err != nil {
		return a.fail(err)
	}
	runner := a.runner(o, mods)
	resumed := st != nil
	if st == nil {
		st = rollout.NewState(dir, runner.RunID, a.Now())
		st.Inventory, st.Playbook, st.Limit, st.Shard, st.PlaybookSHA256 = absPath(o.inventory), absPath(o.playbook), o.limit, o.fleet.shard, sum
		st.Flags = o.fleet.savedFlags()
		if st.ExtraVarsFingerprint, err = extraVarsSum(st.ID, o.extraVars); err != nil {
			return a.fail(err)
		}
		st.InventoryFingerprint = inventorySum(st.ID, l.inv)
		// An unsafe state directory costs this run its resume, not the
		// apply (rollout/statedir.go): said once, before anything runs.
		unsafe, err := st.Prepare()
		if err != nil {
			return a.fail(err)
		}
		if unsafe != nil {
			fmt.Fprintf(a.Stderr, "pgtune: warning: %s\n", safeText(unsafe.Warning()))
		}
		unlock, err := st.Lock() // a --resume started meanwhile is refused until this one ends
		if err != nil {
			return a.fail(err)
		}
		defer unlock()
	} else if st.PlaybookSHA256 != sum {
		return a.fail(fmt.Errorf("--resume %s: the playbook changed since the run started: its verified hosts were verified against another policy; start a new apply", st.ID))
	}
	if resumed {
		if err := a.sameInventory(o, st, l.inv); err != nil {
			return a.fail(err)
		}
	}
	// One Ctrl-C handler for the whole command, the fact gather that
	// orders the batches included: a signal during it must stop the run.
	ctx, stop, release := interruptible(a)
	defer release()
	order, ok := a.clusterOrder(ctx, stop, runner, l.hosts, plan)
	if !ok {
		return a.interruptedBeforeStart(st, resumed)
	}
	view := a.newRolloutView(o, runner, len(l.hosts))
	ro := &rollout.Rollout{
		Runner: runner, Inventory: l.inv, Book: l.book, Hosts: l.hosts,
		Plan: plan, Order: order, State: st, Stop: stop, Log: runner.Log,
		Confirm: a.confirmBatch(o, view, stop), BeforeWave: view.beforeWave,
	}
	out, err := ro.Run(ctx)
	if err != nil {
		view.applied.finish(&report.Report{})
		return a.fail(err)
	}
	if out.Err != nil && out.Waves == 0 && !out.Interrupted {
		// Nothing was applied: the same refusal as a plain apply.
		view.applied.finish(&report.Report{})
		return a.fail(out.Err)
	}
	for _, name := range gone {
		// In the report too: a JSON reader sees why the exit status is 1.
		why := fmt.Sprintf("not in the inventory any more: a host of run %s still to do, left as it is (resume once the inventory has it again)", st.ID)
		out.Report.Hosts = append(out.Report.Hosts, report.Host{Name: name, Status: report.Unreachable, Changes: []report.Change{}, Error: &why})
	}
	if len(gone) > 0 {
		out.Report.Summarize()
	}
	a.render(o, view.applied, out.Report)
	switch {
	case out.Interrupted:
		fmt.Fprintf(a.Stderr, "pgtune: interrupted; %s\n", continueHint(st))
		return exitInterrupted
	case out.Stopped != "":
		fmt.Fprintf(a.Stderr, "pgtune: rollout stopped: %s; %s%s\n", safeText(out.Stopped), continueHint(st), undoHint(out.Report))
		return 1
	case len(out.Left) > 0:
		// Hosts left out by a narrower --limit are not in the report (the
		// exit status speaks of the hosts asked for); those the inventory
		// lost are, unreachable.
		a.partial(st, out.Left, gone)
	}
	return out.Report.ExitCode()
}

// resumeMatch is what the command line says of the run to resume: the
// inventory and shard given must be the run's, and --resume alone picks
// the newest unfinished run of the -i, --shard and --limit given.
func (o *options) resumeMatch() rollout.Match {
	var m rollout.Match
	if o.given["i"] || o.given["inventory"] {
		m.Inventory = absPath(o.inventory)
	}
	if o.given["shard"] {
		m.Shard = o.fleet.shard
	}
	if o.fleet.resume.id == "" && (o.given["limit"] || o.given["l"]) {
		m.Limit = o.limit
	}
	return m
}

// runHosts keeps, of the hosts selected, those of the run resumed: a
// resume continues a run over the hosts it started with (its verified
// hosts, batches and failure budget are theirs). Hosts of the inventory
// the run never had are left out, not added to it: they were never
// shown in its plan nor confirmed with it; a new apply takes them. The
// run's hosts still to do that the inventory no longer has are returned
// (gone): they keep the run unfinished. Both are named in a note.
func (a *App) runHosts(st *rollout.State, l *loaded) (kept []*inventory.Host, gone []string, err error) {
	inRun := map[string]bool{}
	for _, h := range st.Hosts {
		inRun[h.Name] = true
	}
	var added []string
	for _, h := range l.hosts {
		if inRun[h.Name] {
			kept = append(kept, h)
		} else {
			added = append(added, h.Name)
		}
	}
	all, err := engine.Targets(l.inv, l.book, "")
	if err != nil {
		return nil, nil, err
	}
	inInv := map[string]bool{}
	for _, h := range all {
		inInv[h.Name] = true
	}
	for _, h := range st.Hosts {
		if !h.Done() && !inInv[h.Name] {
			gone = append(gone, h.Name)
		}
	}
	if len(gone) > 0 {
		fmt.Fprintf(a.Stderr, "pgtune: note: run %s: %s of the run no longer in the inventory, left as they are: %s; the run stays unfinished until a resume reaches them\n", st.ID, plural(len(gone), "host"), strings.Join(gone, ", "))
	}
	if len(added) > 0 {
		fmt.Fprintf(a.Stderr, "pgtune: note: run %s: %s of the inventory not in the run, left out: %s; a resume keeps to the run's hosts: apply them in a new run\n", st.ID, plural(len(added), "host"), strings.Join(added, ", "))
	}
	if len(kept) == 0 {
		return nil, nil, fmt.Errorf("--resume %s: no host of the run is in this selection (inventory, --limit, --shard): nothing to resume", st.ID)
	}
	return kept, gone, nil
}

// partial ends an attempt that ran to its end over part of its run: the
// run is left partial, and --resume picks it again.
func (a *App) partial(st *rollout.State, left, gone []string) {
	how := "pgtune apply --resume " + st.ID
	if len(gone) > 0 {
		how += fmt.Sprintf(", once the inventory has %s again", strings.Join(gone, ", "))
	}
	fmt.Fprintf(a.Stderr, "pgtune: run %s is not finished (partial): %s of it left out of this resume: %s; run state in %s; finish them with: %s\n", st.ID, plural(len(left), "host"), strings.Join(left, ", "), st.Path(), how)
}

// continueHint says how to go on with a run cut short: by its run state,
// or, when none was kept (State.Prepare), by applying again.
func continueHint(st *rollout.State) string {
	if !st.Kept() {
		return "no run state was kept (see the warning above), so there is no --resume: apply again to go on (hosts already in policy are left as they are)"
	}
	return fmt.Sprintf("run state in %s; continue with: pgtune apply --resume %s", st.Path(), st.ID)
}

// undoHint names the rollback of the hosts a stopped run changed ("" when
// it changed none).
func undoHint(r *report.Report) string {
	if r.Summary.Changed == 0 {
		return ""
	}
	return fmt.Sprintf("; or put back the %s it changed with: pgtune rollback --run %s (with the run's -i and --limit)", plural(r.Summary.Changed, "host"), r.RunID)
}

// resumeFrom fills what the command line leaves out from the run resumed,
// and refuses -e vars other than the run's: they are not stored (only
// their fingerprint), so the user must give them again.
func (o *options) resumeFrom(st *rollout.State) error {
	sum, err := extraVarsSum(st.ID, o.extraVars)
	if err != nil {
		return err
	}
	if sum != st.ExtraVarsFingerprint {
		return fmt.Errorf("--resume %s: the extra vars (-e) are not the run's: its verified hosts were verified with other vars; pass the same -e as the run that started it (pgtune keeps only a fingerprint of them, as they may hold secrets), or start a new apply", st.ID)
	}
	if !o.given["i"] && !o.given["inventory"] {
		o.inventory = st.Inventory
	}
	if o.playbook == "" {
		o.playbook = st.Playbook
	}
	if !o.given["limit"] && !o.given["l"] {
		o.limit = st.Limit
	}
	if !o.given["shard"] {
		o.fleet.shard = st.Shard
	}
	for name, v := range o.fleet.flags() {
		if !o.given[name] && st.Flags[name] != "" {
			*v = st.Flags[name]
		}
	}
	if v := st.Flags["any-errors-fatal"]; !o.given["any-errors-fatal"] && v != "" {
		o.fleet.anyErrorsFatal, o.fleet.anyErrorsFatalSet = v == "true", true
	}
	return nil
}

// sameInventory compares the inventory a resume loaded with the one its
// run started with. The inventory says what runs where (ssh_config_file,
// pg_restart, pg_bin), so an edit since is never taken silently: taken
// from the run state (no -i), it is refused with how to go on; named with
// -i, the user chose it, and the run goes on with it (noted, and kept as
// the run's from now on).
func (a *App) sameInventory(o *options, st *rollout.State, inv *inventory.Inventory) error {
	sum := inventorySum(st.ID, inv)
	if st.InventoryFingerprint == "" || st.InventoryFingerprint == sum {
		st.InventoryFingerprint = sum
		return nil
	}
	name := cmp.Or(st.Inventory, "(none: this machine)")
	// A run without an inventory (this machine) has none to name: its
	// change (ansible.cfg's settings) is only noted.
	if !o.given["i"] && !o.given["inventory"] && st.Inventory != "" {
		return fmt.Errorf("--resume %s: the inventory %s changed since the run started (its hosts, groups, vars or connection settings, or the ansible.cfg it is read with): check the change, and if it is meant, name the inventory to resume with it: pgtune apply --resume %s -i %s; or start a new apply", st.ID, name, st.ID, st.Inventory)
	}
	fmt.Fprintf(a.Stderr, "pgtune: note: the inventory %s changed since run %s started; resuming with it\n", safeText(name), st.ID)
	st.InventoryFingerprint = sum
	return nil
}

// inventorySum fingerprints the inventory as loaded: every host's name,
// groups, vars and connection settings, which is what a changed file,
// group_vars or ansible.cfg would show in. Passwords typed at a prompt
// are left out (a typo is no edit); the vars' own passwords are in, so
// it is argon2id salted with the run id, as extraVarsSum is. %#v prints
// maps sorted by key.
func inventorySum(runID string, inv *inventory.Inventory) string {
	var b strings.Builder
	for _, h := range inv.Hosts {
		c := h.Conn
		c.Password, c.BecomePassword = "", ""
		fmt.Fprintf(&b, "%q %#v %#v %#v %#v\n", h.Name, h.Groups, h.Vars, c, slices.Sorted(maps.Keys(h.Unusable)))
	}
	key := argon2.IDKey([]byte(b.String()), []byte("pgtune inventory "+runID), 1, 64*1024, 2, 32)
	return "argon2id:" + hex.EncodeToString(key)
}

// extraVarsSum fingerprints a run's -e vars for its resume to compare ("":
// none). The run state keeps this and never the vars: -e may carry secrets
// (a password for a policy, the plain value of a Vault var), and no secret
// reaches a file. The vars are hashed as parsed, so -e 'a=1 b=2' and
// -e a=1 -e b=2 agree and an edited -e @FILE does not; %#v prints maps
// sorted by key. argon2id, memory-hard, salted with the run id: a state
// file read by someone else is no fast oracle for guessing a weak
// password in the vars (a plain SHA-256 would be).
func extraVarsSum(runID string, args []string) (string, error) {
	vars, err := parseExtraVars(args)
	if err != nil || len(vars) == 0 {
		return "", err
	}
	key := argon2.IDKey([]byte(fmt.Sprintf("%#v", vars)), []byte("pgtune extra vars "+runID), 1, 64*1024, 2, 32)
	return "argon2id:" + hex.EncodeToString(key), nil
}

// flags are the rollout flags a resume takes over from its run.
func (f *fleetOptions) flags() map[string]*string {
	return map[string]*string{"serial": &f.serial, "max-fail-percentage": &f.maxFail, "pause-between-batches": &f.pause}
}

// savedFlags records the rollout flags given, for a resume.
func (f *fleetOptions) savedFlags() map[string]string {
	out := map[string]string{}
	for name, v := range f.flags() {
		if *v != "" {
			out[name] = *v
		}
	}
	if f.anyErrorsFatalSet {
		out["any-errors-fatal"] = strconv.FormatBool(f.anyErrorsFatal)
	}
	return out
}

// playbookSum fingerprints the policy a run applies.
func playbookSum(path string) (string, error) {
	data := playbooks.Default
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return "", fmt.Errorf("playbook: %w", err)
		}
	}
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:]), nil
}

func absPath(p string) string {
	if p == "" || strings.Contains(p, ",") {
		return p // the default, or a host list
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// confirmBatch ends each wave's plan with its recap and asks as apply always did: before
// the first wave that changes anything (unless --yes), and before every
// later one with --confirm-each-batch. Ctrl-C while asking stops the run.
func (a *App) confirmBatch(o *options, view *rolloutView, stop <-chan struct{}) func(rollout.Batch, *report.Report) error {
	asked := false
	return func(b rollout.Batch, planned *report.Report) error {
		// The wave's hosts were shown as they were planned (view).
		if err := view.planned(planned); err != nil {
			return fmt.Errorf("writing the plan: %w", err)
		}
		first := !asked
		asked = true
		if first && o.yes || !first && !o.fleet.confirmEach {
			return nil
		}
		question := fmt.Sprintf("Apply these changes to %d host(s)?", planned.Summary.Drift)
		if b.Of > 1 {
			question = fmt.Sprintf("Apply %s: changes to %d host(s)?", batchName(b), planned.Summary.Drift)
		}
		forced := *o
		forced.yes = false
		view.applied.pause()
		defer view.applied.resume()
		err := a.confirmOrStop(&forced, question, stop)
		if err != nil && !first && !isClosed(stop) {
			// An earlier wave was confirmed and applied: "nothing was
			// changed" would hide the hosts it changed.
			return notConfirmed(b)
		}
		return err
	}
}

// batchName is "batch 2 of 5", and ", wave 2" for a later wave of it: a
// batch holding several members of a cluster is applied wave by wave,
// each planned (and, with --confirm-each-batch, asked) after the one
// before it.
func batchName(b rollout.Batch) string {
	s := fmt.Sprintf("batch %d of %d", b.Number, b.Of)
	if b.Wave > 1 {
		s += fmt.Sprintf(", wave %d", b.Wave)
	}
	return s
}

// notConfirmed is the refusal of a later batch (or wave) of a rollout whose
// earlier ones were applied, saying both: what was applied stays so, and
// may need a rollback.
func notConfirmed(b rollout.Batch) error {
	what := fmt.Sprintf("batch %d of %d", b.Number, b.Of)
	before := "batch 1"
	switch {
	case b.Wave > 1:
		what += fmt.Sprintf(", wave %d,", b.Wave)
		before = "wave 1 of it"
		if b.Wave > 2 {
			before = fmt.Sprintf("waves 1–%d of it", b.Wave-1)
		}
		if b.Number > 1 {
			before = "the batches before it and " + before
		}
	case b.Number > 2:
		before = fmt.Sprintf("batches 1–%d", b.Number-1)
	}
	return fmt.Errorf("%s not confirmed: it was not applied, nor anything after it; applied before it, and still so: %s", what, before)
}

// confirmOrStop asks, and gives up asking when the run is stopped.
func (a *App) confirmOrStop(o *options, question string, stop <-chan struct{}) error {
	answer := make(chan error, 1)
	go func() { answer <- a.confirm(o, question) }()
	select {
	case err := <-answer:
		return err
	case <-stop:
		return errors.New("interrupted while asking; nothing more was changed")
	}
}

// interruptible is the context hosts work under and the channel Ctrl-C
// closes. The first SIGINT or SIGTERM (or SIGHUP: stopSignals) closes stop: every host finishes the
// module in flight (a restart completes, a file is whole) and starts no
// other. A second one (SIGINT or SIGTERM) cancels the context: commands in
// flight are cut.
func interruptible(a *App) (context.Context, <-chan struct{}, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	stop := make(chan struct{})
	release := watchSignals(func() {
		close(stop) // before it is said: whoever reads it sees the run stopping
		fmt.Fprintln(a.Stderr, "pgtune: interrupted: each host finishes the step in flight, then the run stops (interrupt again to abort the steps in flight)")
	}, func(os.Signal) { cancel() })
	return ctx, stop, func() {
		release()
		cancel()
	}
}

// clusterOrder keeps replication clusters in order across batches: with
// batches (serial), the facts of every host are gathered first so each
// batch knows every member of its hosts' clusters (Runner.Layout), the
// hosts are sorted standbys first and primaries last, and a batch is
// split into waves with at most one member of a cluster each. Without
// batches the one session orders its own hosts.
//
// ok is false when Ctrl-C came during the gather: it is cut at the first
// signal (it only reads, nothing is left half done), and no layout is
// made, as one from the hosts gathered so far would misplace the members
// of their clusters that were not.
func (a *App) clusterOrder(ctx context.Context, stop <-chan struct{}, r *engine.Runner, hosts []*inventory.Host, plan playbook.Rollout) (order rollout.Order, ok bool) {
	if len(plan.Serial) == 0 {
		return rollout.Order{}, true
	}
	gather, cancel := rollout.UntilStopped(ctx, stop)
	defer cancel()
	facts := r.Facts(gather, hosts)
	if gather.Err() != nil || isClosed(stop) {
		return rollout.Order{}, false
	}
	l, notes := engine.ClusterLayout(gather, facts, r.Forks)
	if gather.Err() != nil || isClosed(stop) {
		return rollout.Order{}, false
	}
	for _, n := range notes {
		fmt.Fprintf(a.Stderr, "pgtune: warning: %s\n", safeText(n))
	}
	r.Layout = l
	r.StopDownMembers(facts)
	return rollout.ClusterOrder(l, facts), true
}

// onSignal is what a signal does to a run that is stopping already or
// not: the first stops it (each host finishes its step), a second SIGINT
// or SIGTERM aborts the steps in flight. A hangup never aborts: a dropped
// SSH session often brings two (the shell's, then the kernel's to the
// foreground group), and nobody is there to mean it.
func onSignal(s os.Signal, stopping bool) (stop, abort bool) {
	switch {
	case !stopping:
		return true, false
	case s == syscall.SIGHUP:
		return false, false
	default:
		return false, true
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// interruptedBeforeStart ends a rollout stopped by Ctrl-C before its first
// batch: no host was changed. A new run writes no state file (a resume of
// a run that never started has nothing to continue, and --resume alone
// would pick it over an older interrupted run); a resumed run's state is
// left as it was, so --resume continues it the same way.
func (a *App) interruptedBeforeStart(st *rollout.State, resumed bool) int {
	msg := "pgtune: interrupted while reading the hosts' facts, before the first batch: no host was changed"
	if resumed {
		fmt.Fprintf(a.Stderr, "%s; run state in %s unchanged; continue with: pgtune apply --resume %s\n", msg, st.Path(), st.ID)
	} else {
		fmt.Fprintf(a.Stderr, "%s; no run state written (nothing to resume)\n", msg)
	}
	return exitInterrupted
}
