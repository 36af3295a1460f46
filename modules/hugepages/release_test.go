package hugepages

import (
	"context"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/modules/internal/fakehost"
	"github.com/pgtune/pgtune/modules/internal/moduletest"
)

// gigLeft is a host that ran a play with page_size 1GiB: pgtune's boot
// file and a 4-page 1 GiB pool, no default-size pool.
func gigLeft(h *fakehost.Host) {
	withGig(h)
	h.SetNodePages(1<<20, 4)
	h.Files[tmpfiles] = string(renderBootFile(livePool{Size: GiB, Sysfs: gigSysfs}, 4))
}

func TestSwitchBackFromGigPages(t *testing.T) {
	tests := []struct {
		name    string
		host    func(h *fakehost.Host)
		changes []string
		other   int64 // other_pools output: bytes of other sizes left reserved
		note    string
		log     []string // changes apply makes, in order
		gig     int64    // 1 GiB pages after apply
		file    bool     // the tmpfiles file is still there after apply
	}{
		{
			name: "pgtune's boot file: the 1 GiB pool goes to 0, the file goes",
			host: gigLeft,
			changes: []string{"vm.nr_hugepages 0→2048", "file /etc/sysctl.d/10-hugepages.conf",
				gigSysfs + " 4→0", "file " + tmpfiles},
			note: "back to the default page size (2 MiB): removing " + tmpfiles + " and giving back the pools it set at boot",
			// The 1 GiB pool goes last: the engine holds it back until
			// pgconf's restart has moved PostgreSQL off it.
			log: []string{"write /etc/sysctl.d/10-hugepages.conf", "prepare full", "sysctl vm.nr_hugepages=2048",
				"sysfs " + gigSysfs + "=0", "remove " + tmpfiles},
		},
		{
			name: "pool already given back: only the file goes",
			host: func(h *fakehost.Host) { gigLeft(h); h.SetNodePages(1<<20, 0) },
			changes: []string{"vm.nr_hugepages 0→2048", "file /etc/sysctl.d/10-hugepages.conf",
				"file " + tmpfiles},
			log: []string{"write /etc/sysctl.d/10-hugepages.conf",
				"prepare full", "sysctl vm.nr_hugepages=2048", "remove " + tmpfiles},
		},
		{
			name: "a tmpfiles file pgtune did not write: left alone, its pool counted",
			host: func(h *fakehost.Host) {
				withGig(h)
				h.SetNodePages(1<<20, 2)
				h.Files[tmpfiles] = "w " + gigSysfs + " - - - - 2\n"
			},
			changes: []string{"vm.nr_hugepages 0→2048", "file /etc/sysctl.d/10-hugepages.conf"},
			other:   2 * GiB,
			note:    tmpfiles + " was not written by pgtune: left as it is, with any huge page pool it sets",
			gig:     2,
			file:    true,
		},
		{
			name:    "a 1 GiB pool without any boot file: not pgtune's, counted",
			host:    func(h *fakehost.Host) { withGig(h); h.SetNodePages(1<<20, 1) },
			changes: []string{"vm.nr_hugepages 0→2048", "file /etc/sysctl.d/10-hugepages.conf"},
			other:   GiB,
			gig:     1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := fakehost.New()
			tt.host(h)
			ctx := context.Background()
			p, err := New().Check(ctx, h.Target("fake"), DefaultParams())
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(moduletest.Changes(p), "\n"); got != strings.Join(tt.changes, "\n") {
				t.Errorf("changes:\n%s\nwant:\n%s", got, strings.Join(tt.changes, "\n"))
			}
			if p.Outputs["other_pools"] != tt.other {
				t.Errorf("other_pools = %v, want %d", p.Outputs["other_pools"], tt.other)
			}
			if tt.note != "" && !strings.Contains(strings.Join(p.Notes, "\n"), tt.note) {
				t.Errorf("notes %q lack %q", p.Notes, tt.note)
			}
			h.Log = nil
			if _, err := run(t, h, DefaultParams()); err != nil {
				t.Fatal(err)
			}
			if tt.log != nil {
				if got := changesLog(h); strings.Join(got, "\n") != strings.Join(tt.log, "\n") {
					t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.log, "\n"))
				}
			}
			if got := h.NodePages(1 << 20); got[0] != tt.gig {
				t.Errorf("1 GiB pool %v after apply, want %d", got, tt.gig)
			}
			if _, ok := h.Files[tmpfiles]; ok != tt.file {
				t.Errorf("tmpfiles file there = %v after apply, want %v", ok, tt.file)
			}
		})
	}
}

// Undoing the switch (rollback, or a failure later in apply) puts the
// 1 GiB pool and pgtune's boot file back.
func TestSwitchBackUndone(t *testing.T) {
	h := fakehost.New()
	gigLeft(h)
	before := h.Files[tmpfiles]
	ctx := context.Background()
	m := New()
	tg := h.Target("fake")
	p, err := m.Check(ctx, tg, DefaultParams())
	if err != nil {
		t.Fatal(err)
	}
	mark := tg.Mark()
	if err := m.Apply(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	if err := m.ApplyShrink(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	if err := tg.UndoSince(ctx, mark); err != nil {
		t.Fatal(err)
	}
	if got := h.NodePages(1 << 20); got[0] != 4 {
		t.Errorf("1 GiB pool %v after undo, want 4", got)
	}
	if h.Files[tmpfiles] != before {
		t.Errorf("tmpfiles file after undo:\n%q\nwant\n%q", h.Files[tmpfiles], before)
	}
	if h.Sysctl["vm.nr_hugepages"] != "0" {
		t.Errorf("vm.nr_hugepages = %s after undo", h.Sysctl["vm.nr_hugepages"])
	}
}

// The default pool falling short backs the release out with it.
func TestSwitchBackShortfall(t *testing.T) {
	h := fakehost.New()
	gigLeft(h)
	before := h.Files[tmpfiles]
	h.MaxPages = func(int) int64 { return 1000 }
	_, err := run(t, h, DefaultParams())
	const want = "allocated 1000 of 2048 huge pages (2.0 GiB of 4.0 GiB); the pool is back at 0 pages and /etc/sysctl.d/10-hugepages.conf is as it was"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
	if got := h.NodePages(1 << 20); got[0] != 4 {
		t.Errorf("1 GiB pool %v after the shortfall, want 4", got)
	}
	if h.Files[tmpfiles] != before {
		t.Errorf("tmpfiles file not restored: %q", h.Files[tmpfiles])
	}
}
