package hugepages

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/modules/internal/fakehost"
	"github.com/pgtune/pgtune/modules/internal/moduletest"
	"github.com/pgtune/pgtune/modules/internal/sysctlconf"
)

const (
	MiB = int64(1) << 20
	GiB = int64(1) << 30
)

func val(t *testing.T, src string) expr.Value {
	t.Helper()
	v, err := expr.Parse(src, "policy.yml", 7, 13)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestCheck(t *testing.T) {
	const file = "/etc/sysctl.d/10-hugepages.conf"
	tests := []struct {
		name    string
		host    func(h *fakehost.Host)
		params  func(t *testing.T, p *Params)
		changes []string
		pages   int64
		err     string
		notes   string
	}{
		{
			name:    "fresh host: a quarter of RAM",
			changes: []string{"vm.nr_hugepages 0→2048", "file " + file},
			pages:   2048,
		},
		{
			name: "in policy",
			host: func(h *fakehost.Host) {
				h.Sysctl["vm.nr_hugepages"] = "2048"
				h.Files[file] = string(sysctlconf.File{Module: Name, Settings: []sysctlconf.Setting{{Key: key, Value: "2048"}}}.Render())
			},
			pages: 2048,
		},
		{
			name:    "rounded down to whole pages",
			params:  func(t *testing.T, p *Params) { p.Pool = val(t, "${5 * MiB + 1}") },
			changes: []string{"vm.nr_hugepages 0→2", "file " + file},
			pages:   2,
		},
		{
			name:    "literal bytes",
			params:  func(t *testing.T, p *Params) { p.Pool = val(t, "1073741824") },
			changes: []string{"vm.nr_hugepages 0→512", "file " + file},
			pages:   512,
		},
		{
			name:   "preflight floor",
			host:   func(h *fakehost.Host) { h.MemAvailableKB = 5 << 20 },
			params: func(t *testing.T, p *Params) { p.MinAvailable = val(t, "${2 * GiB}") },
			// 5 GiB available - 4 GiB pool = 1 GiB left, floor 2 GiB.
			err: "preflight: growing the pool by 2048 pages (4.0 GiB) leaves MemAvailable at 1.0 GiB, below min_available 2.0 GiB: 1.0 GiB missing",
		},
		{
			name: "default floor is 10% of RAM, at least 512 MiB",
			host: func(h *fakehost.Host) { h.MemAvailableKB = 5<<20 + 512<<10 },
			err:  "below min_available 1.6 GiB",
		},
		{
			name:    "floor disabled",
			host:    func(h *fakehost.Host) { h.MemAvailableKB = 1 << 20 },
			params:  func(t *testing.T, p *Params) { p.MinAvailable = val(t, "0") },
			changes: []string{"vm.nr_hugepages 0→2048", "file " + file},
			pages:   2048,
		},
		{
			name: "read-only /proc/sys",
			host: func(h *fakehost.Host) { h.ReadOnly = true },
			err:  "/proc/sys is read-only (container?): cannot set vm.nr_hugepages",
		},
		{
			name:    "not root: the audit still plans, and says apply needs become",
			host:    func(h *fakehost.Host) { h.NotRoot = true },
			changes: []string{"vm.nr_hugepages 0→2048", "file " + file},
			pages:   2048,
			notes:   "cannot set vm.nr_hugepages: not root on the host (set become: true for passwordless sudo); apply will refuse",
		},
		{
			name: "shrinking under a postmaster",
			host: func(h *fakehost.Host) { h.Sysctl["vm.nr_hugepages"] = "3000"; h.InUsePages = 2500 },
			err:  "refusing to shrink the pool to 2048 pages: 2500 pages are in use or reserved",
		},
		{
			name:    "shrinking free pages",
			host:    func(h *fakehost.Host) { h.Sysctl["vm.nr_hugepages"] = "3000"; h.InUsePages = 1000 },
			changes: []string{"vm.nr_hugepages 3000→2048", "file " + file},
			pages:   2048,
		},
		{
			name:   "above max_pool",
			params: func(t *testing.T, p *Params) { p.Pool = val(t, "${floor(facts.mem_total * 0.9)}") },
			err:    "policy.yml:7:13: pool 14.4 GiB (15461882265 bytes) is above max_pool 12.0 GiB (75% of RAM)",
		},
		{
			name:   "negative",
			params: func(t *testing.T, p *Params) { p.Pool = val(t, "${-1 * GiB}") },
			err:    "policy.yml:7:13: pool must not be negative",
		},
		{
			name:   "bad on_conflict",
			params: func(t *testing.T, p *Params) { p.OnConflict = val(t, "ignore") },
			err:    `policy.yml:7:13: on_conflict must be "fail" or "comment", got "ignore"`,
		},
		{
			name:   "sysctl_file must be *.conf",
			params: func(t *testing.T, p *Params) { p.SysctlFile = val(t, "/etc/sysctl.d/hugepages") },
			err:    "must be an absolute path ending in .conf",
		},
		{
			name: "override in sysctl.conf, reached twice (link and file)",
			host: func(h *fakehost.Host) {
				h.Files["/etc/sysctl.conf"] = "# local\nvm.nr_hugepages = 100\n"
				h.Links["/etc/sysctl.d/99-sysctl.conf"] = "../sysctl.conf"
			},
			changes: []string{"vm.nr_hugepages 0→2048", "file " + file,
				"/etc/sysctl.d/99-sysctl.conf:2 vm.nr_hugepages = 100→(overrides vm.nr_hugepages = 2048 from /etc/sysctl.d/10-hugepages.conf at boot: remove it, or set on_conflict: comment)",
				"/etc/sysctl.conf:2 vm.nr_hugepages = 100→(overrides vm.nr_hugepages = 2048 from /etc/sysctl.d/10-hugepages.conf at boot: remove it, or set on_conflict: comment)"},
			pages: 2048,
		},
		{
			name: "override with comment: one edit of the real file",
			host: func(h *fakehost.Host) {
				h.Files["/etc/sysctl.conf"] = "# local\nvm.nr_hugepages = 100\n"
				h.Links["/etc/sysctl.d/99-sysctl.conf"] = "../sysctl.conf"
			},
			params:  func(t *testing.T, p *Params) { p.OnConflict = val(t, "comment") },
			changes: []string{"vm.nr_hugepages 0→2048", "file " + file, "file /etc/sysctl.conf"},
			pages:   2048,
		},
		{
			name: "earlier file or same value: no conflict",
			host: func(h *fakehost.Host) {
				h.Files["/usr/lib/sysctl.d/05-vendor.conf"] = "vm.nr_hugepages = 7\n"
				h.Files["/etc/sysctl.d/50-same.conf"] = "vm/nr_hugepages=2048\n"
				h.Files["/usr/lib/sysctl.d/10-hugepages.conf"] = "vm.nr_hugepages = 9\n" // masked by ours
			},
			changes: []string{"vm.nr_hugepages 0→2048", "file " + file},
			pages:   2048,
		},
		{
			name: "our file masked by an earlier directory",
			host: func(h *fakehost.Host) {
				h.Files["/etc/sysctl.d/10-hugepages.conf"] = "vm.nr_hugepages = 9\n"
			},
			params: func(t *testing.T, p *Params) { p.SysctlFile = val(t, "/usr/lib/sysctl.d/10-hugepages.conf") },
			err:    "/usr/lib/sysctl.d/10-hugepages.conf is masked by /etc/sysctl.d/10-hugepages.conf",
		},
		{
			name:    "NUMA note",
			host:    func(h *fakehost.Host) { h.Nodes = 2; h.Sysctl["vm.nr_hugepages"] = "1024" },
			changes: []string{"vm.nr_hugepages 1024→2048", "file " + file},
			pages:   2048,
			notes:   "2 NUMA nodes, huge pages per node now: node0=512 node1=512",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fakehost.New()
			if tt.host != nil {
				tt.host(h)
			}
			prm := DefaultParams()
			if tt.params != nil {
				tt.params(t, prm)
			}
			p, err := New().Check(context.Background(), h.Target("fake"), prm)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(moduletest.Changes(p), "\n"); got != strings.Join(tt.changes, "\n") {
				t.Errorf("changes:\n%s\nwant:\n%s", got, strings.Join(tt.changes, "\n"))
			}
			if p.Outputs["pages"] != tt.pages || p.Outputs["pool"] != tt.pages*2*MiB || p.Outputs["page_size"] != 2*MiB {
				t.Errorf("outputs %v, want %d pages", p.Outputs, tt.pages)
			}
			if got := strings.Join(p.Notes, "\n"); got != tt.notes {
				t.Errorf("notes %q, want %q", got, tt.notes)
			}
			if len(h.Commands("sysctl")) != 0 || len(h.Commands("write")) != 0 || h.Compactions != 0 {
				t.Errorf("check changed the host: %v", h.Log)
			}
		})
	}
}

func TestCheckFileDiff(t *testing.T) {
	h := fakehost.New()
	h.Files["/etc/sysctl.d/10-hugepages.conf"] = "vm.nr_hugepages = 10\n"
	p, err := New().Check(context.Background(), h.Target("fake"), DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	var c plan.Change
	for _, x := range p.Changes {
		if x.Kind == plan.KindFile {
			c = x
		}
	}
	for _, want := range []string{"--- /etc/sysctl.d/10-hugepages.conf", "+++ /etc/sysctl.d/10-hugepages.conf", "-vm.nr_hugepages = 10", "+vm.nr_hugepages = 2048"} {
		if !strings.Contains(c.Diff, want) {
			t.Errorf("diff lacks %q:\n%s", want, c.Diff)
		}
	}
	if c.Before != "vm.nr_hugepages = 10\n" || !strings.Contains(c.After, "vm.nr_hugepages = 2048\n") {
		t.Errorf("before/after: %q %q", c.Before, c.After)
	}
}

// run checks, applies and verifies like the runner, returning the apply
// error.
func run(t *testing.T, h *fakehost.Host, prm *Params) (*plan.ModulePlan, error) {
	t.Helper()
	ctx := context.Background()
	m := New()
	tg := h.Target("fake")
	p, err := m.Check(ctx, tg, prm)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, tg, p); err != nil {
		return p, err
	}
	// The engine makes the held-back shrink once the modules that
	// require this one ran (none here), then verifies.
	if err := m.ApplyShrink(ctx, tg, p); err != nil {
		return p, err
	}
	if err := m.Verify(ctx, tg, p); err != nil {
		t.Fatalf("verify: %v", err)
	}
	again, err := m.Check(ctx, h.Target("fake"), prm)
	if err != nil {
		t.Fatal(err)
	}
	if again.HasChanges() {
		t.Errorf("re-check after apply: %v", moduletest.Changes(again))
	}
	return p, nil
}

func TestApply(t *testing.T) {
	const file = "/etc/sysctl.d/10-hugepages.conf"
	tests := []struct {
		name     string
		host     func(h *fakehost.Host)
		err      string
		log      []string // sysctl/prepare/write/remove commands in order
		pages    string
		fileWant string // "" = absent
	}{
		{
			name:  "grow",
			log:   []string{"write " + file, "prepare full", "sysctl vm.nr_hugepages=2048"},
			pages: "2048",
		},
		{
			name: "short once, retry after compaction",
			host: func(h *fakehost.Host) {
				h.MaxPages = func(c int) int64 {
					if c < 2 {
						return 1500
					}
					return 1 << 40
				}
			},
			log:   []string{"write " + file, "prepare full", "sysctl vm.nr_hugepages=2048", "prepare compact", "sysctl vm.nr_hugepages=2048"},
			pages: "2048",
		},
		{
			name: "short twice: back out",
			host: func(h *fakehost.Host) { h.MaxPages = func(int) int64 { return 1900 } },
			err:  "allocated 1900 of 2048 huge pages (3.7 GiB of 4.0 GiB); the pool is back at 0 pages and /etc/sysctl.d/10-hugepages.conf is as it was",
			log: []string{"write " + file, "prepare full", "sysctl vm.nr_hugepages=2048", "prepare compact",
				"sysctl vm.nr_hugepages=2048", "sysctl vm.nr_hugepages=0", "remove " + file},
			pages: "0",
		},
		{
			name: "short twice with an old file: it is put back",
			host: func(h *fakehost.Host) {
				h.Sysctl["vm.nr_hugepages"] = "100"
				h.Files[file] = "vm.nr_hugepages = 100\n"
				h.MaxPages = func(int) int64 { return 1900 }
			},
			err: "allocated 1900 of 2048 huge pages",
			log: []string{"write " + file, "prepare full", "sysctl vm.nr_hugepages=2048", "prepare compact",
				"sysctl vm.nr_hugepages=2048", "sysctl vm.nr_hugepages=100", "write " + file},
			pages:    "100",
			fileWant: "vm.nr_hugepages = 100\n",
		},
		{
			name: "shrink: no cache drop",
			host: func(h *fakehost.Host) { h.Sysctl["vm.nr_hugepages"] = "4000" },
			log:  []string{"write " + file, "sysctl vm.nr_hugepages=2048"},
		},
		{
			name: "not root: refused before anything is written",
			host: func(h *fakehost.Host) { h.NotRoot = true },
			err:  "cannot set vm.nr_hugepages: not root on the host (set become: true for passwordless sudo)",
			log:  nil, pages: "0",
		},
		{
			name: "override refused before anything is written",
			host: func(h *fakehost.Host) { h.Files["/etc/sysctl.d/60-db.conf"] = "vm.nr_hugepages=1\n" },
			err:  "other sysctl files override /etc/sysctl.d/10-hugepages.conf at boot: /etc/sysctl.d/60-db.conf:1 sets vm.nr_hugepages = 1; remove those lines or set on_conflict: comment",
			log:  nil, pages: "0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fakehost.New()
			if tt.host != nil {
				tt.host(h)
			}
			_, err := run(t, h, DefaultParams())
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				if got := h.Sysctl["vm.nr_hugepages"]; got != tt.pages {
					t.Errorf("pool left at %s, want %s", got, tt.pages)
				}
				if got := h.Files[file]; got != tt.fileWant {
					t.Errorf("file left as %q, want %q", got, tt.fileWant)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range h.Log {
				for _, p := range []string{"sysctl", "prepare", "write", "remove"} {
					if strings.HasPrefix(l, p) {
						got = append(got, l)
					}
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.log, "\n") {
				t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.log, "\n"))
			}
		})
	}
}

func TestApplyCommentsOverride(t *testing.T) {
	h := fakehost.New()
	h.Files["/etc/sysctl.conf"] = "# local\nvm.nr_hugepages = 100\nkernel.pid_max = 4194304\n"
	h.Links["/etc/sysctl.d/99-sysctl.conf"] = "../sysctl.conf"
	prm := DefaultParams()
	prm.OnConflict = val(t, "comment")
	if _, err := run(t, h, prm); err != nil {
		t.Fatal(err)
	}
	want := "# local\n# vm.nr_hugepages = 100  # commented out by pgtune: overrides /etc/sysctl.d/10-hugepages.conf\nkernel.pid_max = 4194304\n"
	if got := h.Files["/etc/sysctl.conf"]; got != want {
		t.Errorf("sysctl.conf:\n%s\nwant:\n%s", got, want)
	}
	// The run's journal keeps the file as it was.
	if got, _ := h.Backup("/etc/sysctl.conf"); got != "# local\nvm.nr_hugepages = 100\nkernel.pid_max = 4194304\n" {
		t.Errorf("backup: %q", got)
	}
	if _, ok := h.Links["/etc/sysctl.d/99-sysctl.conf"]; !ok {
		t.Errorf("the 99-sysctl.conf link was replaced by a file")
	}
	if w, ok := h.Facts().SysctlWinner(key); !ok || w.Value != "2048" {
		t.Errorf("boot winner now %+v", w)
	}
}

func TestVerifyCatchesDrift(t *testing.T) {
	h := fakehost.New()
	ctx := context.Background()
	m := New()
	tg := h.Target("fake")
	p, err := m.Check(ctx, tg, DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	h.Sysctl["vm.nr_hugepages"] = "7" // someone else moved it
	err = m.Verify(ctx, tg, p)
	if err == nil || !strings.Contains(err.Error(), "HugePages_Total is 7 (without surplus), planned 2048") {
		t.Errorf("verify: %v", err)
	}
	var pe *expr.PosError
	_ = errors.As(err, &pe)
}
