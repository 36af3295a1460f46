package sysctlconf

import (
	"context"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/transport"
)

type cannedTransport struct {
	transport.Transport
	res transport.Result
}

func (c cannedTransport) Run(context.Context, transport.Command) (transport.Result, error) {
	return c.res, nil
}

// TestResolveOutputClipped: an unexpected answer to the path resolution is
// quoted clipped (a host may print up to the output cap).
func TestResolveOutputClipped(t *testing.T) {
	long := strings.Repeat("x", 100_000) + "\n" + strings.Repeat("y", 100_000) + "\n"
	tg := &engine.Target{Name: "db1", Transport: cannedTransport{res: transport.Result{Stdout: []byte(long)}}}
	_, err := resolve(context.Background(), tg, []string{"/etc/sysctl.d/90-pgtune.conf"})
	if err == nil || len(err.Error()) > transport.MaxErrorOutput+200 {
		t.Fatalf("error of %d bytes, want the output clipped", len(err.Error()))
	}
}
