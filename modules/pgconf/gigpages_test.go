package pgconf

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/internal/testhost"
)

// huge_page_size follows the hugepages module's page_size: 0 for the
// kernel's default, the size in kB otherwise; sizing counts pages of that
// size.

func TestDropinHugePageSize(t *testing.T) {
	if got := string(dropinContent(128 << 20)); !strings.Contains(got, "\nhuge_page_size = 0\n") {
		t.Errorf("default drop-in:\n%s", got)
	}
	got := string(dropinFor(2040<<20, "1048576kB"))
	if !strings.Contains(got, "\nhuge_page_size = 1048576kB\nshared_buffers = 2088960kB\n") {
		t.Errorf("1 GiB drop-in:\n%s", got)
	}
}

func TestDescribeLiveHugePageSize(t *testing.T) {
	live := map[string]string{"block_size": "8192", "shared_buffers": "16384", "huge_pages": "on", "huge_page_size": "1048576"}
	before, differs := describeLiveFor(live, "1048576kB")
	if before != "shared_buffers=128MB huge_pages=on huge_page_size=1GB" {
		t.Errorf("before = %q", before)
	}
	if differs(128 << 20) {
		t.Error("a server on the planned 1 GiB pages differs")
	}
	if _, differs := describeLiveFor(live, "0"); !differs(128 << 20) {
		t.Error("a server on 1 GiB pages matches a plan for the default size")
	}
	if _, differs := describeLive(map[string]string{"block_size": "8192", "shared_buffers": "16384", "huge_pages": "on", "huge_page_size": "0"}); differs(128 << 20) {
		t.Error("default size differs from itself")
	}
}

func TestRoomInGigPool(t *testing.T) {
	const gib = 1 << 30
	f := &facts.Facts{HugePageSize: 2 << 20, HugePagesTotal: 512, HugePagesFree: 0, // 2 MiB pages all in use elsewhere
		HugePagePools: []facts.HugePagePool{{Size: 2 << 20, Pages: 512}, {Size: gib, Pages: 4, Free: 3}}}
	pg := &facts.Postgres{}
	if err := roomInPoolOf(f, pg, nil, 4*gib, 3, gib); err != nil {
		t.Errorf("3 of 4 free 1 GiB pages: %v", err)
	}
	err := roomInPoolOf(f, pg, nil, 4*gib, 4, gib)
	if err == nil || !strings.Contains(err.Error(), "needs 4 huge pages but only 3 of the 4-page pool would be free for this cluster: 1 are held") {
		t.Errorf("4 of 3 free: %v", err)
	}
	// A server running on 2 MiB pages frees those at its restart, not
	// 1 GiB pages: its segment does not count toward the 1 GiB pool.
	running := &facts.Postgres{Running: true, HugetlbPages: 512 << 21}
	live := map[string]string{"shared_memory_size_in_huge_pages": "512", "huge_page_size": "0"}
	if err := roomInPoolOf(f, running, live, 4*gib, 4, gib); err == nil {
		t.Error("a 2 MiB segment's pages made room in the 1 GiB pool")
	}
	live["huge_page_size"] = "1048576"
	running.HugetlbPages = gib
	live["shared_memory_size_in_huge_pages"] = "1"
	if err := roomInPoolOf(f, running, live, 4*gib, 4, gib); err != nil {
		t.Errorf("our own 1 GiB page is freed by the restart: %v", err)
	}
}

// TestCheckSizesInGigPages sizes a real cluster for a pool of two 1 GiB
// pages, as planned by hugepages with page_size: 1GiB. postgres -C sizes
// the segment in the huge_page_size it is given whether or not the kernel
// offers that size, so this runs on any machine; nothing is started on
// huge pages.
func TestCheckSizesInGigPages(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PostgreSQL")
	}
	const gib = 1 << 30
	c := testhost.Postgres(t, testhost.Stopped())
	ctx := context.Background()
	m := New()
	tg := liveTarget(t, c)
	// The cluster's share is two pages; the whole pool planned holds them
	// beside any 1 GiB pages other processes hold, on a machine that
	// offers them (a segment that fit only without those would be refused).
	held := int64(0)
	if f := tg.Facts; f.HugePageSize == gib {
		held = f.HugePagesTotal - f.HugePagesFree + f.HugePagesRsvd
	} else if p, ok := f.Pool(gib); ok {
		held = p.Pages - p.Free + p.Resv
	}
	tg.SetOutputs("hugepages", map[string]any{"pool": (2 + held) * gib, "pages": 2 + held, "page_size": int64(gib)})
	journal(t, tg)
	p, err := m.Check(ctx, tg, params(2*gib, func(p *Params) { p.Restart = expr.Literal(false) }))
	if err != nil {
		t.Fatal(err)
	}
	logPlan(t, p)
	st := p.State.(*State)
	// Named in kB, unless 1 GiB is this machine's default size: then "0",
	// the kernel's default, as for any default size.
	wantHPS, wantAsked := "1048576kB", "1048576"
	if tg.Facts.HugePageSize == gib {
		wantHPS, wantAsked = "0", "0"
	}
	if st.HugePageSize != wantHPS {
		t.Errorf("huge_page_size %q, want %q", st.HugePageSize, wantHPS)
	}
	// Two gigabyte pages, the segment filling them: a segment sized in
	// 2 MiB pages would be allowed far less slack.
	if st.SegmentPages != 2 || st.SegmentMB <= 1024 || st.SegmentMB > 2048 || st.SharedBuffers <= gib {
		t.Errorf("segment %d MB in %d pages, shared_buffers %d", st.SegmentMB, st.SegmentPages, st.SharedBuffers)
	}
	if err := m.Apply(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	ask := func(name string) string {
		return strings.TrimSpace(c.AsOwner(t, filepath.Join(c.BinDir, "postgres"), "-D", c.DataDir, "-C", name))
	}
	if got := ask("huge_page_size"); got != wantAsked { // kB
		t.Errorf("postgres -C huge_page_size = %s, want %s", got, wantAsked)
	}
	if got := ask("shared_memory_size_in_huge_pages"); got != "2" {
		t.Errorf("postgres -C shared_memory_size_in_huge_pages = %s, want 2", got)
	}
	if got := ask("huge_pages"); got != "on" {
		t.Errorf("postgres -C huge_pages = %s", got)
	}
}
