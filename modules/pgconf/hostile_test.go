package pgconf

import (
	"errors"
	"fmt"
	"testing"

	"github.com/pgtune/pgtune/engine/facts"
)

// The read script's headers carry the size `stat` printed, and the parser
// allocates by it: a host that forges it must get an error naming the
// value, never a panic (-2) or an allocation of what it asks (99999999999).
func TestParseReadForgedStatSize(t *testing.T) {
	want := []string{"f:/c/postgresql.conf"}
	for _, tc := range []struct {
		size, wantErr string
	}{
		{size: "-2", wantErr: "read /c/postgresql.conf: stat size -2 out of range [0, %d]"},
		{size: "-1", wantErr: "read /c/postgresql.conf: stat size -1 out of range [0, %d]"},
		{size: "99999999999", wantErr: "read /c/postgresql.conf: stat size 99999999999 out of range [0, %d]"},
		{size: "9223372036854775807", wantErr: "read /c/postgresql.conf: stat size 9223372036854775807 out of range [0, %d]"},
		{size: "99999999999999999999", wantErr: "read /c/postgresql.conf: stat size 99999999999999999999 out of range [0, %d]"},
		{size: "12k", wantErr: `read /c/postgresql.conf: stat size "12k" is not a number`},
		{size: "0x10", wantErr: `read /c/postgresql.conf: stat size "0x10" is not a number`},
	} {
		t.Run(tc.size, func(t *testing.T) {
			out := "F 0 1 600 postgres postgres " + tc.size + "\nshared = 1\n\n"
			err := parseRead([]byte(out), want, newConfFS())
			wantErr := tc.wantErr
			if re, ok := errors.AsType[*facts.RangeError](err); ok && !re.NaN {
				wantErr = fmt.Sprintf(tc.wantErr, len(out)) // the bound is what arrived
			}
			if _, ok := errors.AsType[*facts.RangeError](err); !ok || err.Error() != wantErr {
				t.Fatalf("err = %v\nwant %s", err, wantErr)
			}
		})
	}
	// The largest size the output can hold is read (and found short).
	if err := parseRead([]byte("F 0 1 600 a b 18\nx"), want, newConfFS()); err == nil || err.Error() != "read /c/postgresql.conf: truncated" {
		t.Fatalf("err = %v", err)
	}
	// An empty file is fine.
	fs := newConfFS()
	if err := parseRead([]byte("F 0 1 600 a b 0\n\n"), want, fs); err != nil || !fs.Files["/c/postgresql.conf"].Exists {
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
