// Package overcommit puts a host on strict memory overcommit
// (vm.overcommit_memory = 2) with an explicit limit in kB, so running out
// of memory costs one allocation an ENOMEM instead of costing every
// session an OOM kill and a crash restart.
//
// The kernel's limit in strict mode (mm/util.c, vm_commit_limit): with
// vm.overcommit_kbytes non-zero, CommitLimit = overcommit_kbytes (in whole
// pages) + SwapTotal; huge pages are not subtracted then, which is why the
// policy subtracts the pool itself. Writing overcommit_kbytes zeroes
// overcommit_ratio (and the reverse).
package overcommit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/modules/hugepages"
	"github.com/pgtune/pgtune/modules/internal/sysctlconf"
)

// Name is the module's key in a playbook's policy.
const Name = "overcommit"

const (
	keyMemory = "vm.overcommit_memory"
	keyKbytes = "vm.overcommit_kbytes"
	strict    = "2"
)

// Params are the policy knobs; every value may be a `${...}` expression.
type Params struct {
	// Ratio of the memory outside the huge page pool that may be
	// committed.
	Ratio expr.Value `yaml:"ratio"`
	// Headroom in bytes added on top (sidecars, agents).
	Headroom expr.Value `yaml:"headroom"`
	// AcceptUnprotective lets apply set a limit that is not protective
	// (above the memory that can back it); otherwise that is a finding.
	AcceptUnprotective expr.Value `yaml:"accept_unprotective"`
	// Kbytes, when set, is the limit in kB and replaces the formula.
	Kbytes expr.Value `yaml:"kbytes"`
	// MaxCommitted refuses the switch when Committed_AS is already above
	// this fraction of the new CommitLimit.
	MaxCommitted expr.Value `yaml:"max_committed"`
	// SysctlFile makes the settings survive a reboot.
	SysctlFile expr.Value `yaml:"sysctl_file"`
	// OnConflict: fail or comment, for other files overriding ours.
	OnConflict expr.Value `yaml:"on_conflict"`
}

// Defaults. The headroom is the seed's 2 GiB on large servers and a
// sixteenth of RAM below 32 GiB: with the default quarter of RAM in huge
// pages the limit is then 0.6 × MemTotal + at most MemTotal / 16, below the
// 0.75 × MemTotal outside the pool on every size (see Verdict).
const (
	DefaultRatio        = "0.8"
	DefaultHeadroom     = "${min(2 * GiB, floor(facts.mem_total / 16))}"
	DefaultMaxCommitted = "0.9"
	DefaultSysctlFile   = "/etc/sysctl.d/99-overcommit.conf"
	DefaultOnConflict   = sysctlconf.Fail

	DefaultAcceptUnprotective = "false"
)

// DefaultParams returns the parameters with every default filled in
// (kbytes unset: the formula applies).
func DefaultParams() *Params {
	return &Params{
		Ratio:        expr.MustParse(DefaultRatio),
		Headroom:     expr.MustParse(DefaultHeadroom),
		MaxCommitted: expr.MustParse(DefaultMaxCommitted),
		SysctlFile:   expr.MustParse(DefaultSysctlFile),
		OnConflict:   expr.MustParse(DefaultOnConflict),

		AcceptUnprotective: expr.MustParse(DefaultAcceptUnprotective),
	}
}

// Module implements engine.Module.
type Module struct{}

// New returns the overcommit module.
func New() *Module { return &Module{} }

func (*Module) Name() string { return Name }

// Requires hugepages, whose planned pool the limit is computed from, and
// pgconf: strict mode goes on last, once the shared memory segment sits on
// huge pages, outside the commit budget.
func (*Module) Requires() []string { return []string{hugepages.Name, "pgconf"} }
func (*Module) NewParams() any     { return DefaultParams() }

// Outputs declares what Check plans for expressions
// (overcommit.kbytes): names and types, for validate.
func (*Module) Outputs() map[string]any {
	return map[string]any{"kbytes": int64(0), "commit_limit": int64(0), "pool": int64(0), "backing": int64(0), "protective": false}
}

// State is what Check hands to Apply and Verify.
type State struct {
	Kbytes    int64
	SetKbytes bool
	SetMemory bool
	Files     *sysctlconf.Plan
	// Unprotective holds the verdict apply refuses (nil: protective or
	// accepted).
	Unprotective *Verdict
}

func posErr(t *engine.Target, v expr.Value, format string, args ...any) error {
	return &expr.PosError{File: t.Scope.File, Line: v.Line, Column: v.Column, Msg: fmt.Sprintf(format, args...)}
}

// Limit is the policy formula: ratio × (MemTotal − pool) + headroom, in
// kB (rounded down).
func Limit(memTotal, pool int64, ratio float64, headroom int64) int64 {
	return int64(math.Floor((ratio*float64(memTotal-pool) + float64(headroom)) / 1024))
}

// Check plans the two keys and the file. Outputs: kbytes, commit_limit
// (bytes the kernel will report as CommitLimit), pool (the huge page pool
// the limit was computed against).
func (m *Module) Check(ctx context.Context, t *engine.Target, params any) (*plan.ModulePlan, error) {
	prm, ok := params.(*Params)
	if !ok {
		return nil, fmt.Errorf("overcommit: unexpected params %T", params)
	}
	// Bad params fail the same way on every host, before any fact is read.
	if err := m.Validate(params); err != nil {
		return nil, err
	}
	f := t.Facts
	p := &plan.ModulePlan{Module: Name}

	pool, planned := t.Int64Output(hugepages.Name, "pool")
	if !planned {
		n, err := facts.ParseInt(keyPool, f.Sysctl[keyPool], 0, facts.MaxBytes/max(f.HugePageSize, 1))
		if err != nil {
			return nil, err
		}
		pool = n*f.HugePageSize + otherPools(f, f.HugePageSize)
		p.Note(fmt.Sprintf("hugepages is not in the play: limit computed against the current pool (%s)", sysctlconf.Bytes(pool)))
	} else {
		pool += plannedOtherPools(t)
	}

	maxCommitted, err := t.Scope.Float64(prm.MaxCommitted)
	if err != nil {
		return nil, fmt.Errorf("max_committed: %w", err)
	}
	if maxCommitted <= 0 || maxCommitted > 1 {
		return nil, posErr(t, prm.MaxCommitted, "max_committed must be in (0, 1], got %g", maxCommitted)
	}
	var kb int64
	if prm.Kbytes.IsSet() {
		if kb, err = t.Scope.Int64(prm.Kbytes); err != nil {
			return nil, fmt.Errorf("kbytes: %w", err)
		}
		if kb <= 0 {
			return nil, posErr(t, prm.Kbytes, "kbytes must be positive, got %d", kb)
		}
	} else {
		ratio, err := t.Scope.Float64(prm.Ratio)
		if err != nil {
			return nil, fmt.Errorf("ratio: %w", err)
		}
		if ratio <= 0 || ratio > 1 {
			return nil, posErr(t, prm.Ratio, "ratio must be in (0, 1], got %g", ratio)
		}
		headroom, err := t.Scope.Int64(prm.Headroom)
		if err != nil {
			return nil, fmt.Errorf("headroom: %w", err)
		}
		if headroom < 0 {
			return nil, posErr(t, prm.Headroom, "headroom must not be negative, got %d", headroom)
		}
		if pool >= f.MemTotal {
			return nil, fmt.Errorf("huge page pool %s leaves no memory outside it (MemTotal %s)", sysctlconf.Bytes(pool), sysctlconf.Bytes(f.MemTotal))
		}
		kb = Limit(f.MemTotal, pool, ratio, headroom)
	}
	path, err := t.Scope.String(prm.SysctlFile)
	if err != nil {
		return nil, fmt.Errorf("sysctl_file: %w", err)
	}
	onConflict, err := t.Scope.String(prm.OnConflict)
	if err != nil {
		return nil, fmt.Errorf("on_conflict: %w", err)
	}
	if err := sysctlconf.ValidOnConflict(onConflict); err != nil {
		return nil, posErr(t, prm.OnConflict, "%v", err)
	}

	verdict := NewVerdict(f, pool, kb)
	commitLimit := verdict.CommitLimit()
	p.Outputs = map[string]any{"kbytes": kb, "commit_limit": commitLimit, "pool": pool,
		"backing": verdict.Backing(), "protective": verdict.Protective()}
	accept, err := t.Scope.Bool(prm.AcceptUnprotective)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyAccept, err)
	}
	st := &State{Kbytes: kb}
	if judge(p, verdict, accept) {
		st.Unprotective = &verdict
		p.Refuse = unprotectiveError(verdict)
	}
	curKb, curMem := f.Sysctl[keyKbytes], f.Sysctl[keyMemory]
	st.SetKbytes = curKb != sysctlconf.Itoa(kb)
	st.SetMemory = curMem != strict
	if st.SetKbytes || st.SetMemory {
		if !f.SysctlWritable {
			key := keyKbytes
			if !st.SetKbytes {
				key = keyMemory
			}
			if err := sysctlconf.Unwritable(f, key, p); err != nil {
				return nil, err
			}
		}
		// Refuse to turn strict mode on (or tighten it) under a load
		// that already fills the new limit: forks, sshd's included,
		// would start failing.
		if float64(f.CommittedAS) > maxCommitted*float64(commitLimit) {
			top, err := topCommitters(ctx, t, 5)
			if err != nil {
				return nil, fmt.Errorf("preflight: Committed_AS %s is above %.0f%% of the new CommitLimit %s (and listing processes failed: %v)",
					sysctlconf.Bytes(f.CommittedAS), 100*maxCommitted, sysctlconf.Bytes(commitLimit), err)
			}
			return nil, fmt.Errorf("preflight: Committed_AS %s is above %.0f%% of the new CommitLimit %s (overcommit_kbytes %d + swap %s); refusing strict overcommit. Top committers (VmData+VmStk): %s",
				sysctlconf.Bytes(f.CommittedAS), 100*maxCommitted, sysctlconf.Bytes(commitLimit), kb, sysctlconf.Bytes(f.SwapTotal), top)
		}
	}
	// kbytes first: strict mode never runs for a moment under the old
	// ratio-based limit.
	if st.SetKbytes {
		p.Add(plan.Change{Kind: plan.KindSysctl, Target: keyKbytes, Before: curKb, After: sysctlconf.Itoa(kb)})
		p.Note(fmt.Sprintf("writing %s makes the kernel zero vm.overcommit_ratio (now %s)", keyKbytes, f.Sysctl["vm.overcommit_ratio"]))
	}
	if st.SetMemory {
		p.Add(plan.Change{Kind: plan.KindSysctl, Target: keyMemory, Before: curMem, After: strict})
	}
	files, err := sysctlconf.Check(ctx, t, p, sysctlconf.File{
		Path:   path,
		Module: Name,
		Settings: []sysctlconf.Setting{
			{Key: keyKbytes, Value: sysctlconf.Itoa(kb)},
			{Key: keyMemory, Value: strict},
		},
		OnConflict: onConflict,
	})
	if err != nil {
		return nil, err
	}
	st.Files = files
	p.State = st
	return p, nil
}

// committersScript prints "pid kB name" for every process: VmData (private
// writable mappings, heap included) plus VmStk, which is what strict
// overcommit charges a process for (shared memory is charged once,
// globally, and huge pages not at all).
const committersScript = `for d in /proc/[0-9]*; do
  n= data= stk=
  { while read -r k v rest; do
      case $k in
        Name:) n="$v${rest:+ $rest}" ;;
        VmData:) data=$v ;;
        VmStk:) stk=$v ;;
      esac
    done < "$d/status"; } 2>/dev/null
  if [ -n "$data" ]; then printf '%s %s %s\n' "${d#/proc/}" "$((data + ${stk:-0}))" "$n"; fi
done
`

type committer struct {
	pid  int
	kb   int64
	name string
}

func topCommitters(ctx context.Context, t *engine.Target, n int) (string, error) {
	res, err := t.Run(ctx, "sh", "-c", committersScript, "sh")
	if err != nil {
		return "", err
	}
	return formatCommitters(parseCommitters(string(res.Stdout)), n), nil
}

func parseCommitters(out string) []committer {
	var cs []committer
	for _, line := range strings.Split(out, "\n") {
		f := strings.SplitN(line, " ", 3)
		if len(f) < 2 {
			continue
		}
		// A line the host garbled is left out of this hint, not trusted.
		pid, err1 := facts.ParseInt("pid", f[0], 1, facts.MaxPID)
		kb, err2 := facts.ParseInt("committed kB", f[1], 0, facts.MaxKB)
		if err1 != nil || err2 != nil {
			continue
		}
		c := committer{pid: int(pid), kb: kb}
		if len(f) == 3 {
			c.name = f[2]
		}
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].kb != cs[j].kb {
			return cs[i].kb > cs[j].kb
		}
		return cs[i].pid < cs[j].pid
	})
	return cs
}

func formatCommitters(cs []committer, n int) string {
	if len(cs) > n {
		cs = cs[:n]
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = fmt.Sprintf("%s (pid %d) %s", c.name, c.pid, sysctlconf.Bytes(c.kb*1024))
	}
	if len(parts) == 0 {
		return "(none readable)"
	}
	return strings.Join(parts, ", ")
}

// Apply writes the file, then sets exactly the planned keys, kbytes before
// overcommit_memory.
func (m *Module) Apply(ctx context.Context, t *engine.Target, p *plan.ModulePlan) error {
	st, err := plan.StateOf[State](p)
	if err != nil || st == nil {
		return cmp.Or(err, errors.New("overcommit: no plan state"))
	}
	if st.Unprotective != nil {
		return unprotectiveError(*st.Unprotective)
	}
	if st.SetKbytes || st.SetMemory {
		if err := sysctlconf.RequireRoot(t.Facts, keyKbytes); err != nil {
			return err
		}
	}
	if err := sysctlconf.Apply(ctx, t, st.Files); err != nil {
		return err
	}
	if st.SetKbytes {
		if err := t.SetSysctl(ctx, keyKbytes, sysctlconf.Itoa(st.Kbytes)); err != nil {
			return fmt.Errorf("set %s: %w", keyKbytes, err)
		}
	}
	if st.SetMemory {
		if err := t.SetSysctl(ctx, keyMemory, strict); err != nil {
			return fmt.Errorf("set %s: %w", keyMemory, err)
		}
	}
	return nil
}

// Verify reads the keys back and checks that /proc/meminfo's CommitLimit
// is what the kernel computes from them: overcommit_kbytes rounded down to
// whole pages plus SwapTotal.
func (m *Module) Verify(ctx context.Context, t *engine.Target, p *plan.ModulePlan) error {
	st, err := plan.StateOf[State](p)
	if err != nil || st == nil {
		return cmp.Or(err, errors.New("overcommit: no plan state"))
	}
	for k, want := range map[string]string{keyKbytes: sysctlconf.Itoa(st.Kbytes), keyMemory: strict} {
		got, err := t.ReadSysctl(ctx, k)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("%s is %s, planned %s", k, got, want)
		}
	}
	mi, err := sysctlconf.Meminfo(ctx, t)
	if err != nil {
		return err
	}
	want := st.Kbytes*1024 + mi["SwapTotal"]
	got := mi["CommitLimit"]
	// The kernel keeps the limit in pages: up to one page (64 kB on the
	// largest page size Linux uses) may be rounded away.
	if d := want - got; d < 0 || d >= 64<<10 {
		return fmt.Errorf("CommitLimit is %d kB, expected %d kB (overcommit_kbytes %d + SwapTotal %d kB)",
			got>>10, want>>10, st.Kbytes, mi["SwapTotal"]>>10)
	}
	return sysctlconf.VerifyOwn(ctx, t, st.Files)
}
