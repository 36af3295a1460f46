package overcommit

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/modules/internal/fakehost"
	"github.com/pgtune/pgtune/modules/internal/moduletest"
	"github.com/pgtune/pgtune/modules/internal/sysctlconf"
)

const GiB = int64(1) << 30

func val(t *testing.T, src string) expr.Value {
	t.Helper()
	v, err := expr.Parse(src, "policy.yml", 21, 17)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// target binds a planned hugepages pool as the runner would.
func target(h *fakehost.Host, pool int64) *engine.Target {
	tg := h.Target("fake")
	if pool >= 0 {
		tg.SetOutputs("hugepages", map[string]any{"pool": pool, "pages": pool / (2 << 20), "page_size": int64(2 << 20)})
	}
	return tg
}

func TestLimit(t *testing.T) {
	tests := []struct {
		mem, pool int64
		ratio     float64
		headroom  int64
		want      int64
	}{
		// 0.8 × 12 GiB + 2 GiB = 11.6 GiB = 12163481.6 kB
		{16 * GiB, 4 * GiB, 0.8, 2 * GiB, 12163481},
		// 31.5 GiB with a quarter in huge pages: 0.8 × 23.7 GiB + 2 GiB
		{33071248 << 10, 8267812 << 10, 0.8, 2 * GiB, 21939900},
		{16 * GiB, 0, 1, 0, 16 << 20},
	}
	for _, tt := range tests {
		if got := Limit(tt.mem, tt.pool, tt.ratio, tt.headroom); got != tt.want {
			t.Errorf("Limit(%d, %d, %g, %d) = %d, want %d", tt.mem, tt.pool, tt.ratio, tt.headroom, got, tt.want)
		}
	}
}

func TestCheck(t *testing.T) {
	const file = "/etc/sysctl.d/99-overcommit.conf"
	inPolicy := func(h *fakehost.Host) {
		// 0.8 × 12 GiB + min(2 GiB, 16 GiB / 16) = 10.6 GiB
		h.Sysctl["vm.overcommit_kbytes"] = "11114905"
		h.Sysctl["vm.overcommit_ratio"] = "0"
		h.Sysctl["vm.overcommit_memory"] = "2"
		h.Files[file] = string(sysctlconf.File{Module: Name, Settings: []sysctlconf.Setting{
			{Key: "vm.overcommit_kbytes", Value: "11114905"}, {Key: "vm.overcommit_memory", Value: "2"}}}.Render())
	}
	tests := []struct {
		name    string
		host    func(h *fakehost.Host)
		params  func(t *testing.T, p *Params)
		pool    int64 // planned by hugepages; -1: not in the play
		changes []string
		kbytes  int64
		limit   int64
		err     string
		notes   string // besides the verdict (TestVerdictNote renders it)
		// unprotective: the verdict says the limit does not protect.
		unprotective bool
	}{
		{
			name:    "fresh host",
			pool:    4 * GiB,
			changes: []string{"vm.overcommit_kbytes 0→11114905", "vm.overcommit_memory 0→2", "file " + file},
			kbytes:  11114905, limit: 11114905 << 10,
			notes: "writing vm.overcommit_kbytes makes the kernel zero vm.overcommit_ratio (now 50)",
		},
		{
			name: "in policy", pool: 4 * GiB, host: inPolicy,
			kbytes: 11114905, limit: 11114905 << 10,
		},
		{
			name: "swap adds to the limit", pool: 4 * GiB,
			host:    func(h *fakehost.Host) { inPolicy(h); h.SwapKB = 1 << 20 },
			kbytes:  11114905,
			limit:   11114905<<10 + GiB,
			changes: nil,
		},
		{
			name: "hugepages not in the play: current pool",
			pool: -1,
			host: func(h *fakehost.Host) { h.Sysctl["vm.nr_hugepages"] = "1024" },
			// 0.8 × 14 GiB + 1 GiB
			changes: []string{"vm.overcommit_kbytes 0→12792627", "vm.overcommit_memory 0→2", "file " + file},
			kbytes:  12792627, limit: 12792627 << 10,
			notes: "hugepages is not in the play: limit computed against the current pool (2.0 GiB)\nwriting vm.overcommit_kbytes makes the kernel zero vm.overcommit_ratio (now 50)",
		},
		{
			name:    "kbytes override",
			pool:    4 * GiB,
			params:  func(t *testing.T, p *Params) { p.Kbytes = val(t, "${8 * GiB / KiB}") },
			host:    func(h *fakehost.Host) { h.Sysctl["vm.overcommit_memory"] = "2" },
			changes: []string{"vm.overcommit_kbytes 0→8388608", "file " + file},
			kbytes:  8388608, limit: 8 * GiB,
			notes: "writing vm.overcommit_kbytes makes the kernel zero vm.overcommit_ratio (now 50)",
		},
		{
			name:    "ratio and headroom from policy",
			pool:    0,
			params:  func(t *testing.T, p *Params) { p.Ratio = val(t, "0.5"); p.Headroom = val(t, "${facts.mem_total / 16}") },
			changes: []string{"vm.overcommit_kbytes 0→9437184", "vm.overcommit_memory 0→2", "file " + file},
			kbytes:  9437184, limit: 9437184 << 10,
			notes: "writing vm.overcommit_kbytes makes the kernel zero vm.overcommit_ratio (now 50)",
		},
		{
			name:   "small host: a flat 2 GiB headroom leaves strict mode toothless",
			host:   func(h *fakehost.Host) { h.MemTotalKB, h.MemAvailableKB = 4<<20, 3<<20 },
			params: func(t *testing.T, p *Params) { p.Headroom = val(t, "${2 * GiB}") },
			pool:   1 * GiB,
			// 0.8 × 3 GiB + 2 GiB = 4.4 GiB > the 3 GiB outside the pool:
			// a finding
			changes: []string{"commit limit 4.4 GiB→(not protective: above the memory outside the huge page pool; lower headroom or ratio, or set accept_unprotective: true)",
				"vm.overcommit_kbytes 0→4613734", "vm.overcommit_memory 0→2", "file " + file},
			kbytes: 4613734, limit: 4613734 << 10, unprotective: true,
			notes: "writing vm.overcommit_kbytes makes the kernel zero vm.overcommit_ratio (now 50)",
		},
		{
			name: "small host, accepted: a note, no finding",
			host: func(h *fakehost.Host) { h.MemTotalKB, h.MemAvailableKB = 4<<20, 3<<20 },
			params: func(t *testing.T, p *Params) {
				p.Headroom = val(t, "${2 * GiB}")
				p.AcceptUnprotective = val(t, "true")
			},
			pool:    1 * GiB,
			changes: []string{"vm.overcommit_kbytes 0→4613734", "vm.overcommit_memory 0→2", "file " + file},
			kbytes:  4613734, limit: 4613734 << 10, unprotective: true,
			notes: "writing vm.overcommit_kbytes makes the kernel zero vm.overcommit_ratio (now 50)",
		},
		{
			name: "small host: the default headroom protects",
			host: func(h *fakehost.Host) { h.MemTotalKB, h.MemAvailableKB = 4<<20, 3<<20 },
			pool: 1 * GiB,
			// 0.8 × 3 GiB + 4 GiB / 16 = 2.65 GiB
			changes: []string{"vm.overcommit_kbytes 0→2778726", "vm.overcommit_memory 0→2", "file " + file},
			kbytes:  2778726, limit: 2778726 << 10,
			notes: "writing vm.overcommit_kbytes makes the kernel zero vm.overcommit_ratio (now 50)",
		},
		{
			name: "accept_unprotective not a bool", pool: 4 * GiB,
			params: func(t *testing.T, p *Params) { p.AcceptUnprotective = val(t, "${facts.mem_total}") },
			err:    "accept_unprotective: policy.yml:21:17:",
		},
		{
			name: "ratio above 1", pool: 4 * GiB,
			params: func(t *testing.T, p *Params) { p.Ratio = val(t, "1.5") },
			err:    "policy.yml:21:17: ratio must be in (0, 1], got 1.5",
		},
		{
			name: "negative headroom", pool: 4 * GiB,
			params: func(t *testing.T, p *Params) { p.Headroom = val(t, "${-1 * GiB}") },
			err:    "policy.yml:21:17: headroom must not be negative",
		},
		{
			name: "zero kbytes", pool: 4 * GiB,
			params: func(t *testing.T, p *Params) { p.Kbytes = val(t, "0") },
			err:    "policy.yml:21:17: kbytes must be positive",
		},
		{
			name: "read-only /proc/sys", pool: 4 * GiB,
			host: func(h *fakehost.Host) { h.ReadOnly = true },
			err:  "/proc/sys is read-only (container?): cannot set vm.overcommit_kbytes",
		},
		{
			name: "preflight: already committed near the new limit", pool: 4 * GiB,
			host: func(h *fakehost.Host) {
				h.CommittedKB = 11 << 20 // 11 GiB > 0.9 × 10.6 GiB
				h.Committers = "1 1024 systemd\n4242 8388608 java -jar big\n77 2097152 postgres\n78 1048576 postgres\n90 512 sshd\n91 256 cron\n"
			},
			err: "preflight: Committed_AS 11.0 GiB is above 90% of the new CommitLimit 10.6 GiB (overcommit_kbytes 11114905 + swap 0 B); refusing strict overcommit. Top committers (VmData+VmStk): java -jar big (pid 4242) 8.0 GiB, postgres (pid 77) 2.0 GiB, postgres (pid 78) 1.0 GiB, systemd (pid 1) 1.0 MiB, sshd (pid 90) 512.0 KiB",
		},
		{
			name: "preflight passes below max_committed", pool: 4 * GiB,
			host:    func(h *fakehost.Host) { h.CommittedKB = 9 << 20 }, // < 0.9 × 10.6 GiB
			changes: []string{"vm.overcommit_kbytes 0→11114905", "vm.overcommit_memory 0→2", "file " + file},
			kbytes:  11114905, limit: 11114905 << 10,
			notes: "writing vm.overcommit_kbytes makes the kernel zero vm.overcommit_ratio (now 50)",
		},
		{
			name: "a later file overrides", pool: 4 * GiB,
			host: func(h *fakehost.Host) {
				inPolicy(h)
				h.Files["/etc/sysctl.d/99-zz-app.conf"] = "vm.overcommit_memory = 1\n"
			},
			changes: []string{"/etc/sysctl.d/99-zz-app.conf:1 vm.overcommit_memory = 1→(overrides vm.overcommit_memory = 2 from /etc/sysctl.d/99-overcommit.conf at boot: remove it, or set on_conflict: comment)"},
			kbytes:  11114905, limit: 11114905 << 10,
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
			p, err := New().Check(context.Background(), target(h, tt.pool), prm)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v\nwant %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(moduletest.Changes(p), "\n"); got != strings.Join(tt.changes, "\n") {
				t.Errorf("changes:\n%s\nwant:\n%s", got, strings.Join(tt.changes, "\n"))
			}
			if p.Outputs["kbytes"] != tt.kbytes || p.Outputs["commit_limit"] != tt.limit {
				t.Errorf("outputs %v, want kbytes %d commit_limit %d", p.Outputs, tt.kbytes, tt.limit)
			}
			var notes []string
			verdicts := 0
			for _, n := range p.Notes {
				if strings.HasPrefix(n, "commit limit ") {
					verdicts++
					continue
				}
				notes = append(notes, n)
			}
			if got := strings.Join(notes, "\n"); got != tt.notes {
				t.Errorf("notes:\n%s\nwant:\n%s", got, tt.notes)
			}
			if verdicts != 1 || p.Outputs["protective"] != !tt.unprotective {
				t.Errorf("%d verdict notes, protective %v, want 1 and %v", verdicts, p.Outputs["protective"], !tt.unprotective)
			}
			if len(h.Commands("sysctl")) != 0 || len(h.Commands("write")) != 0 {
				t.Errorf("check changed the host: %v", h.Log)
			}
		})
	}
}

func TestApply(t *testing.T) {
	ctx := context.Background()
	h := fakehost.New()
	h.SwapKB = 1 << 20
	m := New()
	tg := target(h, 4*GiB)
	p, err := m.Check(ctx, tg, DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range h.Log {
		if strings.HasPrefix(l, "sysctl") || strings.HasPrefix(l, "write") {
			got = append(got, l)
		}
	}
	want := []string{"write /etc/sysctl.d/99-overcommit.conf", "sysctl vm.overcommit_kbytes=11114905", "sysctl vm.overcommit_memory=2"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if h.Sysctl["vm.overcommit_ratio"] != "0" {
		t.Errorf("ratio %s: the fake kernel should zero it", h.Sysctl["vm.overcommit_ratio"])
	}
	if err := m.Verify(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	wantFile := "# Managed by pgtune (overcommit module): rewritten whole on every apply; local edits are lost.\nvm.overcommit_kbytes = 11114905\nvm.overcommit_memory = 2\n"
	if h.Files["/etc/sysctl.d/99-overcommit.conf"] != wantFile {
		t.Errorf("file:\n%s", h.Files["/etc/sysctl.d/99-overcommit.conf"])
	}
	again, err := m.Check(ctx, target(h, 4*GiB), DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	if again.HasChanges() {
		t.Errorf("re-check: %v", moduletest.Changes(again))
	}
	// Verify catches a limit the kernel does not report.
	h.Sysctl["vm.overcommit_kbytes"] = "1000"
	if err := m.Verify(ctx, tg, p); err == nil || !strings.Contains(err.Error(), "vm.overcommit_kbytes is 1000, planned 11114905") {
		t.Errorf("verify: %v", err)
	}
}

func TestApplyRefusesOverride(t *testing.T) {
	ctx := context.Background()
	h := fakehost.New()
	h.Files["/etc/sysctl.conf"] = "vm.overcommit_memory=0\n"
	m := New()
	tg := target(h, 4*GiB)
	p, err := m.Check(ctx, tg, DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	err = m.Apply(ctx, tg, p)
	if err == nil || !strings.Contains(err.Error(), "/etc/sysctl.conf:1 sets vm.overcommit_memory = 0") {
		t.Fatalf("apply: %v", err)
	}
	if len(h.Commands("sysctl")) != 0 || len(h.Commands("write")) != 0 {
		t.Errorf("apply changed the host before refusing: %v", h.Log)
	}
}

func TestParseCommitters(t *testing.T) {
	out := "12 300 a b c\nx 1 bad\n13 300 b\n14 900\n\n15 oops z\n"
	got := formatCommitters(parseCommitters(out), 5)
	want := " (pid 14) 900.0 KiB, a b c (pid 12) 300.0 KiB, b (pid 13) 300.0 KiB"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if formatCommitters(nil, 5) != "(none readable)" {
		t.Error("empty list")
	}
}

// The verdict across host sizes, with and without swap. The kernel's
// reserve is what such hosts report: min_free_kbytes as the kernel sizes
// it with transparent huge pages on (capped at 256 MiB for large RAM),
// unreclaimable slab growing with RAM. The default headroom protects every
// size; the seed's flat 2 GiB does not protect the small ones.
func TestVerdictHostSizes(t *testing.T) {
	hosts := []struct {
		memGiB                  int64
		minFreeKB, sunreclaimKB int64
	}{
		{2, 45056, 40 << 10},
		{4, 67584, 60 << 10},
		{16, 67584, 150 << 10},
		{64, 90112, 600 << 10},
		{512, 262144, 6 << 20},
	}
	policies := []struct {
		name     string
		headroom string // "" = the module default
		// protective by host size (GiB)
		protective map[int64]bool
	}{
		{"default", "", map[int64]bool{2: true, 4: true, 16: true, 64: true, 512: true}},
		{"flat 2 GiB", "${2 * GiB}", map[int64]bool{2: false, 4: false, 16: true, 64: true, 512: true}},
	}
	for _, pol := range policies {
		for _, hs := range hosts {
			for _, swapKB := range []int64{0, min(hs.memGiB, 8) << 20} {
				name := fmt.Sprintf("%s/%dGiB/swap%dGiB", pol.name, hs.memGiB, swapKB>>20)
				t.Run(name, func(t *testing.T) {
					h := fakehost.New()
					h.MemTotalKB, h.MemAvailableKB = hs.memGiB<<20, hs.memGiB<<20*9/10
					h.MinFreeKB, h.SUnreclaimKB, h.SwapKB = hs.minFreeKB, hs.sunreclaimKB, swapKB
					h.CommittedKB = 256 << 10
					prm := DefaultParams()
					if pol.headroom != "" {
						prm.Headroom = val(t, pol.headroom)
					}
					pool := hs.memGiB * GiB / 4 // the default policy's pool
					p, err := New().Check(context.Background(), target(h, pool), prm)
					if err != nil {
						t.Fatal(err)
					}
					limit := p.Outputs["commit_limit"].(int64)
					backing := hs.memGiB*GiB - pool - hs.minFreeKB<<10 - hs.sunreclaimKB<<10 + swapKB<<10
					if limit != p.Outputs["kbytes"].(int64)<<10+swapKB<<10 || p.Outputs["backing"] != backing {
						t.Fatalf("outputs %v, want commit_limit = kbytes + swap, backing %d", p.Outputs, backing)
					}
					want := pol.protective[hs.memGiB]
					if got := p.Outputs["protective"]; got != want || (limit <= backing) != want {
						t.Errorf("protective %v, want %v: commit limit %d, backing %d", got, want, limit, backing)
					}
					finding := len(p.Changes) > 0 && p.Changes[0].Target == "commit limit"
					if finding == want {
						t.Errorf("finding %v for protective %v: %v", finding, want, moduletest.Changes(p))
					}
				})
			}
		}
	}
}

// The default headroom evaluates to a whole number of bytes, min(2 GiB,
// MemTotal / 16), on every MemTotal, odd kB counts included.
func TestDefaultHeadroom(t *testing.T) {
	for _, kb := range []int64{2 << 20, 4<<20 + 3, 24683620, 32 << 20, 33071248, 512 << 20} {
		h := fakehost.New()
		h.MemTotalKB = kb
		got, err := target(h, 0).Scope.Int64(DefaultParams().Headroom)
		if err != nil {
			t.Fatalf("MemTotal %d kB: %v", kb, err)
		}
		if want := min(2*GiB, kb<<10/16); got != want {
			t.Errorf("MemTotal %d kB: headroom %d, want %d", kb, got, want)
		}
	}
}

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// TestVerdictNote renders the plan check shows for three hosts: protective
// with the default policy and swap, not protective (a finding), and not
// protective but accepted (a note only).
func TestVerdictNote(t *testing.T) {
	cases := []struct {
		title  string
		host   func(h *fakehost.Host)
		params func(t *testing.T, p *Params)
		pool   int64
	}{
		{title: "16 GiB host, 2 GiB swap, default policy", pool: 4 * GiB,
			host: func(h *fakehost.Host) { h.SwapKB = 2 << 20 }},
		{title: "4 GiB host, flat 2 GiB headroom", pool: 1 * GiB,
			host:   func(h *fakehost.Host) { h.MemTotalKB, h.MemAvailableKB, h.SUnreclaimKB = 4<<20, 3<<20, 60<<10 },
			params: func(t *testing.T, p *Params) { p.Headroom = val(t, "${2 * GiB}") }},
		{title: "4 GiB host, flat 2 GiB headroom, accept_unprotective: true", pool: 1 * GiB,
			host: func(h *fakehost.Host) { h.MemTotalKB, h.MemAvailableKB, h.SUnreclaimKB = 4<<20, 3<<20, 60<<10 },
			params: func(t *testing.T, p *Params) {
				p.Headroom = val(t, "${2 * GiB}")
				p.AcceptUnprotective = val(t, "true")
			}},
	}
	var b strings.Builder
	for _, c := range cases {
		h := fakehost.New()
		c.host(h)
		prm := DefaultParams()
		if c.params != nil {
			c.params(t, prm)
		}
		p, err := New().Check(context.Background(), target(h, c.pool), prm)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "# %s\n", c.title)
		for _, ch := range p.Changes {
			if ch.Kind != plan.KindFile {
				fmt.Fprintf(&b, "~ %s: %s → %s\n", ch.Target, ch.Before, ch.After)
			}
		}
		for _, n := range p.Notes {
			fmt.Fprintf(&b, "note: %s\n", n)
		}
		b.WriteString("\n")
	}
	golden(t, "verdict.golden", b.String())
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from golden:\n got:\n%s\nwant:\n%s", name, got, want)
	}
}

// Apply refuses a limit that is not protective before changing anything,
// and applies it when the play accepts it.
func TestApplyUnprotective(t *testing.T) {
	ctx := context.Background()
	for _, accept := range []bool{false, true} {
		h := fakehost.New()
		h.MemTotalKB, h.MemAvailableKB = 4<<20, 3<<20
		prm := DefaultParams()
		prm.Headroom = val(t, "${2 * GiB}")
		if accept {
			prm.AcceptUnprotective = val(t, "true")
		}
		m := New()
		tg := target(h, 1*GiB)
		p, err := m.Check(ctx, tg, prm)
		if err != nil {
			t.Fatal(err)
		}
		// The runner refuses the whole host up front on p.Refuse; Apply
		// refuses too, for callers without the runner.
		if (p.Refuse != nil) == accept || !accept && p.Refuse.Error() != unprotectiveError(*p.State.(*State).Unprotective).Error() {
			t.Errorf("accept %v: plan refusal %v", accept, p.Refuse)
		}
		err = m.Apply(ctx, tg, p)
		if !accept {
			if err == nil || !strings.Contains(err.Error(), "refusing a commit limit that does not protect this host: commit limit 4.4 GiB (overcommit_kbytes 4613734 + swap 0 B) > ") ||
				!strings.HasSuffix(err.Error(), "; lower headroom or ratio, or set accept_unprotective: true") {
				t.Fatalf("apply: %v", err)
			}
			if len(h.Commands("sysctl")) != 0 || len(h.Commands("write")) != 0 {
				t.Errorf("apply changed the host before refusing: %v", h.Log)
			}
			continue
		}
		if err != nil {
			t.Fatalf("accepted apply: %v", err)
		}
		if err := m.Verify(ctx, tg, p); err != nil {
			t.Fatal(err)
		}
		if h.Sysctl["vm.overcommit_kbytes"] != "4613734" || h.Sysctl["vm.overcommit_memory"] != "2" {
			t.Errorf("accepted apply: %v", h.Sysctl)
		}
	}
}
