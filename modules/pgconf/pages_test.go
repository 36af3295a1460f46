package pgconf

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path"
	"strconv"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// pgPages and pgMB are PostgreSQL's own formulas (ipci.c,
// InitializeShmemGUCs) for a segment of b bytes.
func pgPages(b, hp int64) int64 { return b/hp + 1 }
func pgMB(b int64) int64        { return (b + mib - 1) / mib }

func TestPagesFromMB(t *testing.T) {
	sizes := []int64{2 * mib, 32 * mib, 1 << 30, mib, 64 << 10, 0}
	r := rand.New(rand.NewPCG(1, 2))
	for _, hp := range sizes {
		asked := 0
		for range 20000 {
			b := 1 + r.Int64N(64<<30)
			if r.IntN(8) == 0 && hp > 0 {
				b = (1 + r.Int64N(1000)) * hp // right on a page boundary
			}
			if r.IntN(8) == 0 {
				b = (1 + r.Int64N(1000)) * mib // a whole number of MiB
			}
			got, ok := pagesFromMB(pgMB(b), hp)
			if !ok {
				asked++
				continue
			}
			if want := pgPages(b, hp); got != want {
				t.Fatalf("hp %d, %d bytes (%d MB): pagesFromMB = %d, postgres says %d", hp, b, pgMB(b), got, want)
			}
		}
		// Only MB counts that are whole pages are asked: about 1 in
		// hp/MiB, never all of them unless the size is not whole MiB.
		if hpMiB := hugePageMiB(hp); hpMiB == 0 && asked != 20000 {
			t.Errorf("hp %d: computed %d answers without whole MiB pages", hp, 20000-asked)
		} else if hpMiB == 1 && asked != 20000 {
			t.Errorf("hp %d: 1 MiB pages: every MB count is a whole page count, yet %d computed", hp, 20000-asked)
		} else if hpMiB > 1 && asked > 20000/2+20000/8 {
			t.Errorf("hp %d: asked postgres %d times of 20000", hp, asked)
		}
	}
	for _, c := range []struct{ mb, hp, pages int64 }{
		{1, 2 * mib, 1}, {3, 2 * mib, 2}, {145, 2 * mib, 73}, {1025, 1 << 30, 2},
	} {
		if got, ok := pagesFromMB(c.mb, c.hp); !ok || got != c.pages {
			t.Errorf("pagesFromMB(%d, %d) = %d, %v; want %d", c.mb, c.hp, got, ok, c.pages)
		}
	}
	for _, c := range []struct{ mb, hp int64 }{{2, 2 * mib}, {146, 2 * mib}, {1024, 1 << 30}, {0, 2 * mib}, {5, 0}, {5, 64 << 10}} {
		if got, ok := pagesFromMB(c.mb, c.hp); ok {
			t.Errorf("pagesFromMB(%d, %d) = %d, true; must ask postgres", c.mb, c.hp, got)
		}
	}
}

// TestPagesQueryMatchesPostgres runs the sizing script on a real server's
// scratch copy: for many shared_buffers, the page count the script
// computes (+pages) is the one postgres -C prints.
func TestPagesQueryMatchesPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	c := testhost.Postgres(t)
	tg := liveTarget(t, c)
	pg := tg.Facts.Postgres
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range append(parents(path.Dir(path.Join("f", pg.ConfigFile))), "global") {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o700}); err != nil {
			t.Fatal(err)
		}
	}
	conf := []byte("max_connections = 20\n")
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path.Join("f", pg.ConfigFile), Mode: 0o600, Size: int64(len(conf))}); err != nil {
		t.Fatal(err)
	}
	tw.Write(conf)
	tw.Close()

	const hp = 2 * mib
	var qs []query
	for i := range 24 {
		sb := int64(16+i*7)*mib + int64(i)*8192*13
		qs = append(qs, query{Name: "shared_memory_size", SharedBuffers: sb}, query{Name: pagesQuery, SharedBuffers: sb},
			query{Name: "shared_memory_size_in_huge_pages", SharedBuffers: sb})
	}
	ans, err := sizeOnHost(context.Background(), tg, pg, buf.Bytes(), sizeArgs{hps: "2MB", hugePage: hp, queries: qs})
	if err != nil {
		t.Fatal(err)
	}
	computed := 0
	for i := 0; i < len(qs); i += 3 {
		mb, _ := strconv.ParseInt(ans.values[i], 10, 64)
		if _, ok := pagesFromMB(mb, hp); ok {
			computed++
		}
		if ans.values[i+1] != ans.values[i+2] {
			t.Errorf("shared_buffers %d (%s MB): script computed %s pages, postgres -C says %s", qs[i].SharedBuffers, ans.values[i], ans.values[i+1], ans.values[i+2])
		}
	}
	if computed == 0 || computed == len(qs)/3 {
		t.Errorf("%d of %d page counts computed: both paths must be exercised", computed, len(qs)/3)
	}
}

// recorder counts the commands that start psql, and the configuration
// reads (readScript, as the owner).
type recorder struct {
	transport.Transport
	psql, reads int
}

func (r *recorder) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	for _, a := range cmd.Args {
		if strings.HasSuffix(a, "/psql") {
			r.psql++
			break
		}
	}
	if len(cmd.Args) > 5 && cmd.Args[5] == readScript {
		r.reads++
	}
	return r.Transport.Run(ctx, cmd)
}

// TestCheckTakesLiveSettingsFromTopology: a dry-run check whose facts
// hold the topology (which read the server's settings in its query)
// starts no psql of its own and plans exactly what a check that asks the
// server does; an apply's re-check (a journal) still asks.
func TestCheckTakesLiveSettingsFromTopology(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	c, pool, _ := clusterWithPool(t)
	ctx := context.Background()

	plain := liveTarget(t, c)
	want, err := New().Check(ctx, plain, params(pool, nil))
	if err != nil {
		t.Fatal(err)
	}

	tg := liveTarget(t, c)
	topo, err := facts.GatherTopology(ctx, tg.Transport, false, tg.Facts.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if topo.Settings["shared_buffers"] == "" || topo.Settings["block_size"] == "" {
		t.Fatalf("topology read no settings: %v", topo.Settings)
	}
	tg.Facts.Topology = topo
	rec := &recorder{Transport: tg.Transport}
	tg.Transport = rec
	got, err := New().Check(ctx, tg, params(pool, nil))
	if err != nil {
		t.Fatal(err)
	}
	if rec.psql != 0 {
		t.Errorf("check started psql %d times though the topology held the settings", rec.psql)
	}
	if !plan.SameChanges(got.Changes, want.Changes) || fmt.Sprint(got.Outputs) != fmt.Sprint(want.Outputs) {
		t.Errorf("plans differ:\nwith topology settings %v %v\nasking the server      %v %v", changeTargets(got), got.Outputs, changeTargets(want), want.Outputs)
	}
	if len(want.Changes) == 0 {
		t.Errorf("nothing planned: the comparison shows nothing")
	}

	// Changed settings behind the facts' back must not be trusted by an
	// apply's re-check: with a journal, the server is asked.
	tg.Journal = engine.NewJournal("test-run", "localhost", t.TempDir(), tg.Transport, false)
	rec.psql = 0
	if _, err := New().Check(ctx, tg, params(pool, nil)); err != nil {
		t.Fatal(err)
	}
	if rec.psql == 0 {
		t.Errorf("a re-check with a journal took the settings from the facts")
	}
}
