package overcommit

import (
	"context"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/expr"
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
		h.Sysctl["vm.overcommit_kbytes"] = "12163481"
		h.Sysctl["vm.overcommit_ratio"] = "0"
		h.Sysctl["vm.overcommit_memory"] = "2"
		h.Files[file] = string(sysctlconf.File{Module: Name, Settings: []sysctlconf.Setting{
			{Key: "vm.overcommit_kbytes", Value: "12163481"}, {Key: "vm.overcommit_memory", Value: "2"}}}.Render())
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
		notes   string
	}{
		{
			name:    "fresh host",
			pool:    4 * GiB,
			changes: []string{"vm.overcommit_kbytes 0→12163481", "vm.overcommit_memory 0→2", "file " + file},
			kbytes:  12163481, limit: 12163481 << 10,
			notes: "writing vm.overcommit_kbytes makes the kernel zero vm.overcommit_ratio (now 50)",
		},
		{
			name: "in policy", pool: 4 * GiB, host: inPolicy,
			kbytes: 12163481, limit: 12163481 << 10,
		},
		{
			name: "swap adds to the limit", pool: 4 * GiB,
			host:    func(h *fakehost.Host) { inPolicy(h); h.SwapKB = 1 << 20 },
			kbytes:  12163481,
			limit:   12163481<<10 + GiB,
			changes: nil,
		},
		{
			name: "hugepages not in the play: current pool",
			pool: -1,
			host: func(h *fakehost.Host) { h.Sysctl["vm.nr_hugepages"] = "1024" },
			// 0.8 × 14 GiB + 2 GiB
			changes: []string{"vm.overcommit_kbytes 0→13841203", "vm.overcommit_memory 0→2", "file " + file},
			kbytes:  13841203, limit: 13841203 << 10,
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
			name: "small host: the default headroom leaves strict mode toothless",
			host: func(h *fakehost.Host) { h.MemTotalKB, h.MemAvailableKB = 4<<20, 3<<20 },
			pool: 1 * GiB,
			// 0.8 × 3 GiB + 2 GiB = 4.4 GiB > the 3 GiB outside the pool
			changes: []string{"vm.overcommit_kbytes 0→4613734", "vm.overcommit_memory 0→2", "file " + file},
			kbytes:  4613734, limit: 4613734 << 10,
			notes: "the commit limit 4.4 GiB is above the memory outside the huge page pool (3.0 GiB): strict mode cannot stop the OOM killer on this host; lower the headroom or the ratio\n" +
				"writing vm.overcommit_kbytes makes the kernel zero vm.overcommit_ratio (now 50)",
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
				h.CommittedKB = 11 << 20 // 11 GiB > 0.9 × 11.6 GiB
				h.Committers = "1 1024 systemd\n4242 8388608 java -jar big\n77 2097152 postgres\n78 1048576 postgres\n90 512 sshd\n91 256 cron\n"
			},
			err: "preflight: Committed_AS 11.0 GiB is above 90% of the new CommitLimit 11.6 GiB (overcommit_kbytes 12163481 + swap 0 B); refusing strict overcommit. Top committers (VmData+VmStk): java -jar big (pid 4242) 8.0 GiB, postgres (pid 77) 2.0 GiB, postgres (pid 78) 1.0 GiB, systemd (pid 1) 1.0 MiB, sshd (pid 90) 512.0 KiB",
		},
		{
			name: "preflight passes below max_committed", pool: 4 * GiB,
			host:    func(h *fakehost.Host) { h.CommittedKB = 10 << 20 },
			changes: []string{"vm.overcommit_kbytes 0→12163481", "vm.overcommit_memory 0→2", "file " + file},
			kbytes:  12163481, limit: 12163481 << 10,
			notes: "writing vm.overcommit_kbytes makes the kernel zero vm.overcommit_ratio (now 50)",
		},
		{
			name: "a later file overrides", pool: 4 * GiB,
			host: func(h *fakehost.Host) {
				inPolicy(h)
				h.Files["/etc/sysctl.d/99-zz-app.conf"] = "vm.overcommit_memory = 1\n"
			},
			changes: []string{"/etc/sysctl.d/99-zz-app.conf:1 vm.overcommit_memory = 1→(overrides vm.overcommit_memory = 2 from /etc/sysctl.d/99-overcommit.conf at boot: remove it, or set on_conflict: comment)"},
			kbytes:  12163481, limit: 12163481 << 10,
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
			if got := strings.Join(p.Notes, "\n"); got != tt.notes {
				t.Errorf("notes:\n%s\nwant:\n%s", got, tt.notes)
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
	want := []string{"write /etc/sysctl.d/99-overcommit.conf", "sysctl vm.overcommit_kbytes=12163481", "sysctl vm.overcommit_memory=2"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if h.Sysctl["vm.overcommit_ratio"] != "0" {
		t.Errorf("ratio %s: the fake kernel should zero it", h.Sysctl["vm.overcommit_ratio"])
	}
	if err := m.Verify(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	wantFile := "# Managed by pgtune (overcommit module): rewritten whole on every apply; local edits are lost.\nvm.overcommit_kbytes = 12163481\nvm.overcommit_memory = 2\n"
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
	if err := m.Verify(ctx, tg, p); err == nil || !strings.Contains(err.Error(), "vm.overcommit_kbytes is 1000, planned 12163481") {
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
