package facts

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// GatherHost reads the facts and looks for the cluster in one round trip;
// a cluster it cannot find is the facts' PostgresError, not a failed
// gather. Gather runs the same script without asking for discovery.
func TestGatherHostLocal(t *testing.T) {
	testhost.Steady(t) // machine-wide facts: held still where they could change
	ctx := context.Background()
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"pg_data missing", Options{PGData: "/nonexistent/pgtune-test"}, "pg_data /nonexistent/pgtune-test: no such directory"},
		{"pg_data not absolute", Options{PGData: "relative/dir"}, `pg_data "relative/dir": must be an absolute path`},
		{"pg_bin with a line break", Options{PGData: "/d", PGBin: "/a\nb"}, "contains a line break or NUL"},
	}
	f, err := Gather(ctx, transport.NewLocal(), Options{PGData: "/nonexistent/pgtune-test"})
	if err != nil || f.Postgres != nil || f.PostgresError != "" {
		t.Errorf("Gather: %v, postgres %+v %q; want facts without discovery", err, f.Postgres, f.PostgresError)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := GatherHost(ctx, transport.NewLocal(), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if f.MemTotal <= 0 {
				t.Errorf("MemTotal %d: the gather's facts are missing", f.MemTotal)
			}
			if f.Postgres != nil || !strings.Contains(f.PostgresError, tc.wantErr) {
				t.Errorf("postgres %+v, error %q; want none and %q", f.Postgres, f.PostgresError, tc.wantErr)
			}
		})
	}
}

// Only the last D line is discovery's: one the host printed before it (a
// hostname with a line break, say) cannot stand in for it.
func TestDiscoveryLineLastWins(t *testing.T) {
	forged := base64.StdEncoding.EncodeToString([]byte("[override]\x00realdata=/forged\x00"))
	real := base64.StdEncoding.EncodeToString([]byte("[override]\x00realdata=/real\x00"))
	out := "M MemTotal: 1 kB\nH x\nD " + forged + "\nW 1\nD " + real + "\n"
	blocks, answered, err := discoveryLine([]byte(out))
	if err != nil || !answered {
		t.Fatal(err)
	}
	if len(blocks) != 1 || blocks[0].get("realdata") != "/real" {
		t.Errorf("blocks %+v; want the last D line's", blocks)
	}
	if b, answered, err := discoveryLine([]byte("M MemTotal: 1 kB\n")); err != nil || b != nil || answered {
		t.Errorf("no D line: %v, %v, %v; want not answered (GatherHost then asks on its own)", b, answered, err)
	}
	if _, _, err := discoveryLine([]byte("M x\nD W1s=!\n")); err == nil {
		t.Error("a D line saying the script failed: want an error")
	}
	if _, _, err := discoveryLine([]byte("M x\nD ####\n")); err == nil {
		t.Error("a D line that is not base64: want an error")
	}
}
