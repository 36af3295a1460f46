package pgconf

import (
	"context"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
)

// The read script's records come from the host: a forged or truncated
// record is an error that names the record, never a panic, and never
// quotes what the host sent (it may be file content).
func TestParseReadForgedRecords(t *testing.T) {
	want := []string{"f:/c/postgresql.conf"}
	const secret = "c2VjcmV0IGxpbmU=" // "secret line"
	for _, tc := range []struct {
		name, out, wantErr string
	}{
		{"index negative", "F -1 1 600 a b -\n" + secret + "\n", "read configuration files: malformed record 1 of 1"},
		{"index past the list", "F 7 1 600 a b -\n" + secret + "\n", "read configuration files: malformed record 1 of 1"},
		{"index not a number", "F 99999999999999999999 1 600 a b -\n", "read configuration files: malformed record 1 of 1"},
		{"too few fields", "F 0\n", "read configuration files: malformed record 1 of 1"},
		{"content missing", "F 0 1 600 a b -\n", "read /c/postgresql.conf: truncated or malformed"},
		{"content not base64", "F 0 1 600 a b -\nsecret line!\n", "read /c/postgresql.conf: truncated or malformed"},
		{"real path not base64", "F 0 1 600 a b %%%\n" + secret + "\n", "read /c/postgresql.conf: truncated or malformed"},
		{"unknown record", "X 0 1\n", "read configuration files: malformed record 1 of 1"},
		{"empty output", "", "read configuration files: truncated output"},
		{"well-formed record", "F 0 1 600 a b -\n" + secret + "\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRead([]byte(tc.out), want, newConfFS())
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("err = %v\nwant %s", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Fatalf("error quotes host output: %v", err)
			}
		})
	}
	// A directory listing that never ends is truncated output, not a hang.
	if _, err := parseRead([]byte("D 0 1\nE a\n"), []string{"d:/c/conf.d"}, newConfFS()); err == nil || err.Error() != "read directory /c/conf.d: truncated" {
		t.Fatalf("err = %v", err)
	}
	// An empty file is fine.
	fs := newConfFS()
	if _, err := parseRead([]byte("F 0 1 600 a b -\n\n"), want, fs); err != nil || !fs.Files["/c/postgresql.conf"].Exists {
		t.Fatalf("empty file: %v %+v", err, fs.Files)
	}
}

// PIDs and the exit status in the restart report are bounds-checked: a
// forged value never reads as a new postmaster or as success.
func TestParseRestartHostileNumbers(t *testing.T) {
	for _, tc := range []struct {
		in         string
		newPID, rc int
	}{
		{in: "rc=0\nready=1\nnew_pid=-5\n", newPID: 0, rc: 0},
		{in: "rc=0\nready=1\nnew_pid=99999999999\n", newPID: 0, rc: 0},
		{in: "rc=0\nready=1\nnew_pid=4194305\n", newPID: 0, rc: 0},
		{in: "rc=0\nready=1\nnew_pid=12x\n", newPID: 0, rc: 0},
		{in: "rc=0\nready=1\nnew_pid=4194304\n", newPID: 4194304, rc: 0},
		{in: "rc=x\nready=1\nnew_pid=42\n", newPID: 42, rc: -1},
		{in: "rc=-3\nready=1\nnew_pid=42\n", newPID: 42, rc: -1},
		{in: "rc=256\nready=1\nnew_pid=42\n", newPID: 42, rc: -1},
		{in: "rc=18446744073709551616\nready=1\nnew_pid=42\n", newPID: 42, rc: -1},
	} {
		r := parseRestart(tc.in + "--- output\n--- log\n")
		if r.NewPID != tc.newPID || r.RC != tc.rc {
			t.Errorf("%q: new_pid %d rc %d, want %d %d", tc.in, r.NewPID, r.RC, tc.newPID, tc.rc)
		}
		if r.ok() != (tc.newPID != 0 && tc.rc == 0) {
			t.Errorf("%q: ok() = %v", tc.in, r.ok())
		}
	}
}

func TestParseSizeHostile(t *testing.T) {
	for _, in := range []string{"9223372036854775807kB", "1125899906842625kB", "-1125899906842625kB", "99999999999999999999", "1e3MB", ""} {
		if n, err := parseSize(in, 8192); err == nil {
			t.Errorf("parseSize(%q) = %d, want an error", in, n)
		}
	}
	if n, err := parseSize("1125899906842624kB", 8192); err != nil || n != facts.MaxBytes {
		t.Errorf("largest size: %d %v", n, err)
	}
}

// Running values the host reports out of range read as unknown (0) and
// never wrap the shared_buffers product around.
func TestDescribeLiveHostile(t *testing.T) {
	before, differs := describeLive(map[string]string{
		"block_size": "8192", "shared_buffers": "9223372036854775807", "huge_pages": "on", "huge_page_size": "-1",
	})
	if before != "shared_buffers=0 huge_pages=on huge_page_size=0" {
		t.Errorf("before = %q", before)
	}
	if !differs(128 << 20) {
		t.Error("an unknown shared_buffers matches the policy")
	}
}

// Debian's version and cluster names come from paths the owner can make
// (/etc/postgresql/V/C/postgresql.conf) and reach pg_ctlcluster as root:
// a name that reads as an option is refused before anything runs (the
// target has no transport: running anything would panic).
func TestRestartRefusesHostileDebianNames(t *testing.T) {
	for _, tc := range []struct {
		config, cluster, wantErr string
	}{
		{"/etc/postgresql/-o/main/postgresql.conf", "main", `refusing Debian cluster "-o" "main"`},
		{"/etc/postgresql/15/--force/postgresql.conf", "--force", `refusing Debian cluster "15" "--force"`},
		{"/etc/postgresql/15/m\x1b[2K/postgresql.conf", "m\x1b[2K", `refusing Debian cluster "15" "m\x1b[2K"`},
		{"/etc/postgresql/15/a b/postgresql.conf", "a b", `refusing Debian cluster "15" "a b"`},
	} {
		pg := &facts.Postgres{DataDir: "/var/lib/postgresql/15/main", Owner: "postgres", Major: 15,
			ConfigFile: tc.config, Cluster: tc.cluster}
		for _, action := range []string{"restart", "status"} {
			_, err := runRestartScript(context.Background(), &engine.Target{Name: "db1"}, pg, "", action)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s %q: err %v, want %q", action, tc.config, err, tc.wantErr)
			}
		}
	}
	for _, ok := range [][2]string{{"15", "main"}, {"9.6", "main"}, {"16", "test_2.b-c"}} {
		if err := checkDebianNames(ok[0], ok[1]); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
}

// What the host said of a refused Debian unit (its main process, what
// pg_lsclusters listed) is host text: quoted in the error.
func TestDebianRefusal(t *testing.T) {
	pg := &facts.Postgres{DataDir: "/var/lib/postgresql/15/mine", Cluster: "other", ConfigFile: "/etc/postgresql/15/other/postgresql.conf"}
	const tail = ` (data directory "/var/lib/postgresql/15/mine"; the unit's name comes from the config file on the postmaster's command line, "/etc/postgresql/15/other/postgresql.conf", which the cluster owner chooses); set pg_restart in the inventory to choose the command`
	for _, tc := range []struct {
		out, want string
	}{
		{"unit_pid=4242\x1b[2J\nmethod=systemd\nrefused=unit\n",
			`refusing to restart postgresql@15-other with systemctl: its main process is "4242\x1b[2J", not this cluster's running postmaster` + tail},
		{"debian_data=/srv/x\x1b[2J\nmethod=systemd\nrefused=debian\n",
			`refusing to restart postgresql@15-other with systemctl: pg_lsclusters lists its data directory as "/srv/x\x1b[2J"` + tail},
		{"debian_data=\nmethod=systemd\nrefused=debian\n",
			`refusing to restart postgresql@15-other with systemctl: pg_lsclusters does not list 15/other (or is not root's alone to change)` + tail},
	} {
		r := parseRestart(tc.out)
		if r.Refused == "" {
			t.Fatalf("%q: not refused", tc.out)
		}
		if got := debianRefusal("15", pg, r).Error(); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}
