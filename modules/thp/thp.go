// Package thp turns transparent huge pages off (or to madvise) for
// PostgreSQL hosts: live through /sys/kernel/mm/transparent_hugepage/ and
// at every boot through a systemd-tmpfiles entry, journaled and rolled
// back like every change pgtune makes.
//
// With THP "always", the kernel backs any large anonymous mapping with
// huge pages and compacts memory to find them: backends' private memory
// grows in 2 MiB steps and allocations stall in compaction, which shows up
// as latency spikes. PostgreSQL's shared memory already sits on the
// explicit pool (hugepages module); THP adds nothing to it.
package thp

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/aymanbagabas/go-udiff"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/transport"
)

// Name is the module's key in a playbook's policy.
const Name = "thp"

// The kernel's settings.
const (
	Dir         = "/sys/kernel/mm/transparent_hugepage"
	EnabledPath = Dir + "/enabled"
	DefragPath  = Dir + "/defrag"
)

// DefaultFile is the systemd-tmpfiles configuration that sets the modes at
// boot (systemd-tmpfiles-setup runs early, before PostgreSQL starts).
const DefaultFile = "/etc/tmpfiles.d/pgtune-thp.conf"

// Modes the policy may ask for.
const (
	Never   = "never"
	Madvise = "madvise"
)

// Params are the policy knobs; each may be a `${...}` expression.
type Params struct {
	// Enabled is THP's mode: never or madvise (only regions a program
	// asks for with madvise(MADV_HUGEPAGE)).
	Enabled expr.Value `yaml:"enabled"`
	// Defrag is how hard a fault tries to find a huge page: never or
	// madvise (compaction only for madvised regions).
	Defrag expr.Value `yaml:"defrag"`
	// TmpfilesFile is the tmpfiles.d file that sets both at boot.
	TmpfilesFile expr.Value `yaml:"tmpfiles_file"`
}

// DefaultParams returns the parameters with every default filled in.
func DefaultParams() *Params {
	return &Params{
		Enabled:      expr.MustParse(Never),
		Defrag:       expr.MustParse(Never),
		TmpfilesFile: expr.MustParse(DefaultFile),
	}
}

// Module implements engine.Module.
type Module struct{}

// New returns the thp module.
func New() *Module { return &Module{} }

func (*Module) Name() string       { return Name }
func (*Module) Requires() []string { return nil }
func (*Module) NewParams() any     { return DefaultParams() }

// Outputs declares what Check plans for expressions (thp.enabled):
// names and types, for validate.
func (*Module) Outputs() map[string]any {
	return map[string]any{"enabled": "", "defrag": ""}
}

// setting is one file's planned mode.
type setting struct {
	path, mode string
}

// State is what Check hands to Apply and Verify.
type State struct {
	// Live are the settings to change now.
	Live []setting
	// Want are both settings as planned, checked by Verify.
	Want []setting
	// File and Content are the boot file and what it must hold;
	// WriteFile says it must be written.
	File      string
	Content   string
	WriteFile bool
}

// Check compares the live modes and the boot file with the policy. It
// reads only gathered facts (and the boot file when the policy names
// another than DefaultFile).
func (m *Module) Check(ctx context.Context, t *engine.Target, params any) (*plan.ModulePlan, error) {
	prm, ok := params.(*Params)
	if !ok {
		return nil, fmt.Errorf("thp: unexpected params %T", params)
	}
	if err := m.Validate(params); err != nil {
		return nil, err
	}
	want, err := prm.eval(t.Scope)
	if err != nil {
		return nil, err
	}
	f, err := hostFacts(t)
	if err != nil {
		return nil, err
	}
	p := &plan.ModulePlan{Module: Name, Outputs: map[string]any{"enabled": want.enabled, "defrag": want.defrag}}
	if f.Enabled == "" {
		p.Note("the kernel has no transparent huge pages (" + Dir + "): nothing to do")
		return p, nil
	}
	st := &State{File: want.file, Content: render(want), Want: []setting{{EnabledPath, want.enabled}, {DefragPath, want.defrag}}}
	for _, s := range []struct{ path, cur, want string }{{EnabledPath, f.Enabled, want.enabled}, {DefragPath, f.Defrag, want.defrag}} {
		if s.cur == s.want {
			continue
		}
		p.Add(plan.Change{Kind: plan.KindSysfs, Target: s.path, Before: s.cur, After: s.want})
		st.Live = append(st.Live, setting{s.path, s.want})
	}
	if len(st.Live) > 0 && !(t.Facts.IsRoot && f.Writable) {
		if t.Facts.IsRoot {
			return nil, notWritable(t)
		}
		p.Note(notWritable(t).Error() + "; apply will refuse")
	}
	if err := bootConflicts(f, want, p); err != nil {
		return nil, err
	}
	before, exists, err := m.current(ctx, t, f, want.file)
	if err != nil {
		return nil, err
	}
	if !exists || before != st.Content {
		st.WriteFile = true
		from := want.file
		if !exists {
			from = "/dev/null"
		}
		p.Add(plan.Change{Kind: plan.KindFile, Target: want.file, Before: before, After: st.Content,
			Diff: udiff.Unified(from, want.file, before, st.Content)})
	}
	p.State = st
	return p, nil
}

// hostFacts is the module's gathered facts.
func hostFacts(t *engine.Target) (*Facts, error) {
	f, ok := t.Facts.Module(Name).(*Facts)
	if !ok || f == nil {
		return nil, fmt.Errorf("no transparent huge page facts were gathered")
	}
	return f, nil
}

// current is the boot file's content: gathered for DefaultFile, read for
// another.
func (m *Module) current(ctx context.Context, t *engine.Target, f *Facts, file string) (string, bool, error) {
	if file == DefaultFile {
		return f.Own, f.OwnExists, nil
	}
	b, ok, err := t.ReadFile(ctx, file)
	if err != nil {
		return "", false, err // "read FILE: …" already
	}
	return string(b), ok, nil
}

func notWritable(t *engine.Target) error {
	if t.Facts.IsRoot {
		return fmt.Errorf("%s is read-only here (container?): cannot set transparent huge pages", Dir)
	}
	return fmt.Errorf("cannot set transparent huge pages: not root on the host (set become: true for passwordless sudo)")
}

// render is the boot file for the planned modes.
func render(s settings) string {
	return "# Written by pgtune (thp module): transparent huge pages at boot.\n" +
		"w " + EnabledPath + " - - - - " + s.enabled + "\n" +
		"w " + DefragPath + " - - - - " + s.defrag + "\n"
}

// bootConflicts looks at the other tmpfiles.d entries for the settings.
// systemd-tmpfiles applies, for each path, only the entry of the file
// whose name sorts first (across directories; a name in an earlier
// directory masks the same name in later ones) and logs the others as
// errors. An earlier entry with another mode would undo the policy at
// every boot: refused. The others are told.
func bootConflicts(f *Facts, want settings, p *plan.ModulePlan) error {
	own := path.Base(want.file)
	for _, other := range f.Files {
		if path.Base(other) == own && other != want.file && dirRank(path.Dir(other)) < dirRank(path.Dir(want.file)) {
			return fmt.Errorf("%s masks %s: systemd-tmpfiles reads only the first of same-named files (by directory); remove it or set tmpfiles_file to it", other, want.file)
		}
	}
	masked := maskedFiles(f.Files)
	for _, e := range f.Boot {
		if e.File == want.file || masked[e.File] {
			continue
		}
		mode := want.enabled
		if e.Path == DefragPath {
			mode = want.defrag
		}
		where := fmt.Sprintf("%s:%d", e.File, e.Line)
		name := path.Base(e.File)
		switch {
		case name == own:
			// Masked by ours (one masking ours was refused above).
		case name < own && e.Value != mode:
			return fmt.Errorf("%s sets %s to %q at boot and systemd-tmpfiles applies it instead of %s (the first file by name wins): remove that line or make it %s",
				where, e.Path, e.Value, want.file, mode)
		case name < own:
			p.Note(fmt.Sprintf("%s also sets %s to %s at boot (it is applied; %s is not)", where, e.Path, e.Value, want.file))
		default:
			p.Note(fmt.Sprintf("%s also writes %s at boot: systemd-tmpfiles ignores it for %s and logs a conflict", where, e.Path, want.file))
		}
	}
	return nil
}

// maskedFiles are the files a same-named file in an earlier directory
// hides.
func maskedFiles(files []string) map[string]bool {
	first := map[string]int{}
	for _, f := range files {
		if r, ok := first[path.Base(f)]; !ok || dirRank(path.Dir(f)) < r {
			first[path.Base(f)] = dirRank(path.Dir(f))
		}
	}
	masked := map[string]bool{}
	for _, f := range files {
		if dirRank(path.Dir(f)) > first[path.Base(f)] {
			masked[f] = true
		}
	}
	return masked
}

// dirRank is a tmpfiles.d directory's precedence; a directory outside the
// known ones (tests) counts as /etc/tmpfiles.d.
func dirRank(dir string) int {
	for i, d := range TmpfilesDirs {
		if d == dir {
			return i
		}
	}
	return 0
}

// Apply writes the boot file, then sets the live modes.
func (m *Module) Apply(ctx context.Context, t *engine.Target, p *plan.ModulePlan) error {
	st, err := plan.StateOf[State](p)
	if err != nil || st == nil {
		return err // nil state: nothing to do, no transparent huge pages
	}
	if len(st.Live) > 0 {
		f, err := hostFacts(t)
		if err != nil {
			return err
		}
		if !t.Facts.IsRoot || !f.Writable {
			return notWritable(t)
		}
	}
	if st.WriteFile {
		if err := t.WriteFile(ctx, st.File, []byte(st.Content), transport.WriteOptions{Mode: "0644"}); err != nil {
			return fmt.Errorf("write %s: %w", st.File, err)
		}
	}
	for _, s := range st.Live {
		if err := t.SetSysfs(ctx, s.path, s.mode); err != nil {
			return err
		}
	}
	return nil
}

// Verify reads both modes back from the kernel and the boot file from
// disk.
func (m *Module) Verify(ctx context.Context, t *engine.Target, p *plan.ModulePlan) error {
	st, err := plan.StateOf[State](p)
	if err != nil || st == nil {
		return err
	}
	for _, s := range st.Want {
		got, err := t.ReadSysfs(ctx, s.path)
		if err != nil {
			return err
		}
		if got != s.mode {
			return fmt.Errorf("%s is %s, planned %s", s.path, got, s.mode)
		}
	}
	b, _, err := t.ReadFile(ctx, st.File)
	if err != nil {
		return err
	}
	if string(b) != st.Content {
		return fmt.Errorf("%s does not hold the planned entries", st.File)
	}
	return nil
}

// ManagedFile reports whether p is a file the module may write: a *.conf
// file in a tmpfiles.d directory, the only place systemd-tmpfiles reads at
// boot.
func ManagedFile(p string) bool {
	return path.IsAbs(p) && path.Clean(p) == p && strings.HasSuffix(p, ".conf") &&
		!strings.HasPrefix(path.Base(p), ".") && path.Base(path.Dir(p)) == "tmpfiles.d"
}
