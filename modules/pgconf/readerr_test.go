package pgconf

import (
	"context"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/fakehost"
)

// TestReadErrorNamesFileOnce: a file pgconf cannot read is named once in
// the error ("read FILE: …", as the engine's read says it); Patroni's
// config that is not there says so, once.
func TestReadErrorNamesFileOnce(t *testing.T) {
	const dir = "/var/lib/pg"
	const yml = "/etc/patroni/patroni.yml"
	auto := dir + "/" + autoConfName
	unreadable := func(file string) *fakehost.Host {
		h := fakehost.New()
		h.Files[file] = "x = 1\n"
		h.Fail = func(op transport.Op, args []string) string {
			if op == transport.OpReadFile && len(args) > 0 && args[0] == file {
				return "cat: Permission denied"
			}
			return ""
		}
		return h
	}
	target := func(h *fakehost.Host) *engine.Target {
		return &engine.Target{Name: "db1", Transport: h, Facts: &facts.Facts{}}
	}
	for _, tc := range []struct {
		name, file, want string
		do               func(h *fakehost.Host) error
	}{
		{"Patroni's config unreadable", yml, "Patroni's config: read " + yml + ": ", func(h *fakehost.Host) error {
			_, _, err := readPatroniConfig(context.Background(), target(h), yml, "postgres")
			return err
		}},
		{"Patroni's config missing", yml, "read Patroni's config " + yml + ": no such file", func(*fakehost.Host) error {
			_, _, err := readPatroniConfig(context.Background(), target(fakehost.New()), yml, "postgres")
			return err
		}},
		{"the file a switchover repoints", auto, "primary: read " + auto + ": ", func(h *fakehost.Host) error {
			old := swStandby("primary", "m", "", 0, 0, "on")
			old.t.Transport = h
			old.pg.DataDir = dir
			cand := swStandby("standby1", "m", "streaming", 0, 0, "on")
			cand.conninfo, _ = parseConninfo("host=/run/primary port=5432 user=rep")
			sw := &switchover{old: old, direct: []*swMember{cand}}
			_, err := sw.planRepoint(context.Background(), cand, "")
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do(unreadable(tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			// The failed command's own words name the file too (its
			// arguments): what must not repeat is the "read FILE".
			if n := strings.Count(err.Error(), "read "+tc.file) + strings.Count(err.Error(), "config "+tc.file); n != 1 {
				t.Errorf("%s named as read %d times, want once: %v", tc.file, n, err)
			}
		})
	}
}

// TestPatroniStepCheckReadErrorNamesFileOnce: the postgresql.conf a
// Patroni member's apply reads before any change, unreadable (here a
// directory: cat fails on it, even as root), fails the step with the
// file named once.
func TestPatroniStepCheckReadErrorNamesFileOnce(t *testing.T) {
	dir := t.TempDir()
	yml, conf := dir+"/patroni.yml", dir+"/postgresql.conf"
	writeTestFile(t, yml, patroniYML)
	if err := os.Mkdir(conf, 0o700); err != nil {
		t.Fatal(err)
	}
	f := &fakePatroni{mu: new(sync.Mutex), leader: "a", leaderState: "running", postmaster: "2026-12-02 00:00:00", timeline: 2}
	srv := httptest.NewServer(f)
	defer srv.Close()
	tg, _, owner := restTarget(t)
	st := &State{PG: &facts.Postgres{Owner: owner, ConfigFile: conf},
		Patroni: &PatroniState{Scope: "c1", Member: "a", ConfigFile: yml, APIURL: srv.URL, Set: newParams}}
	err := New().applyPatroni(context.Background(), tg, st)
	want := `Patroni cluster "c1", member "a": step check before any change: read ` + conf + ": "
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Count(err.Error(), "read "+conf) != 1 {
		t.Fatalf("err %v\nwant %q…, the file read named once", err, want)
	}
}
