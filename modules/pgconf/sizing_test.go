package pgconf

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/facts"
)

// model is a stand-in for `postgres -C`: the segment is shared_buffers
// plus a fixed part plus a per-buffer part (descriptors, hash entries,
// checkpoint sort array), as in the server.
type model struct {
	fixed, perBuffer, block, hugePage int64
	calls                             int
}

func (m *model) segment(sb int64) int64 { return sb + m.fixed + sb/m.block*m.perBuffer }

func (m *model) mb(sb int64) int64 { return roundUp(m.segment(sb), mib) / mib }

func (m *model) probe(_ context.Context, sb int64) (int64, int64, error) {
	m.calls++
	if sb%m.block != 0 {
		return 0, 0, fmt.Errorf("shared_buffers %d not in whole blocks", sb)
	}
	return m.mb(sb), roundUp(m.segment(sb), m.hugePage) / m.hugePage, nil
}

func TestFitPool(t *testing.T) {
	const mb, gb = int64(1 << 20), int64(1 << 30)
	tests := []struct {
		name      string
		pool      int64
		m         model
		maxProbes int
		wantErr   string
	}{
		{"small pool, 2 MB pages", 128 * mb, model{fixed: 14 * mb, perBuffer: 150, block: 8192, hugePage: 2 * mb}, 1, ""},
		{"25% of 24 GB", 3013 * 2 * mb, model{fixed: 20 * mb, perBuffer: 150, block: 8192, hugePage: 2 * mb}, 2, ""},
		{"128 GB box, 32 GB pool", 32 * gb, model{fixed: 40 * mb, perBuffer: 150, block: 8192, hugePage: 2 * mb}, 2, ""},
		{"1 GB pages", 16 * gb, model{fixed: 30 * mb, perBuffer: 150, block: 8192, hugePage: gb}, 3, ""},
		{"32 kB blocks", 4 * gb, model{fixed: 30 * mb, perBuffer: 150, block: 32768, hugePage: 2 * mb}, 2, ""},
		{"heavy per-buffer overhead", 8 * gb, model{fixed: 200 * mb, perBuffer: 900, block: 8192, hugePage: 2 * mb}, 3, ""},
		{"pool not a whole number of pages", 100*mb + 12345, model{fixed: 14 * mb, perBuffer: 150, block: 8192, hugePage: 2 * mb}, 2, ""},
		{"overhead bigger than the pool", 16 * mb, model{fixed: 40 * mb, perBuffer: 150, block: 8192, hugePage: 2 * mb}, 0,
			"a huge page pool of 16MB cannot hold the shared memory segment: its overhead alone is about 41MB (raise the pool)"},
		{"no pool", 1 * mb, model{fixed: 14 * mb, perBuffer: 150, block: 8192, hugePage: 2 * mb}, 0,
			"huge page pool is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			poolBytes := tc.pool / m.hugePage * m.hugePage
			got, err := fitPool(context.Background(), tc.pool, m.hugePage, m.block, m.mb(poolBytes), m.probe)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.SharedBuffers%m.block != 0 {
				t.Errorf("shared_buffers %d not whole blocks", got.SharedBuffers)
			}
			seg := m.segment(got.SharedBuffers)
			if seg > poolBytes {
				t.Errorf("segment %d > pool %d", seg, poolBytes)
			}
			if slack := poolBytes - seg; slack > maxSlack(poolBytes, m.hugePage) {
				t.Errorf("slack %d > allowed %d", slack, maxSlack(poolBytes, m.hugePage))
			}
			// Whole blocks, as big as fits: one more block of 8 kB either
			// still fits (then the slack rule above is what bounds it) or
			// does not.
			if got.SegmentPages != roundUp(seg, m.hugePage)/m.hugePage || got.SegmentMB != m.mb(got.SharedBuffers) {
				t.Errorf("reported %d MB / %d pages; model says %d / %d", got.SegmentMB, got.SegmentPages, m.mb(got.SharedBuffers), roundUp(seg, m.hugePage)/m.hugePage)
			}
			if m.calls > tc.maxProbes {
				t.Errorf("%d probes; want at most %d", m.calls, tc.maxProbes)
			}
		})
	}
}

// A probe whose answers do not settle must end in an error, not a loop.
func TestFitPoolGivesUp(t *testing.T) {
	calls := 0
	flip := func(_ context.Context, sb int64) (int64, int64, error) {
		calls++
		if calls%2 == 1 {
			return 200, 101, nil // always one page too many
		}
		return 100, 40, nil // then far too small
	}
	_, err := fitPool(context.Background(), 200<<20, 2<<20, 8192, 210, flip)
	if err == nil || calls > 8 {
		t.Fatalf("err %v after %d probes", err, calls)
	}
	if !strings.Contains(err.Error(), "could not fill the pool of 100 huge pages closely") {
		t.Errorf("err = %v", err)
	}
}

func TestFatalLine(t *testing.T) {
	tests := []struct{ name, log, want string }{
		{"shared memory with hint",
			"2026-11-30 07:39:30.1 UTC [123] LOG:  starting PostgreSQL 15.18\n" +
				"2026-11-30 07:39:30.1 UTC [123] FATAL:  could not map anonymous shared memory: Cannot allocate memory\n" +
				"2026-11-30 07:39:30.1 UTC [123] HINT:  This error usually means that PostgreSQL's request for a shared memory segment exceeded available memory, swap space, or huge pages.\n" +
				"2026-11-30 07:39:30.1 UTC [123] LOG:  database system is shut down\n",
			"FATAL:  could not map anonymous shared memory: Cannot allocate memory (HINT: This error usually means that PostgreSQL's request for a shared memory segment exceeded available memory, swap space, or huge pages.)"},
		{"bad setting, no hint",
			"2026-11-30 07:39:30.1 UTC [9] LOG:  invalid value for parameter \"huge_pages\": \"maybe\"\n" +
				"2026-11-30 07:39:30.1 UTC [9] FATAL:  configuration file \"/d/conf.d/002-hugepages.conf\" contains errors\n",
			`FATAL:  configuration file "/d/conf.d/002-hugepages.conf" contains errors`},
		{"first fatal wins", "FATAL:  one\nFATAL:  two\n", "FATAL:  one"},
		{"a standby's start: the startup process's FATAL, not a client's or the WAL receiver's before it",
			"2026-12-02 00:08:01.067 UTC [29497] LOG:  starting PostgreSQL 15.18\n" +
				"2026-12-02 00:08:01.100 UTC [29510] FATAL:  the database system is starting up\n" +
				"2026-12-02 00:08:01.300 UTC [29511] FATAL:  could not connect to the primary server: connection to server on socket \"/s/.s.PGSQL.5432\" failed: No such file or directory\n" +
				"\t\tIs the server running locally and accepting connections on that socket?\n" +
				"2026-12-02 00:08:01.410 UTC [29503] LOG:  entering standby mode\n" +
				"2026-12-02 00:08:01.413 UTC [29503] FATAL:  recovery aborted because of insufficient parameter settings\n" +
				"2026-12-02 00:08:01.413 UTC [29503] DETAIL:  max_connections = 5 is a lower setting than on the primary server, where its value was 20.\n" +
				"2026-12-02 00:08:01.413 UTC [29503] HINT:  You can restart the server after making the necessary configuration changes.\n" +
				"2026-12-02 00:08:01.430 UTC [29497] LOG:  startup process (PID 29503) exited with exit code 1\n" +
				"2026-12-02 00:08:01.434 UTC [29497] LOG:  database system is shut down\n",
			"FATAL:  recovery aborted because of insufficient parameter settings (DETAIL: max_connections = 5 is a lower setting than on the primary server, where its value was 20.; HINT: You can restart the server after making the necessary configuration changes.)"},
		{"no PIDs: a client's FATAL is passed over", "FATAL:  the database system is starting up\nFATAL:  data directory has wrong ownership\n",
			"FATAL:  data directory has wrong ownership"},
		{"only a client's FATAL", "FATAL:  the database system is starting up\n", "FATAL:  the database system is starting up"},
		{"panic", "x PANIC:  could not write to file\n", "PANIC:  could not write to file"},
		{"nothing", "LOG:  all good\n", ""},
	}
	for _, tc := range tests {
		if got := fatalLine(tc.log); got != tc.want {
			t.Errorf("%s: got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func TestParseRestart(t *testing.T) {
	out := "method=pg_ctl\nlog=/tmp/x/server.log\nold_pid=100\nrc=1\nready=0\nnew_pid=\n--- output\n" +
		"waiting for server to start.... stopped waiting\npg_ctl: could not start server\nExamine the log output.\n" +
		"--- log\n2026 [200] FATAL:  could not map anonymous shared memory: Cannot allocate memory\n"
	r := parseRestart(out)
	if r.Method != "pg_ctl" || r.Log != "/tmp/x/server.log" || r.OldPID != 100 || r.RC != 1 || r.Ready || r.NewPID != 0 || r.ok() {
		t.Fatalf("%+v", r)
	}
	if got := r.failure(); got != "FATAL:  could not map anonymous shared memory: Cannot allocate memory" {
		t.Errorf("failure %q", got)
	}
	ok := parseRestart("method=systemd\nlog=/l\nold_pid=1\nrc=0\nready=1\nnew_pid=2\n--- output\n--- log\n")
	if !ok.ok() {
		t.Errorf("%+v not ok", ok)
	}
	noFatal := parseRestart("method=pg_restart\nrc=3\nready=0\nnew_pid=\n--- output\nboom\n--- log\n")
	if got := noFatal.failure(); got != "pg_restart exited with status 3: boom" {
		t.Errorf("failure %q", got)
	}
}

func TestParseRead(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	// The content holds what looks like records: base64 keeps it inert.
	content := "shared = 1\nF 1 0\nZ\n\n"
	out := "F 0 1 600 postgres postgres - \n" + b64(content) + "\nF 1 0\nD 2 1\nE b.conf\nE a.conf\nZ\nD 3 0\nF 4 2 -\n" +
		"F 5 1 644 root root " + b64("/etc/postgresql/shared.conf") + "\n" + b64("x = 1\n") + "\nF 6 3 " + b64("/gone") + "\nP 7 " + b64("/real/data") + "\n"
	want := []string{"f:/c/postgresql.conf", "f:/d/postgresql.auto.conf", "d:/c/conf.d", "d:/c/none", "f:/c/secret.conf", "f:/c/link.conf", "f:/c/dangling.conf", "p:/d"}
	fs := newConfFS()
	places, err := parseRead([]byte(out), want, fs)
	if err != nil {
		t.Fatal(err)
	}
	if f := fs.Files["/c/postgresql.conf"]; !f.Exists || string(f.Content) != content || f.Mode != "600" || f.Owner != "postgres" || f.Real != "" {
		t.Errorf("file: %+v", f)
	}
	if f := fs.Files["/d/postgresql.auto.conf"]; f.Exists {
		t.Errorf("missing file: %+v", f)
	}
	if d := fs.Dirs["/c/conf.d"]; strings.Join(d, ",") != "a.conf,b.conf" {
		t.Errorf("dir: %v", d)
	}
	if d, ok := fs.Dirs["/c/none"]; !ok || d != nil {
		t.Errorf("missing dir: %v %v", d, ok)
	}
	if f := fs.Files["/c/secret.conf"]; !f.Unreadable {
		t.Errorf("unreadable: %+v", f)
	}
	if f := fs.Files["/c/link.conf"]; f.Real != "/etc/postgresql/shared.conf" || fs.target("/c/link.conf") != f.Real || fs.target("/c/postgresql.conf") != "/c/postgresql.conf" {
		t.Errorf("link: %+v", f)
	}
	if f := fs.Files["/c/dangling.conf"]; !f.Dangling || f.Exists || f.Real != "/gone" {
		t.Errorf("dangling: %+v", f)
	}
	if strings.Join(places, ",") != "/real/data" {
		t.Errorf("places: %v", places)
	}
	for _, bad := range []string{"F 0 1 600 a b -\nnot base64!\n", "F 0 1 600 a b -\n", "X 0 1\n", "F 9 0\n"} {
		_, err := parseRead([]byte(bad), want[:1], newConfFS())
		if err == nil {
			t.Errorf("%q accepted", bad)
		} else if strings.Contains(err.Error(), "base64") || strings.Contains(err.Error(), "600 a b") {
			t.Errorf("error quotes the output: %v", err)
		}
	}
}

func TestLinkPolicy(t *testing.T) {
	lp := linkPolicy{Owner: "postgres", Places: []string{"/var/lib/pg/data", "/etc/postgresql/15/main", "/etc/postgresql"}}
	tests := []struct {
		name    string
		f       confFile
		wantErr string
	}{
		{"no link", confFile{Exists: true, Owner: "alice"}, ""},
		{"owner's file in the data directory", confFile{Exists: true, Owner: "postgres", Real: "/var/lib/pg/data/x.conf"}, ""},
		{"root's file under /etc/postgresql", confFile{Exists: true, Owner: "root", Real: "/etc/postgresql/common.conf"}, ""},
		{"another user's file", confFile{Exists: true, Owner: "alice", Real: "/etc/postgresql/15/main/a.conf"}, "owned by alice"},
		{"outside the places", confFile{Exists: true, Owner: "root", Real: "/etc/shadow"}, "outside the allowed places"},
		{"prefix is not inside", confFile{Exists: true, Owner: "postgres", Real: "/var/lib/pg/data2/x.conf"}, "outside the allowed places"},
		{"unreadable target", confFile{Exists: true, Unreadable: true, Real: "/root/secret"}, "postgres cannot read it"},
		{"link to nothing", confFile{Dangling: true, Real: "/nowhere/x.conf"}, "which does not exist or postgres cannot reach"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := lp.check("/var/lib/pg/data/postgresql.auto.conf", &tc.f)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "/var/lib/pg/data/postgresql.auto.conf is reached through a symbolic link to "+tc.f.Real) {
				t.Fatalf("err = %v; want %q naming the path", err, tc.wantErr)
			}
		})
	}
}

// TestParseErrorsQuoteNothing: whatever the bad line holds, the error
// names file and line only.
func TestParseErrorsQuoteNothing(t *testing.T) {
	for _, line := range []string{
		"root:$6$SECRETHASH$abc:19000 SECRET:0:99999:7:::",
		"password = 'SECRET unterminated",
		"primary_conninfo = host=x password=SECRET",
		"=SECRET",
	} {
		_, err := parseConf("/d/postgresql.auto.conf", []byte("a = 1\n"+line+"\n"))
		if err == nil {
			t.Errorf("%q parsed", line)
			continue
		}
		if strings.Contains(err.Error(), "SECRET") || !strings.HasPrefix(err.Error(), "/d/postgresql.auto.conf:2: ") {
			t.Errorf("%q: %v", line, err)
		}
	}
}

func unitTarget(pg *facts.Postgres, pgErr string) *engine.Target {
	return &engine.Target{Name: "h", Scope: expr.NewScope("t.yml"),
		Facts: &facts.Facts{HugePageSize: 2 << 20, HugePagesTotal: 64, Postgres: pg, PostgresError: pgErr}}
}

func TestCheckWithoutUsableCluster(t *testing.T) {
	m := New()
	p, err := m.Check(context.Background(), unitTarget(nil, ""), m.NewParams())
	if err != nil || p.HasChanges() || len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "no PostgreSQL cluster found") {
		t.Errorf("no cluster: %v %+v", err, p)
	}
	_, err = m.Check(context.Background(), unitTarget(nil, "2 postmasters are running (...): set this host's pg_data in the inventory to the data directory of the one to manage"), m.NewParams())
	if err == nil || !strings.Contains(err.Error(), "pg_data in the inventory") {
		t.Errorf("ambiguous: %v", err)
	}
	_, err = m.Check(context.Background(), unitTarget(&facts.Postgres{Major: 14, DataDir: "/d"}, ""), m.NewParams())
	if err == nil || !strings.HasPrefix(err.Error(), "PostgreSQL 14 has no shared_memory_size; pgtune needs 15 or later") {
		t.Errorf("PG 14: %v", err)
	}
}

func TestParams(t *testing.T) {
	pg := &facts.Postgres{Major: 15, DataDir: "/d", Owner: "postgres", ConfigFile: "/d/postgresql.conf"}
	tests := []struct {
		name    string
		set     func(*Params)
		want    settings
		wantErr string
	}{
		{"defaults: pool from the kernel", nil, settings{pool: 64 * 2 << 20, restart: true, onOverride: "fail", dropin: "conf.d/002-hugepages.conf", primary: "restart", switchoverTimeout: 60}, ""},
		{"expression pool", func(p *Params) { p.Pool = mustParse("${2 * GiB}") }, settings{pool: 2 << 30, restart: true, onOverride: "fail", dropin: "conf.d/002-hugepages.conf", primary: "restart", whole: 64 * 2 << 20, switchoverTimeout: 60}, ""},
		{"fix, no restart", func(p *Params) { p.OnOverride = expr.Literal("fix"); p.Restart = expr.Literal(false) },
			settings{pool: 64 * 2 << 20, restart: false, onOverride: "fix", dropin: "conf.d/002-hugepages.conf", primary: "restart", switchoverTimeout: 60}, ""},
		{"primary: skip", func(p *Params) { p.Primary = expr.Literal("skip") },
			settings{pool: 64 * 2 << 20, restart: true, onOverride: "fail", dropin: "conf.d/002-hugepages.conf", primary: "skip", switchoverTimeout: 60}, ""},
		{"switchover_timeout", func(p *Params) { p.Primary = expr.Literal("switchover"); p.SwitchoverTimeout = expr.Literal("2m") },
			settings{pool: 64 * 2 << 20, restart: true, onOverride: "fail", dropin: "conf.d/002-hugepages.conf", primary: "switchover", switchoverTimeout: 120}, ""},
		{"bad primary", func(p *Params) { p.Primary = expr.Literal("failover") }, settings{}, `primary: "failover" is not restart, switchover or skip`},
		{"bad policy", func(p *Params) { p.OnOverride = expr.Literal("ignore") }, settings{}, `on_override: "ignore" is not fail or fix`},
		{"negative pool", func(p *Params) { p.Pool = expr.Literal(-5) }, settings{}, "pool: -5 is not a positive size"},
		{"bad dropin", func(p *Params) { p.Dropin = expr.Literal("conf.d/x'; DROP") }, settings{}, "dropin"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := New()
			p := m.NewParams().(*Params)
			if tc.set != nil {
				tc.set(p)
			}
			got, err := m.params(unitTarget(pg, ""), p)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func mustParse(s string) expr.Value {
	v, err := expr.Parse(s, "t.yml", 1, 1)
	if err != nil {
		panic(err)
	}
	return v
}
