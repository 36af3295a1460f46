package hugepages

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/modules/internal/fakehost"
	"github.com/pgtune/pgtune/modules/internal/moduletest"
)

const (
	gigSysfs = "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"
	tmpfiles = "/etc/tmpfiles.d/pgtune-hugepages.conf"
	node0    = "/sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages"
	node1    = "/sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages"
)

// withGig makes the fake kernel offer 1 GiB pages beside 2 MiB ones.
func withGig(h *fakehost.Host) { h.ExtraSizesKB = []int64{1 << 20} }

func TestParsePageSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  string
	}{
		{in: "1GiB", want: GiB},
		{in: "1G", want: GiB},
		{in: "2MiB", want: 2 * MiB},
		{in: "2048kB", want: 2 * MiB},
		{in: "2097152", want: 2 * MiB},
		{in: " 16GiB ", want: 16 * GiB},
		{in: "32GiB", err: `page_size "32GiB": larger than 16 GiB`},
		{in: "3MiB", err: `page_size "3MiB": a huge page size is a power of two of at least 8 KiB`},
		{in: "4kB", err: "a power of two of at least 8 KiB"},
		{in: "1.5G", err: `page_size "1.5G": want a size such as 2MiB or 1GiB`},
		{in: "1TiB", err: `unknown unit "TiB"`},
		{in: "", err: "want a size"},
		{in: "99999999999999999999", err: "larger than 16 GiB"},
	} {
		got, err := parsePageSize(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parsePageSize(%q) = %d, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parsePageSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

func TestCheckPageSize(t *testing.T) {
	tests := []struct {
		name    string
		host    func(h *fakehost.Host)
		params  func(t *testing.T, p *Params)
		changes []string
		pages   int64
		size    int64
		err     string
		notes   []string // each must appear in the notes
	}{
		{
			name:   "1 GiB where the kernel offers 2 MiB only",
			params: func(t *testing.T, p *Params) { p.PageSize = val(t, "1GiB") },
			err:    "page_size 1 GiB: the host offers 2 MiB huge pages only (no /sys/kernel/mm/hugepages/hugepages-1048576kB; on x86, 1 GiB pages need a CPU with the pdpe1gb flag)",
		},
		{
			name:   "a size no kernel lists",
			host:   withGig,
			params: func(t *testing.T, p *Params) { p.PageSize = val(t, "16GiB") },
			err:    "page_size 16 GiB: the host offers 2 MiB and 1 GiB huge pages only (no /sys/kernel/mm/hugepages/hugepages-16777216kB)",
		},
		{
			name:    "2 MiB spelled out is the default path",
			params:  func(t *testing.T, p *Params) { p.PageSize = val(t, "2MiB") },
			changes: []string{"vm.nr_hugepages 0→2048", "file /etc/sysctl.d/10-hugepages.conf"},
			pages:   2048, size: 2 * MiB,
		},
		{
			name:    "1 GiB: its sysfs pool and a tmpfiles line, vm.nr_hugepages untouched",
			host:    withGig,
			params:  func(t *testing.T, p *Params) { p.PageSize = val(t, "1GiB") },
			changes: []string{gigSysfs + " 0→4", "file " + tmpfiles},
			pages:   4, size: GiB,
			notes: []string{"1 GiB pages are persisted by /etc/tmpfiles.d/pgtune-hugepages.conf (systemd-tmpfiles at boot); to be sure of them on a fragmented host, add hugepagesz=1G hugepages=4 to the kernel command line (pgtune does not edit the boot loader)"},
		},
		{
			name:    "1 GiB pool rounded down to whole gigabytes",
			host:    withGig,
			params:  func(t *testing.T, p *Params) { p.PageSize = val(t, "1GiB"); p.Pool = val(t, "${3 * GiB - 1}") },
			changes: []string{gigSysfs + " 0→2", "file " + tmpfiles},
			pages:   2, size: GiB,
		},
		{
			name: "1 GiB beside a 2 MiB pool: the note says it stays",
			host: func(h *fakehost.Host) { withGig(h); h.Sysctl["vm.nr_hugepages"] = "100" },
			params: func(t *testing.T, p *Params) {
				p.PageSize = val(t, "1GiB")
			},
			changes: []string{gigSysfs + " 0→4", "file " + tmpfiles},
			pages:   4, size: GiB,
			notes: []string{"100 huge pages of the default size (2 MiB) stay reserved: page_size 1 GiB manages only its own pool"},
		},
		{
			// A machine whose default huge page size is 1 GiB (as
			// TestIntegrationGigPages may meet): page_size 1GiB is the
			// default path, vm.nr_hugepages and the sysctl file.
			name:    "1 GiB where it is the kernel's default size",
			host:    func(h *fakehost.Host) { h.HugePageKB = 1 << 20; h.ExtraSizesKB = []int64{2048} },
			params:  func(t *testing.T, p *Params) { p.PageSize = val(t, "1GiB") },
			changes: []string{"vm.nr_hugepages 0→4", "file /etc/sysctl.d/10-hugepages.conf"},
			pages:   4, size: GiB,
		},
		{
			name:   "1 GiB preflight counts gigabytes",
			host:   func(h *fakehost.Host) { withGig(h); h.MemAvailableKB = 5 << 20 },
			params: func(t *testing.T, p *Params) { p.PageSize = val(t, "1GiB"); p.MinAvailable = val(t, "${2 * GiB}") },
			err:    "preflight: growing the pool by 4 pages (4.0 GiB) leaves MemAvailable at 1.0 GiB, below min_available 2.0 GiB",
		},
		{
			name:   "bad page_size",
			params: func(t *testing.T, p *Params) { p.PageSize = val(t, "3MiB") },
			err:    `policy.yml:7:13: page_size "3MiB": a huge page size is a power of two`,
		},
		{
			name:   "tmpfiles_file outside tmpfiles.d",
			params: func(t *testing.T, p *Params) { p.TmpfilesFile = val(t, "/etc/hugepages.conf") },
			err:    `policy.yml:7:13: tmpfiles_file "/etc/hugepages.conf": must be an absolute path ending in .conf in a tmpfiles.d directory`,
		},
		{
			name:   "bad numa",
			params: func(t *testing.T, p *Params) { p.NUMA = val(t, "interleave") },
			err:    `policy.yml:7:13: numa must be "kernel" or "spread", got "interleave"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fakehost.New()
			if tt.host != nil {
				tt.host(h)
			}
			prm := DefaultParams()
			tt.params(t, prm)
			p, err := New().Check(context.Background(), h.Target("fake"), prm)
			if len(h.Commands("sysctl"))+len(h.Commands("sysfs"))+len(h.Commands("write"))+h.Compactions != 0 {
				t.Errorf("check changed the host: %v", h.Log)
			}
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
			if p.Outputs["pages"] != tt.pages || p.Outputs["pool"] != tt.pages*tt.size || p.Outputs["page_size"] != tt.size {
				t.Errorf("outputs %v, want %d pages of %d", p.Outputs, tt.pages, tt.size)
			}
			for _, n := range tt.notes {
				if !strings.Contains(strings.Join(p.Notes, "\n"), n) {
					t.Errorf("notes %q lack %q", p.Notes, n)
				}
			}
		})
	}
}

func TestValidatePageSize(t *testing.T) {
	prm := DefaultParams()
	prm.PageSize = val(t, "1.5G")
	if err := New().Validate(prm); err == nil || !strings.Contains(err.Error(), `page_size "1.5G"`) {
		t.Errorf("Validate = %v", err)
	}
	prm.PageSize = val(t, "1GiB") // fine without a host: the host decides whether it offers it
	if err := New().Validate(prm); err != nil {
		t.Errorf("Validate(1GiB) = %v", err)
	}
}

func TestApplyGigPages(t *testing.T) {
	h := fakehost.New()
	withGig(h)
	prm := DefaultParams()
	prm.PageSize = val(t, "1GiB")
	if _, err := run(t, h, prm); err != nil {
		t.Fatal(err)
	}
	want := []string{"write " + tmpfiles, "prepare full", "sysfs " + gigSysfs + "=4"}
	if got := changesLog(h); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if h.Sysctl["vm.nr_hugepages"] != "0" {
		t.Errorf("vm.nr_hugepages = %s: the default pool must stay", h.Sysctl["vm.nr_hugepages"])
	}
	if !strings.Contains(h.Files[tmpfiles], "\nw "+gigSysfs+" - - - - 4\n") {
		t.Errorf("tmpfiles file:\n%s", h.Files[tmpfiles])
	}
	if _, ok := h.Files["/etc/sysctl.d/10-hugepages.conf"]; ok {
		t.Errorf("a sysctl file was written for 1 GiB pages")
	}
}

func TestApplyGigPagesShortfall(t *testing.T) {
	h := fakehost.New()
	withGig(h)
	h.Files[tmpfiles] = "# an older pool\n"
	h.MaxPages = func(int) int64 { return 3 }
	waits := recordPauses(t)
	prm := DefaultParams()
	prm.PageSize = val(t, "1GiB")
	_, err := run(t, h, prm)
	const wantErr = "allocated 3 of 4 huge pages (3.0 GiB of 4.0 GiB); the pool is back at 0 pages and /etc/tmpfiles.d/pgtune-hugepages.conf is as it was"
	if err == nil || err.Error() != wantErr {
		t.Fatalf("err = %v\nwant %s", err, wantErr)
	}
	want := []string{"write " + tmpfiles, "prepare full", "sysfs " + gigSysfs + "=4"}
	for range 5 {
		want = append(want, "prepare compact", "sysfs "+gigSysfs+"=4")
	}
	want = append(want, "sysfs "+gigSysfs+"=0", "write "+tmpfiles)
	if got := fmt.Sprint(*waits); got != "[2s 4s 8s 16s]" {
		t.Errorf("pauses before the retries: %s, want [2s 4s 8s 16s]", got)
	}
	if got := changesLog(h); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if h.Files[tmpfiles] != "# an older pool\n" {
		t.Errorf("tmpfiles file not restored: %q", h.Files[tmpfiles])
	}
	if got := h.NodePages(1 << 20); got[0] != 0 {
		t.Errorf("1 GiB pool left at %v", got)
	}
}

// recordPauses replaces the retry backoff for the test with a recorder.
func recordPauses(t *testing.T) *[]time.Duration {
	var waits []time.Duration
	old := pause
	pause = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }
	t.Cleanup(func() { pause = old })
	return &waits
}

// A gigantic page refused for a while (pinned or locked pages in its
// range, as on a box just booted) is taken on a later retry.
func TestApplyGigPagesTransientShortfall(t *testing.T) {
	h := fakehost.New()
	withGig(h)
	h.MaxPages = func(compactions int) int64 {
		if compactions < 3 { // the full prepare and two compactions
			return 0
		}
		return 1 << 20
	}
	waits := recordPauses(t)
	prm := DefaultParams()
	prm.PageSize = val(t, "1GiB")
	if _, err := run(t, h, prm); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(*waits); got != "[2s]" {
		t.Errorf("pauses: %s, want [2s] (a retry at once, then one after 2 s)", got)
	}
	if got := h.NodePages(1 << 20); got[0] != 4 {
		t.Errorf("1 GiB pool %v, want 4", got)
	}
}

// The default size is retried once at once: a pool of buddy pages that
// compaction cannot find is fragmentation, not a pin that waiting frees.
func TestApplyDefaultSizeRetriesOnce(t *testing.T) {
	h := fakehost.New()
	h.MaxPages = func(int) int64 { return 100 }
	waits := recordPauses(t)
	if _, err := run(t, h, DefaultParams()); err == nil || !strings.Contains(err.Error(), "allocated 100 of") {
		t.Fatalf("err = %v, want the shortfall", err)
	}
	if len(*waits) != 0 {
		t.Errorf("pauses %v for the default size", *waits)
	}
}

// A run cancelled during the backoff backs out at once.
func TestApplyGigPagesCancelledWhileWaiting(t *testing.T) {
	h := fakehost.New()
	withGig(h)
	h.MaxPages = func(int) int64 { return 0 }
	old := pause
	pause = func(context.Context, time.Duration) error { return context.Canceled }
	t.Cleanup(func() { pause = old })
	prm := DefaultParams()
	prm.PageSize = val(t, "1GiB")
	_, err := run(t, h, prm)
	const want = "allocated 0 of 4 huge pages (0 B of 4.0 GiB): context canceled; the pool is back at 0 pages"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if got := h.NodePages(1 << 20); got[0] != 0 {
		t.Errorf("1 GiB pool left at %v", got)
	}
}

func TestManages(t *testing.T) {
	m := New()
	for _, tc := range []struct {
		kind, target string
		want         bool
	}{
		{"sysctl", "vm.nr_hugepages", true},
		{"sysctl", "vm.overcommit_memory", false},
		{"sysfs", gigSysfs, true},
		{"sysfs", node1, true},
		{"sysfs", "/sys/kernel/mm/transparent_hugepage/enabled", false},
		{"sysfs", "/sys/kernel/mm/hugepages/hugepages-2048kB/../../../../etc/x", false},
		{"file", tmpfiles, true},
		{"file", "/etc/sysctl.d/10-hugepages.conf", true},
		{"file", "/etc/tmpfiles.d/.hidden.conf", false},
		{"file", "/etc/passwd", false},
	} {
		if got := m.Manages(nil, tc.kind, tc.target); got != tc.want {
			t.Errorf("Manages(%s, %s) = %v", tc.kind, tc.target, got)
		}
	}
}

func TestNUMA(t *testing.T) {
	tests := []struct {
		name    string
		host    func(h *fakehost.Host)
		numa    string
		changes []string
		note    string
		err     string
		log     []string // kernel writes at apply
		after   []int64  // 2 MiB pages per node after apply
	}{
		{
			name:    "kernel policy: an uneven pool is reported, not changed",
			host:    func(h *fakehost.Host) { h.Nodes = 2; h.SetNodePages(2048, 2000, 48) },
			numa:    NUMAKernel,
			changes: []string{"file /etc/sysctl.d/10-hugepages.conf"},
			note:    "2 MiB pages are uneven over 2 NUMA nodes (node0=2000 node1=48 of 2048): a node short of its share of 1024 makes its backends reach across nodes; numa: spread evens the pool",
		},
		{
			name:    "spread: the full node shrinks first, then the other grows",
			host:    func(h *fakehost.Host) { h.Nodes = 2; h.SetNodePages(2048, 2000, 48) },
			numa:    NUMASpread,
			changes: []string{node0 + " 2000→1024", node1 + " 48→1024", "file /etc/sysctl.d/10-hugepages.conf"},
			log:     []string{"write /etc/sysctl.d/10-hugepages.conf", "prepare full", "sysfs " + node0 + "=1024", "sysfs " + node1 + "=1024"},
			after:   []int64{1024, 1024},
		},
		{
			name:    "spread from nothing, odd count: the remainder to node0",
			host:    func(h *fakehost.Host) { h.Nodes = 3 },
			numa:    NUMASpread,
			changes: []string{node0 + " 0→683", node1 + " 0→683", "/sys/devices/system/node/node2/hugepages/hugepages-2048kB/nr_hugepages 0→682", "file /etc/sysctl.d/10-hugepages.conf"},
			after:   []int64{683, 683, 682},
		},
		{
			name: "spread and already even: nothing to do",
			host: func(h *fakehost.Host) {
				h.Nodes = 2
				h.SetNodePages(2048, 1024, 1024)
				h.Files["/etc/sysctl.d/10-hugepages.conf"] = "vm.nr_hugepages = 2048\n"
			},
			numa:    NUMASpread,
			changes: []string{"file /etc/sysctl.d/10-hugepages.conf"}, // the file gets pgtune's header
			after:   []int64{1024, 1024},
		},
		{
			name: "spread refuses to take pages in use from a node",
			host: func(h *fakehost.Host) {
				h.Nodes = 2
				h.SetNodePages(2048, 2000, 48)
				h.InUsePages = 1500
			},
			numa: NUMASpread,
			err:  "numa spread: node0 has 1500 huge pages of 2 MiB in use; it cannot shrink to 1024 (lower shared_buffers and restart PostgreSQL first)",
		},
		{
			name: "a node falls short: the node's numbers, everything put back",
			host: func(h *fakehost.Host) {
				h.Nodes = 2
				h.NodeMax = func(n int) int64 {
					if n == 1 {
						return 700
					}
					return 1 << 40
				}
			},
			numa: NUMASpread,
			err:  "NUMA node shortfall: node1 holds 700 of 1024 huge pages of 2 MiB; the pool is back at 0 pages and /etc/sysctl.d/10-hugepages.conf is as it was",
			// The journal puts back newest first: node1, node0, the file.
			log: []string{"write /etc/sysctl.d/10-hugepages.conf", "prepare full", "sysfs " + node0 + "=1024", "sysfs " + node1 + "=1024",
				"prepare compact", "sysfs " + node1 + "=1024", "sysfs " + node1 + "=0", "sysfs " + node0 + "=0", "remove /etc/sysctl.d/10-hugepages.conf"},
			after: []int64{0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fakehost.New()
			tt.host(h)
			prm := DefaultParams()
			prm.NUMA = val(t, tt.numa)
			ctx := context.Background()
			p, err := New().Check(ctx, h.Target("fake"), prm)
			if err != nil {
				if tt.err == "" || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("check: %v", err)
				}
				return
			}
			if tt.err != "" && tt.after == nil {
				t.Fatalf("check passed, want error %q", tt.err)
			}
			if tt.changes != nil || tt.note != "" {
				if got := strings.Join(moduletest.Changes(p), "\n"); got != strings.Join(tt.changes, "\n") {
					t.Errorf("changes:\n%s\nwant:\n%s", got, strings.Join(tt.changes, "\n"))
				}
			}
			if tt.note != "" && !strings.Contains(strings.Join(p.Notes, "\n"), tt.note) {
				t.Errorf("notes %q lack %q", p.Notes, tt.note)
			}
			if tt.after == nil {
				return
			}
			h.Log = nil
			_, err = run(t, h, prm)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("apply: %v\nwant %s", err, tt.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if tt.log != nil {
				if got := changesLog(h); strings.Join(got, "\n") != strings.Join(tt.log, "\n") {
					t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.log, "\n"))
				}
			}
			got := h.NodePages(2048)
			for i, want := range tt.after {
				if got[i] != want {
					t.Errorf("pages per node %v, want %v", got, tt.after)
					break
				}
			}
		})
	}
}

// Spread works for 1 GiB pages too: each node's own sysfs file.
func TestNUMASpreadGigPages(t *testing.T) {
	h := fakehost.New()
	withGig(h)
	h.Nodes = 2
	h.MemTotalKB = 20 << 20 // a quarter: 5 GiB
	h.MemAvailableKB = 19 << 20
	prm := DefaultParams()
	prm.PageSize = val(t, "1GiB")
	prm.NUMA = val(t, NUMASpread)
	p, err := run(t, h, prm)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/sys/devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages 0→3",
		"/sys/devices/system/node/node1/hugepages/hugepages-1048576kB/nr_hugepages 0→2",
		"file " + tmpfiles,
	}
	if got := moduletest.Changes(p); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := h.NodePages(1 << 20); got[0] != 3 || got[1] != 2 {
		t.Errorf("1 GiB pages per node %v", got)
	}
}

// changesLog is the host's log without reads: what was changed, in order.
func changesLog(h *fakehost.Host) []string {
	var out []string
	for _, l := range h.Log {
		if !strings.HasPrefix(l, "read ") && l != "nodes" && !strings.HasPrefix(l, "resolve ") && !strings.HasPrefix(l, "journal ") {
			out = append(out, l)
		}
	}
	return out
}
