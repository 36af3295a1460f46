package facts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		in      string
		version string
		major   int
		wantErr bool
	}{
		{"postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)", "15.18", 15, false},
		{"postgres (PostgreSQL) 17.2", "17.2", 17, false},
		{"postgres (PostgreSQL) 9.6.24", "9.6.24", 9, false},
		{"postgres (PostgreSQL) 14.11 (Ubuntu 14.11-0ubuntu0.22.04.1)", "14.11", 14, false},
		{"postgres (PostgreSQL) 18devel", "18devel", 18, false},
		{"postgres (PostgreSQL) 16beta2", "16beta2", 16, false},
		{"bash: postgres: command not found", "", 0, true},
	}
	for _, tc := range tests {
		v, m, err := ParseVersion(tc.in)
		if (err != nil) != tc.wantErr || v != tc.version || m != tc.major {
			t.Errorf("ParseVersion(%q) = %q, %d, %v; want %q, %d, err %v", tc.in, v, m, err, tc.version, tc.major, tc.wantErr)
		}
	}
}

func TestConfigFromArgs(t *testing.T) {
	tests := []struct {
		name         string
		args         []string
		config, data string
	}{
		{"debian", []string{"/usr/lib/postgresql/15/bin/postgres", "-D", "/var/lib/postgresql/15/main", "-c", "config_file=/etc/postgresql/15/main/postgresql.conf"},
			"/etc/postgresql/15/main/postgresql.conf", "/var/lib/postgresql/15/main"},
		{"joined flags", []string{"postgres", "-D/srv/pg", "-cconfig_file=/srv/conf/pg.conf"}, "/srv/conf/pg.conf", "/srv/pg"},
		{"long option", []string{"postgres", "--config-file=/a/b.conf", "-D", "/d"}, "/a/b.conf", "/d"},
		{"long option underscore", []string{"postgres", "--config_file=/a/c.conf"}, "/a/c.conf", ""},
		{"other settings ignored", []string{"postgres", "-D", "/d", "-c", "shared_buffers=1GB", "-p", "5433"}, "", "/d"},
		{"dangling -D", []string{"postgres", "-D"}, "", ""},
		{"no args", nil, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, d := configFromArgs(tc.args)
			if c != tc.config || d != tc.data {
				t.Errorf("got config %q data %q; want %q %q", c, d, tc.config, tc.data)
			}
		})
	}
}

// out builds discovery output the way discoverScript prints it: the
// fixtures are written one record a line, the script ends each in NUL.
func out(blocks ...string) []byte {
	return []byte(strings.ReplaceAll(strings.Join(blocks, ""), "\n", "\x00"))
}

const (
	pmDebian = `[postmaster]
pid=812
exe=/usr/lib/postgresql/15/bin/postgres
cwd=/var/lib/postgresql/15/main
ruid=105
euid=105
hugetlb_kb=0
starttime=4711
arg=/usr/lib/postgresql/15/bin/postgres
arg=-D
arg=/var/lib/postgresql/15/main
arg=-c
arg=config_file=/etc/postgresql/15/main/postgresql.conf
data=/var/lib/postgresql/15/main
realdata=/var/lib/postgresql/15/main
owner=postgres
owner_uid=105
pg_version=15
pidfile_pid=812
pidfile_port=5432
pidfile_socket=/var/run/postgresql
bin=/usr/lib/postgresql/15/bin
version=postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)
`
	pmInitdb = `[postmaster]
pid=900
exe=/usr/lib/postgresql/15/bin/postgres
cwd=/srv/pg
ruid=1001
euid=1001
hugetlb_kb=700416
starttime=99
arg=/usr/lib/postgresql/15/bin/postgres
arg=-D
arg=/srv/pg
data=/srv/pg
realdata=/srv/pg
owner=pgadmin
owner_uid=1001
pg_version=15
has_conf=1
pidfile_pid=900
pidfile_port=5433
pidfile_socket=/tmp
bin=/usr/lib/postgresql/15/bin
version=postgres (PostgreSQL) 15.18
`
	clusterMainDown = `[cluster]
cluster=main
cluster_version=15
log=/var/log/postgresql/postgresql-15-main.log
data=/var/lib/postgresql/15/main
realdata=/var/lib/postgresql/15/main
owner=postgres
pg_version=15
bin=/usr/lib/postgresql/15/bin
version=postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)
`
	clusterOther = `[cluster]
cluster=other
cluster_version=14
log=/var/log/postgresql/postgresql-14-other.log
data=/var/lib/postgresql/14/other
`
)

func TestChoosePostgres(t *testing.T) {
	tests := []struct {
		name    string
		output  []byte
		opts    Options
		want    *Postgres
		wantErr string
	}{
		{"nothing", out(), Options{}, nil, ""},
		{"debian postmaster", out(pmDebian, clusterMainDown), Options{}, &Postgres{
			Source: "postmaster", DataDir: "/var/lib/postgresql/15/main", BinDir: "/usr/lib/postgresql/15/bin",
			ConfigFile: "/etc/postgresql/15/main/postgresql.conf", Version: "15.18", Major: 15, Owner: "postgres",
			Running: true, PID: 812, Port: 5432, SocketDir: "/var/run/postgresql", StartTime: 4711, Cluster: "main"}, ""},
		{"initdb postmaster on huge pages", out(pmInitdb), Options{}, &Postgres{
			Source: "postmaster", DataDir: "/srv/pg", BinDir: "/usr/lib/postgresql/15/bin",
			ConfigFile: "/srv/pg/postgresql.conf", Version: "15.18", Major: 15, Owner: "pgadmin",
			Running: true, PID: 900, Port: 5433, SocketDir: "/tmp", HugetlbPages: 700416 * 1024, StartTime: 99}, ""},
		{"two postmasters", out(pmDebian, pmInitdb), Options{}, nil,
			"2 postmasters are running (/srv/pg (pid 900), /var/lib/postgresql/15/main (pid 812)): set this host's pg_data in the inventory to the data directory of the one to manage"},
		// Debian clusters are named beside their data directory (what
		// pg_data takes).
		{"two postmasters, one a debian cluster", out(pmDebian, pmInitdb, clusterMainDown, clusterOther), Options{}, nil,
			"2 postmasters are running (/srv/pg (pid 900), /var/lib/postgresql/15/main (15/main, pid 812)): set this host's pg_data in the inventory to the data directory of the one to manage"},
		{"stopped debian cluster", out(clusterMainDown), Options{}, &Postgres{
			Source: "pg_lsclusters", DataDir: "/var/lib/postgresql/15/main", BinDir: "/usr/lib/postgresql/15/bin",
			ConfigFile: "/etc/postgresql/15/main/postgresql.conf", Version: "15.18", Major: 15, Owner: "postgres", Cluster: "main"}, ""},
		{"two stopped clusters", out(clusterMainDown, clusterOther), Options{}, nil,
			"pg_lsclusters lists 2 clusters (15/main (/var/lib/postgresql/15/main), 14/other (/var/lib/postgresql/14/other)) and none is running: set this host's pg_data in the inventory to the data directory of the one to manage"},
		{"pg_data picks a running one", out(strings.Replace(strings.Replace(pmInitdb, "[postmaster]", "[override]\nalive=1", 1), "pid=900\n", "pid=900\n", 1), pmDebian, pmInitdb),
			Options{PGData: "/srv/pg", PGBin: "/opt/pg/bin"}, &Postgres{
				Source: "inventory", DataDir: "/srv/pg", BinDir: "/opt/pg/bin", BinFromInventory: true,
				ConfigFile: "/srv/pg/postgresql.conf", Version: "15.18", Major: 15, Owner: "pgadmin",
				Running: true, PID: 900, Port: 5433, SocketDir: "/tmp", HugetlbPages: 700416 * 1024, StartTime: 99}, ""},
		{"pg_data of a debian cluster finds /etc config", out("[override]\n"+strings.SplitN(clusterMainDown, "\n", 5)[4], clusterMainDown),
			Options{PGData: "/var/lib/postgresql/15/main"}, &Postgres{
				Source: "inventory", DataDir: "/var/lib/postgresql/15/main", BinDir: "/usr/lib/postgresql/15/bin",
				ConfigFile: "/etc/postgresql/15/main/postgresql.conf", Version: "15.18", Major: 15, Owner: "postgres", Cluster: "main"}, ""},
		{"pg_config_file wins", out(pmInitdb), Options{PGConfigFile: "/etc/pg/custom.conf"}, &Postgres{
			Source: "postmaster", DataDir: "/srv/pg", BinDir: "/usr/lib/postgresql/15/bin",
			ConfigFile: "/etc/pg/custom.conf", Version: "15.18", Major: 15, Owner: "pgadmin",
			Running: true, PID: 900, Port: 5433, SocketDir: "/tmp", HugetlbPages: 700416 * 1024, StartTime: 99}, ""},
		// The command line is the owner's: a config file it names outside
		// the data directory and /etc/postgresql would have root edit a
		// file of the owner's choosing.
		{"config_file outside the cluster's places", out(strings.Replace(pmInitdb, "arg=/srv/pg\n", "arg=/srv/pg\narg=-c\narg=config_file=/etc/sysctl.conf\n", 1)), Options{}, nil,
			`the postmaster was started with config file "/etc/sysctl.conf", outside its data directory and /etc/postgresql: set pg_config_file in the inventory to use it`},
		{"config_file climbing out of the data dir", out(strings.Replace(pmInitdb, "arg=/srv/pg\n", "arg=/srv/pg\narg=-c\narg=config_file=/srv/pg/../../etc/x.conf\n", 1)), Options{}, nil,
			`the postmaster was started with config file "/etc/x.conf", outside its data directory and /etc/postgresql: set pg_config_file in the inventory to use it`},
		{"-D naming a config dir outside", out(strings.Replace(pmInitdb, "arg=/srv/pg\n", "arg=/etc/ssh\n", 1)), Options{}, nil,
			`the postmaster was started with config file "/etc/ssh/postgresql.conf", outside its data directory and /etc/postgresql: set pg_config_file in the inventory to use it`},
		{"config_file inside the data dir", out(strings.Replace(pmInitdb, "arg=/srv/pg\n", "arg=/srv/pg\narg=-c\narg=config_file=/srv/pg/conf/main.conf\n", 1)), Options{}, &Postgres{
			Source: "postmaster", DataDir: "/srv/pg", BinDir: "/usr/lib/postgresql/15/bin",
			ConfigFile: "/srv/pg/conf/main.conf", Version: "15.18", Major: 15, Owner: "pgadmin",
			Running: true, PID: 900, Port: 5433, SocketDir: "/tmp", HugetlbPages: 700416 * 1024, StartTime: 99}, ""},
		{"config_file under the inventory's pg_data link", out(strings.Replace(strings.Replace(pmInitdb, "[postmaster]", "[override]\nalive=1", 1), "data=/srv/pg\n", "data=/srv/link\n", 1),
			strings.Replace(pmInitdb, "arg=/srv/pg\n", "arg=/srv/pg\narg=-c\narg=config_file=/srv/link/postgresql.conf\n", 1)),
			Options{PGData: "/srv/link"}, &Postgres{
				Source: "inventory", DataDir: "/srv/pg", BinDir: "/usr/lib/postgresql/15/bin",
				ConfigFile: "/srv/link/postgresql.conf", Version: "15.18", Major: 15, Owner: "pgadmin",
				Running: true, PID: 900, Port: 5433, SocketDir: "/tmp", HugetlbPages: 700416 * 1024, StartTime: 99}, ""},
		{"pg_config_file vouches for a file outside", out(strings.Replace(pmInitdb, "arg=/srv/pg\n", "arg=/srv/pg\narg=-c\narg=config_file=/etc/pg/custom.conf\n", 1)), Options{PGConfigFile: "/etc/pg/custom.conf"}, &Postgres{
			Source: "postmaster", DataDir: "/srv/pg", BinDir: "/usr/lib/postgresql/15/bin",
			ConfigFile: "/etc/pg/custom.conf", Version: "15.18", Major: 15, Owner: "pgadmin",
			Running: true, PID: 900, Port: 5433, SocketDir: "/tmp", HugetlbPages: 700416 * 1024, StartTime: 99}, ""},
		{"pg_data missing", out("[override]\ndata=/nope\n"), Options{PGData: "/nope"}, nil,
			"pg_data /nope: no such directory (or not readable: set become)"},
		{"not a data dir", out("[override]\ndata=/etc\nrealdata=/etc\nbin=/usr/bin\n"), Options{PGData: "/etc"}, nil,
			"/etc: not a PostgreSQL data directory (no PG_VERSION, or not readable: set become)"},
		{"no binary", out("[override]\ndata=/d\nrealdata=/d\npg_version=15\nbin=\n"), Options{PGData: "/d"}, nil,
			"/d: no postgres binary found for PostgreSQL 15 (set pg_bin)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ignored, err := choosePostgres(parseBlocks(tc.output), tc.opts)
			if len(ignored) != 0 {
				t.Errorf("ignored %q", ignored)
			}
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if got != nil {
					t.Fatalf("got %+v; want nil", got)
				}
				return
			}
			if got == nil || !reflect.DeepEqual(*got, *tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDiscoverRefusesBadOverrides(t *testing.T) {
	for _, d := range []string{"relative/dir", "/x\n[postmaster]", "/x\x00y"} {
		if _, err := DiscoverPostgres(context.Background(), transport.NewLocal(), Options{PGData: d}); err == nil {
			t.Errorf("pg_data %q accepted", d)
		}
	}
}

// TestDiscoverLive runs the discovery script against a real cluster.
func TestDiscoverLive(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	c := testhost.Postgres(t)
	ctx := context.Background()
	tr := transport.NewLocal()

	pg, err := DiscoverPostgres(ctx, tr, Options{PGData: c.DataDir})
	if err != nil {
		t.Fatal(err)
	}
	want := Postgres{Source: "inventory", DataDir: c.DataDir, BinDir: c.BinDir, ConfigFile: c.ConfigFile(),
		Major: 15, Owner: "postgres", Running: true, PID: c.PID(t), Port: c.Port, SocketDir: c.SocketDir}
	got := *pg
	if !strings.HasPrefix(got.Version, "15.") || got.StartTime == 0 {
		t.Errorf("version %q start time %d", got.Version, got.StartTime)
	}
	got.Version, got.StartTime = "", 0
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}

	// Without pg_data the script must list our postmaster (other tests
	// may run theirs at the same time, so choose among ours only).
	res, err := tr.Run(ctx, transport.Command{Args: []string{"sh", "-c", discoverScript, "sh", "", "", ""}})
	if err != nil {
		t.Fatal(err)
	}
	var mine []block
	for _, b := range parseBlocks(res.Stdout) {
		if b.kind == "postmaster" && b.get("realdata") == c.DataDir {
			mine = append(mine, b)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("postmaster of %s listed %d times in:\n%s", c.DataDir, len(mine), res.Stdout)
	}
	pm, _, err := choosePostgres(mine, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if pm.Source != "postmaster" || pm.PID != want.PID || pm.ConfigFile != want.ConfigFile || pm.Port != c.Port {
		t.Errorf("from /proc: %+v", pm)
	}

	// Stopped: found through pg_data, not running.
	c.Stop(t)
	pg2, err := RefreshPostgres(ctx, tr, false, pg)
	if err != nil {
		t.Fatal(err)
	}
	if pg2.Running || pg2.PID != 0 || pg2.ConfigFile != pg.ConfigFile {
		t.Errorf("after stop: %+v", pg2)
	}
	c.Start(t)
	pg3, err := RefreshPostgres(ctx, tr, false, pg)
	if err != nil {
		t.Fatal(err)
	}
	if !pg3.Running || pg3.PID == pg.PID || pg3.PID != c.PID(t) {
		t.Errorf("after restart: %+v (was pid %d)", pg3, pg.PID)
	}
	if _, err := os.Stat(filepath.Join(c.DataDir, "postmaster.pid")); err != nil {
		t.Fatal(err)
	}
}

// Processes named postgres that are not postmasters: the script's
// [impostor] blocks, and [postmaster] blocks whose own facts disagree.
const (
	impNoPidfile = `[impostor]
pid=4242
why=no_pidfile
comm=postgres
exe=/tmp/x/postgres
data=/tmp/x
owner_uid=65534
ruid=65534
euid=65534
reader_uid=0
`
	impOtherPidfile = `[impostor]
pid=4243
why=pidfile_other
comm=postmaster
exe=/tmp/y/postgres
data=/var/lib/postgresql/15/main
owner_uid=105
ruid=65534
euid=65534
pidfile_pid=812
`
	impNoDataDir = `[impostor]
pid=4244
why=no_data_dir
comm=postgres
exe=
data=
owner_uid=
ruid=65534
euid=65534
reader_uid=0
`
)

func TestChoosePostgresIgnoresImpostors(t *testing.T) {
	forgedPID := strings.Replace(pmInitdb, "pidfile_pid=900", "pidfile_pid=901", 1)
	otherUID := strings.Replace(pmInitdb, "euid=1001", "euid=65534", 1)
	rootPM := strings.NewReplacer("ruid=1001", "ruid=0", "euid=1001", "euid=0", "owner_uid=1001", "owner_uid=0").Replace(pmInitdb)
	tests := []struct {
		name    string
		output  []byte
		opts    Options
		source  string // of the chosen cluster; "" for none
		notes   []string
		wantErr string
	}{
		{"two impostors and no cluster: not an error", out(impNoPidfile, impOtherPidfile), Options{}, "", []string{
			`ignored process 4242 named "postgres" (uid 65534, binary "/tmp/x/postgres"): no postmaster.pid to read in "/tmp/x"; it was not run`,
			`ignored process 4243 named "postmaster" (uid 65534, binary "/tmp/y/postgres"): the postmaster.pid of "/var/lib/postgresql/15/main" does not name it (it names pid 812); it was not run`,
		}, ""},
		{"impostors beside the postmaster", out(impNoPidfile, pmDebian, impNoDataDir, clusterMainDown), Options{}, "postmaster", []string{
			`ignored process 4242 named "postgres" (uid 65534, binary "/tmp/x/postgres"): no postmaster.pid to read in "/tmp/x"; it was not run`,
			`ignored process 4244 named "postgres" (uid 65534, binary ""): cannot tell its data directory; it was not run`,
		}, ""},
		{"impostors beside a stopped debian cluster", out(impNoPidfile, impOtherPidfile, clusterMainDown), Options{}, "pg_lsclusters", []string{
			`ignored process 4242 named "postgres" (uid 65534, binary "/tmp/x/postgres"): no postmaster.pid to read in "/tmp/x"; it was not run`,
			`ignored process 4243 named "postmaster" (uid 65534, binary "/tmp/y/postgres"): the postmaster.pid of "/var/lib/postgresql/15/main" does not name it (it names pid 812); it was not run`,
		}, ""},
		{"pg_data with an impostor", out("[override]\n"+strings.SplitN(clusterMainDown, "\n", 5)[4], impNoPidfile, clusterMainDown),
			Options{PGData: "/var/lib/postgresql/15/main"}, "inventory", []string{
				`ignored process 4242 named "postgres" (uid 65534, binary "/tmp/x/postgres"): no postmaster.pid to read in "/tmp/x"; it was not run`,
			}, ""},
		{"a postmaster block whose postmaster.pid names another pid", out(forgedPID, pmDebian), Options{}, "postmaster", []string{
			`ignored process 900 named "postgres" (uid 1001, binary "/usr/lib/postgresql/15/bin/postgres"): the postmaster.pid of "/srv/pg" does not name it (it names pid 901); it was not run`,
		}, ""},
		{"a postmaster block run by another uid", out(otherUID), Options{}, "", []string{
			`ignored process 900 named "postgres" (uid 1001, binary "/usr/lib/postgresql/15/bin/postgres"): it runs as uid 65534, but "/srv/pg" belongs to uid 1001; it was not run`,
		}, ""},
		{"a postmaster block running as root", out(rootPM), Options{}, "", []string{
			`ignored process 900 named "postgres" (uid 0, binary "/usr/lib/postgresql/15/bin/postgres"): it runs as root, which a postmaster never does; it was not run`,
		}, ""},
		{"read without privileges", out(strings.Replace(impNoPidfile, "reader_uid=0", "reader_uid=1000", 1)), Options{}, "", []string{
			`ignored process 4242 named "postgres" (uid 65534, binary "/tmp/x/postgres"): no postmaster.pid to read in "/tmp/x" (not readable without privileges? set become); it was not run`,
		}, ""},
		{"two genuine postmasters still need pg_data; impostors do not count", out(impNoPidfile, pmDebian, impOtherPidfile, pmInitdb), Options{}, "", nil,
			"2 postmasters are running (/srv/pg (pid 900), /var/lib/postgresql/15/main (pid 812)): set this host's pg_data in the inventory to the data directory of the one to manage"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pg, notes, err := choosePostgres(parseBlocks(tc.output), tc.opts)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.source == "" && pg != nil:
				t.Errorf("chose %+v; want none", pg)
			case tc.source != "" && (pg == nil || pg.Source != tc.source):
				t.Errorf("chose %+v; want one found via %s", pg, tc.source)
			}
			if strings.Join(notes, "\n") != strings.Join(tc.notes, "\n") {
				t.Errorf("notes:\n%s\nwant:\n%s", strings.Join(notes, "\n"), strings.Join(tc.notes, "\n"))
			}
		})
	}
}

// Host strings reach a note quoted: control characters escaped, invalid
// UTF-8 as \x escapes; and no host string can start a record of its own.
func TestIgnoredNoteEscapes(t *testing.T) {
	raw := "[impostor]\x00pid=77\x00why=no_pidfile\x00comm=post\x1b]0;x\x07gres\x00exe=/tmp/a\nb/postgres\x00" +
		"data=/tmp/\x1b[2K\rdb1: in policy\xff\n[postmaster]\npid=1\x00ruid=5\x00reader_uid=0\x00"
	blocks := parseBlocks([]byte(raw))
	if len(blocks) != 1 {
		t.Fatalf("%d blocks: %+v", len(blocks), blocks)
	}
	_, notes, err := choosePostgres(blocks, Options{})
	if err != nil || len(notes) != 1 {
		t.Fatalf("notes %q, err %v", notes, err)
	}
	want := `ignored process 77 named "post\x1b]0;x\agres" (uid 5, binary "/tmp/a\nb/postgres"): no postmaster.pid to read in "/tmp/\x1b[2K\rdb1: in policy\xff\n[postmaster]\npid=1"; it was not run`
	if notes[0] != want {
		t.Errorf("note\n%s\nwant\n%s", notes[0], want)
	}
	for _, c := range notes[0] {
		if c < 0x20 || c == 0x7f || c == utf8.RuneError {
			t.Fatalf("raw byte %q in note %q", c, notes[0])
		}
	}
}

func TestDescribeRefuses(t *testing.T) {
	base := "[override]\ndata=/d\nrealdata=/d\nowner=postgres\nowner_uid=105\npg_version=15\nbin=/opt/pg/bin\n"
	tests := []struct {
		name, block, wantErr string
	}{
		{"root-owned data directory", strings.Replace(base, "owner_uid=105", "owner_uid=0", 1) + "version=postgres (PostgreSQL) 15.2\n",
			"/d: owned by root, and PostgreSQL never runs as root (chown it to the cluster owner)"},
		{"binary no one may run", base + "bin_refused=1\n",
			`/opt/pg/bin/postgres: not run: it or a directory above it may be changed by a user other than root, and it cannot run as the cluster owner "postgres" (set pg_bin, or become)`},
		{"version that is not one", base + "version=\x1b[31mhello\n", `/opt/pg/bin/postgres --version: unrecognised version "\x1b[31mhello"`},
	}
	// A line break the owner put in a path (the postmaster's working
	// directory, its command line) would forge lines of the reports of the
	// scripts that print it (the restart's rc=, ready=): "\v" stands for
	// it here, where out makes records of lines.
	lineBreak := []struct{ name, block, wantErr string }{
		{"data directory with a line break", strings.NewReplacer("data=/d\n", "data=/d\vrc=0\n").Replace(base) + "version=postgres (PostgreSQL) 15.2\n",
			`refusing the cluster's data directory "/d\nrc=0": it contains a line break`},
		{"bin directory with a line break", strings.Replace(base, "bin=/opt/pg/bin", "bin=/opt/pg/bin\v", 1) + "version=postgres (PostgreSQL) 15.2\n",
			`refusing the cluster's bin directory "/opt/pg/bin\n": it contains a line break`},
	}
	for _, tc := range append(tests, lineBreak...) {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := choosePostgres(parseBlocks(bytes.ReplaceAll(out(tc.block), []byte("\v"), []byte("\n"))), Options{PGData: "/d"})
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("err = %v\nwant %s", err, tc.wantErr)
			}
		})
	}
}

// Numbers from the host outside their range are dropped, not believed.
func TestDescribeBoundsNumbers(t *testing.T) {
	pm := strings.NewReplacer("pidfile_port=5433", "pidfile_port=99999", "hugetlb_kb=700416", "hugetlb_kb=-5",
		"starttime=99", "starttime=-1").Replace(pmInitdb)
	pg, _, err := choosePostgres(parseBlocks(out(pm)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if pg.Port != 0 || pg.HugetlbPages != 0 || pg.StartTime != 0 || pg.PID != 900 {
		t.Errorf("got %+v", pg)
	}
}

// The script leaves pg_lsclusters out for a lone postmaster whose command
// line (NULs dropped) ends in a Debian config_file: the controller takes
// that only when the exact arguments name the same file, of the strict
// shape, and the postmaster is its choice too; else discovery must run
// again with the list.
func TestChoosePostgresWithoutClusterList(t *testing.T) {
	hinted := pmDebian + "debian_conf=/etc/postgresql/15/main/postgresql.conf\n"
	skipped := hinted + "[list_skipped]\n"
	pg, _, err := choosePostgres(parseBlocks(out(skipped)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if pg.ConfigFile != "/etc/postgresql/15/main/postgresql.conf" || pg.Cluster != "main" || pg.Source != "postmaster" {
		t.Errorf("got %+v; want Debian's 15/main from the command line", pg)
	}
	for _, tc := range []struct{ name, output string }{
		// "-D" "x-cconfig_file=/etc/..." reads the same without NULs.
		{"one argument hiding it", strings.Replace(skipped, "arg=-c\narg=config_file=", "arg=-cconfig_file=/srv/x.conf\narg=x-cconfig_file=", 1)},
		{"another file", strings.Replace(skipped, "debian_conf=/etc/postgresql/15/main/", "debian_conf=/etc/postgresql/15/other/", 1)},
		{"not the strict shape", strings.NewReplacer("15/main/postgresql.conf", "15/../postgresql.conf").Replace(skipped)},
		{"not a postmaster after all", strings.Replace(skipped, "pidfile_pid=812", "pidfile_pid=813", 1)},
		{"two postmasters", skipped + pmInitdb},
	} {
		if _, _, err := choosePostgres(parseBlocks(out(tc.output)), Options{}); !errors.Is(err, errListClusters) {
			t.Errorf("%s: %v; want errListClusters", tc.name, err)
		}
	}
	// debian_conf without [list_skipped]: the list was wanted (and not
	// to be had: pg_lsclusters missing or untrusted). No second trip:
	// the command line's file, or the usual error for two postmasters.
	if pg, _, err := choosePostgres(parseBlocks(out(hinted)), Options{}); err != nil || pg.ConfigFile != "/etc/postgresql/15/main/postgresql.conf" {
		t.Errorf("hint alone: %+v, %v", pg, err)
	}
	other := strings.NewReplacer("pid=812", "pid=813", "pidfile_pid=812", "pidfile_pid=813", "/var/lib/postgresql/15/main", "/var/lib/postgresql/15/other",
		"15/main/postgresql.conf", "15/other/postgresql.conf").Replace(hinted)
	if _, _, err := choosePostgres(parseBlocks(out(hinted, other)), Options{}); err == nil || errors.Is(err, errListClusters) || !strings.Contains(err.Error(), "2 postmasters are running") {
		t.Errorf("two hinted postmasters without the list: %v; want the two-postmasters error", err)
	}
	// With the list (clusters present), debian_conf changes nothing.
	if pg, _, err := choosePostgres(parseBlocks(out(skipped, clusterMainDown)), Options{}); err != nil || pg.Cluster != "main" {
		t.Errorf("with the list: %+v, %v", pg, err)
	}
}

// TestChoosePostgresManyPostmasters: the error for a host running many
// clusters names the first ten (sorted) and counts the rest.
func TestChoosePostgresManyPostmasters(t *testing.T) {
	var blocks []string
	for i := range 12 {
		b := strings.ReplaceAll(pmInitdb, "/srv/pg", fmt.Sprintf("/srv/pg%02d", i))
		blocks = append(blocks, strings.ReplaceAll(b, "900", fmt.Sprint(900+i)))
	}
	_, _, err := choosePostgres(parseBlocks(out(blocks...)), Options{})
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprintf("/srv/pg%02d (pid %d)", i, 900+i))
	}
	wantErr := "12 postmasters are running (" + strings.Join(want, ", ") + " and 2 more): set this host's pg_data in the inventory to the data directory of the one to manage"
	if err == nil || err.Error() != wantErr {
		t.Errorf("err = %v\nwant %s", err, wantErr)
	}
}

// The config file the owner's command line names, with a line break in
// it: refused like a data directory with one (TestDescribeRefuses).
func TestChoosePostgresRefusesConfigFileLineBreak(t *testing.T) {
	pm := strings.Replace(pmInitdb, "arg=/srv/pg\n", "arg=/srv/pg\narg=-c\narg=config_file=/srv/pg/a\vrc=0.conf\n", 1)
	_, _, err := choosePostgres(parseBlocks(bytes.ReplaceAll(out(pm), []byte("\v"), []byte("\n"))), Options{})
	want := `/srv/pg: the postmaster's config file "/srv/pg/a\nrc=0.conf" contains a line break`
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}
