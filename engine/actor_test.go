package engine

import (
	"context"
	"testing"

	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/transport"
)

// argsTransport records the arguments after a script's "sh -c SCRIPT sh".
type argsTransport struct{ got map[transport.Op][]string }

func (a *argsTransport) Run(_ context.Context, c transport.Command) (transport.Result, error) {
	if len(c.Args) > 4 {
		a.got[c.Op] = c.Args[4:]
	}
	return transport.Result{}, nil
}
func (a *argsTransport) Close() error { return nil }

// TestTargetActsAsClusterOwner: where root does not act itself, the
// target's reads, writes and removals act as the cluster owner, never as
// whoever owns the directory a path leads to (a link the owner made
// could lead to any user's: audit h119); with no cluster, as before.
func TestTargetActsAsClusterOwner(t *testing.T) {
	const p = "/var/lib/postgresql/15/main/conf.d/x.conf"
	for _, tc := range []struct {
		name string
		pg   *facts.Postgres
		want string
	}{
		{"cluster owner", &facts.Postgres{Owner: "postgres"}, "postgres"},
		{"no cluster", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &argsTransport{got: map[transport.Op][]string{}}
			tg := &Target{Name: "db1", Transport: tr, Facts: &facts.Facts{Postgres: tc.pg}}
			ctx := context.Background()
			if _, _, err := tg.ReadFile(ctx, p); err != nil {
				t.Fatal(err)
			}
			if err := tg.WriteFile(ctx, p, []byte("x"), transport.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := tg.RemoveFile(ctx, p); err != nil {
				t.Fatal(err)
			}
			// read: path, as; write: path, mode, owner, backup, size, as;
			// remove: path, backup, as.
			for op, i := range map[transport.Op]int{transport.OpReadFile: 1, transport.OpWriteFile: 5, transport.OpRemoveFile: 2} {
				if got := tr.got[op]; len(got) <= i || got[0] != p || got[i] != tc.want {
					t.Errorf("%s: args %q, want %q acting", op, got, tc.want)
				}
			}
			// An explicit user stays.
			if err := tg.WriteFile(ctx, p, []byte("x"), transport.WriteOptions{AsUser: "other"}); err != nil {
				t.Fatal(err)
			}
			if got := tr.got[transport.OpWriteFile]; got[5] != "other" {
				t.Errorf("AsUser replaced: %q", got)
			}
		})
	}
}
