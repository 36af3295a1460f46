package facts

import (
	"context"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
)

func TestZZDebug(t *testing.T) {
	sets := []Set{{Name: "probe", PostmasterRuns: [][]string{{"sh", "-c", `echo "pid=$1"`, "sh", PMPid}}}}
	nonce := "NONCE"
	ask := "discover\n\n\n" + nonce + "\n" + preRunRequest(sets, []string{"probe"}) + "\n"
	args := append([]string{"sh", "-c", GatherScript(sets), "sh"}, SysctlKeys(sets)...)
	res, err := transport.NewLocal().Run(context.Background(), transport.Command{Args: args, Stdin: []byte(ask)})
	out := res.Stdout
	i := len(out) - 1500
	if i < 0 {
		i = 0
	}
	t.Logf("%v\n%q", err, out[i:])
	_, ran, answered, err := discoveryAnswer(out, nonce, false)
	t.Logf("ran %d answered %v err %v", ran.Len(), answered, err)
}
