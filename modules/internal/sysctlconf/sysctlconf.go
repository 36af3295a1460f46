// Package sysctlconf is what the hugepages and overcommit modules share:
// a sysctl.d file pgtune owns (rendered whole, never appended to) and the
// other configuration files whose assignments of the same keys would
// override it at boot.
package sysctlconf

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/aymanbagabas/go-udiff"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/transport"
)

// What to do about another file that would override ours at boot.
const (
	// Fail reports the override as drift in check and refuses in apply.
	Fail = "fail"
	// Comment comments the overriding lines out (with a backup).
	Comment = "comment"
)

// ValidOnConflict checks an on_conflict value.
func ValidOnConflict(s string) error {
	if s != Fail && s != Comment {
		return fmt.Errorf("on_conflict must be %q or %q, got %q", Fail, Comment, s)
	}
	return nil
}

// Setting is one key the module owns, in the order it is written.
type Setting struct{ Key, Value string }

// File describes the module's own file.
type File struct {
	Path       string
	Module     string
	Settings   []Setting
	OnConflict string
}

// Render returns the whole content pgtune keeps in the file.
func (f File) Render() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Managed by pgtune (%s module): rewritten whole on every apply; local edits are lost.\n", f.Module)
	for _, s := range f.Settings {
		fmt.Fprintf(&b, "%s = %s\n", s.Key, s.Value)
	}
	return []byte(b.String())
}

// Conflict is another file's assignment that would override ours at boot.
type Conflict struct {
	facts.SysctlSetting
	Want string // our value
}

func (c Conflict) String() string {
	return fmt.Sprintf("%s:%d sets %s = %s", c.File, c.Line, c.Key, c.Value)
}

// Edit is a rewrite of another file that comments conflicts out.
type Edit struct {
	Path          string // the real file (symlinks resolved)
	Before, After []byte
}

// Plan is what Check found for the module's files; it goes in the
// module's plan State.
type Plan struct {
	File      File
	Existed   bool
	Before    []byte
	After     []byte
	Conflicts []Conflict
	Edits     []Edit
}

// Changed reports whether the own file needs rewriting.
func (p *Plan) Changed() bool { return !p.Existed || string(p.Before) != string(p.After) }

func sameValue(a, b string) bool {
	return strings.Join(strings.Fields(a), " ") == strings.Join(strings.Fields(b), " ")
}

// Check compares the own file and the other configuration files with
// policy and adds the changes to p.
func Check(ctx context.Context, t *engine.Target, p *plan.ModulePlan, f File) (*Plan, error) {
	if err := ValidOnConflict(f.OnConflict); err != nil {
		return nil, err
	}
	if !path.IsAbs(f.Path) || !strings.HasSuffix(f.Path, ".conf") {
		return nil, fmt.Errorf("sysctl_file %q: must be an absolute path ending in .conf (sysctl reads only *.conf)", f.Path)
	}
	pl := &Plan{File: f, After: f.Render()}
	before, existed, err := t.ReadFile(ctx, f.Path)
	if err != nil {
		return nil, err // "read FILE: …" already
	}
	pl.Before, pl.Existed = before, existed
	if pl.Changed() {
		p.Add(plan.Change{
			Kind:   plan.KindFile,
			Target: f.Path,
			Before: string(before),
			After:  string(pl.After),
			Diff:   diff(f.Path, existed, string(before), string(pl.After)),
		})
	}
	for _, s := range f.Settings {
		later, masked := t.Facts.SysctlOverrides(s.Key, f.Path)
		if masked != "" {
			return nil, fmt.Errorf("%s is masked by %s (same file name in a directory sysctl reads first): %s would never be applied at boot; remove %s or choose another sysctl_file",
				f.Path, masked, f.Path, masked)
		}
		for _, o := range later {
			if !sameValue(o.Value, s.Value) {
				pl.Conflicts = append(pl.Conflicts, Conflict{SysctlSetting: o, Want: s.Value})
			}
		}
	}
	if len(pl.Conflicts) == 0 {
		return pl, nil
	}
	if f.OnConflict == Fail {
		for _, c := range pl.Conflicts {
			p.Add(plan.Change{
				Kind:   plan.KindAction,
				Target: fmt.Sprintf("%s:%d", c.File, c.Line),
				Before: fmt.Sprintf("%s = %s", c.Key, c.Value),
				After:  fmt.Sprintf("(overrides %s = %s from %s at boot: remove it, or set on_conflict: comment)", c.Key, c.Want, f.Path),
			})
		}
		return pl, nil
	}
	if err := planEdits(ctx, t, p, pl); err != nil {
		return nil, err
	}
	return pl, nil
}

// planEdits resolves each conflicting file to the real file (99-sysctl.conf
// is usually a link to /etc/sysctl.conf) and renders it with the lines
// commented out.
func planEdits(ctx context.Context, t *engine.Target, p *plan.ModulePlan, pl *Plan) error {
	var paths []string
	seen := map[string]bool{}
	for _, c := range pl.Conflicts {
		if !seen[c.File] {
			seen[c.File] = true
			paths = append(paths, c.File)
		}
	}
	real, err := resolve(ctx, t, paths)
	if err != nil {
		return err
	}
	lines := map[string]map[int]bool{}
	var order []string
	for _, c := range pl.Conflicts {
		r := real[c.File]
		if lines[r] == nil {
			lines[r] = map[int]bool{}
			order = append(order, r)
		}
		lines[r][c.Line] = true
	}
	for _, r := range order {
		data, ok, err := t.ReadFile(ctx, r)
		if err != nil {
			return err // "read FILE: …" already
		}
		if !ok {
			return fmt.Errorf("%s disappeared since facts were gathered; run again", r)
		}
		all := strings.Split(string(data), "\n")
		var nums []int
		for n := range lines[r] {
			// The facts were read moments ago; make sure the line is
			// still the assignment they saw before touching it.
			if n > len(all) {
				return fmt.Errorf("%s changed since facts were gathered; run again", r)
			}
			if _, _, _, ok := facts.ParseSysctlLine(all[n-1]); !ok {
				return fmt.Errorf("%s:%d changed since facts were gathered; run again", r, n)
			}
			nums = append(nums, n)
		}
		sort.Ints(nums)
		after := facts.CommentOutSysctlLines(data, nums, "commented out by pgtune: overrides "+pl.File.Path)
		pl.Edits = append(pl.Edits, Edit{Path: r, Before: data, After: after})
		p.Add(plan.Change{
			Kind:   plan.KindFile,
			Target: r,
			Before: string(data),
			After:  string(after),
			Diff:   diff(r, true, string(data), string(after)),
		})
	}
	return nil
}

// resolveScript prints the real path of each argument, one a line.
const resolveScript = `for p in "$@"; do readlink -f -- "$p" || printf '%s\n' "$p"; done`

// OpResolve names resolveScript for fake hosts (Args[4:]: the paths).
const OpResolve transport.Op = "sysctlconf-resolve"

func resolve(ctx context.Context, t *engine.Target, paths []string) (map[string]string, error) {
	res, err := t.Transport.Run(ctx, transport.Command{Op: OpResolve, Args: append([]string{"sh", "-c", resolveScript, "sh"}, paths...), Become: t.Become})
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", strings.Join(paths, " "), err)
	}
	out := strings.Split(strings.TrimRight(string(res.Stdout), "\n"), "\n")
	if len(out) != len(paths) {
		return nil, fmt.Errorf("resolve %s: unexpected output %q", strings.Join(paths, " "), transport.Clip(string(res.Stdout)))
	}
	m := map[string]string{}
	for i, p := range paths {
		m[p] = out[i]
	}
	return m, nil
}

func diff(p string, existed bool, before, after string) string {
	from := p
	if !existed {
		from = "/dev/null"
	}
	return udiff.Unified(from, p, before, after)
}

// ConflictError lists the overrides that on_conflict: fail refuses.
func (p *Plan) ConflictError() error {
	var parts []string
	for _, c := range p.Conflicts {
		parts = append(parts, c.String())
	}
	return fmt.Errorf("other sysctl files override %s at boot: %s; remove those lines or set on_conflict: comment",
		p.File.Path, strings.Join(parts, "; "))
}

// Apply refuses on conflicts (fail), comments them out (comment), and
// writes the own file. Nothing is written when it refuses.
func Apply(ctx context.Context, t *engine.Target, p *Plan) error {
	if len(p.Conflicts) > 0 && p.File.OnConflict == Fail {
		return p.ConflictError()
	}
	for _, e := range p.Edits {
		// The run's journal keeps the file as it was (Target.WriteFile).
		if err := t.WriteFile(ctx, e.Path, e.After, transport.WriteOptions{}); err != nil {
			return fmt.Errorf("comment out overriding lines: %w", err)
		}
	}
	if p.Changed() {
		if err := t.WriteFile(ctx, p.File.Path, p.After, transport.WriteOptions{Mode: "0644"}); err != nil {
			return err
		}
	}
	return nil
}

// VerifyOwn checks that the own file holds what was planned.
func VerifyOwn(ctx context.Context, t *engine.Target, p *Plan) error {
	data, ok, err := t.ReadFile(ctx, p.File.Path)
	if err != nil {
		return err
	}
	if !ok || string(data) != string(p.After) {
		return fmt.Errorf("%s does not hold the planned content", p.File.Path)
	}
	return nil
}

// Itoa is strconv.FormatInt for the values the modules write.
func Itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Bytes renders a size for messages: "6.0 GiB".
func Bytes(n int64) string {
	neg := n < 0
	if neg {
		n = -n
	}
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	s := fmt.Sprintf("%.1f %s", f, units[i])
	if i == 0 {
		s = fmt.Sprintf("%d B", n)
	}
	if neg {
		return "-" + s
	}
	return s
}

// Meminfo reads /proc/meminfo on the host: kB values in bytes, HugePages_*
// as counts.
func Meminfo(ctx context.Context, t *engine.Target) (map[string]int64, error) {
	data, _, err := t.ReadFile(ctx, "/proc/meminfo")
	if err != nil {
		return nil, err
	}
	m, err := facts.ParseMeminfo(data)
	if err != nil {
		return nil, fmt.Errorf("/proc/meminfo: %w", err)
	}
	if _, ok := m["MemTotal"]; !ok {
		return nil, fmt.Errorf("/proc/meminfo: no MemTotal")
	}
	return m, nil
}

// Unwritable handles a kernel value the host will not let pgtune set in
// check. A read-only /proc/sys (a container) can never be fixed: an error.
// A login without root only needs become: a note, so that audits run
// unprivileged; apply then refuses (RequireRoot).
func Unwritable(f *facts.Facts, key string, p *plan.ModulePlan) error {
	if f.IsRoot {
		return NotWritable(f, key)
	}
	p.Note(NotWritable(f, key).Error() + "; apply will refuse")
	return nil
}

// RequireRoot refuses to change a host's kernel values without root.
func RequireRoot(f *facts.Facts, key string) error {
	if f.IsRoot && f.SysctlWritable {
		return nil
	}
	return NotWritable(f, key)
}

// NotWritable explains why a kernel value cannot be set on the host.
func NotWritable(f *facts.Facts, key string) error {
	if f.IsRoot {
		return fmt.Errorf("/proc/sys is read-only (container?): cannot set %s", key)
	}
	return fmt.Errorf("cannot set %s: not root on the host (set become: true for passwordless sudo)", key)
}
