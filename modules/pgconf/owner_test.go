package pgconf

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// TestOwnerSwitchMatchesRunuser: the reads' switch to the owner (setpriv,
// ao_quick) gives the command the identity and environment runuser gives
// it, with no runuser in between; without ao_quick, runuser.
func TestOwnerSwitchMatchesRunuser(t *testing.T) {
	if testing.Short() {
		t.Skip("switches users: root")
	}
	const owner = "pgtunesp"
	testhost.EnsureUser(t, owner, false)
	const probe = `id -u; id -g; id -G; echo "$HOME $USER $LOGNAME"; cat /proc/$PPID/comm; echo "$PPID"`
	want, err := exec.Command("runuser", "-u", owner, "--", "sh", "-c", probe).Output()
	if err != nil {
		t.Fatal(err)
	}
	res, err := transport.NewLocal().Run(context.Background(), transport.Command{Args: []string{"sh", "-c", ownerScript, "sh", owner, probe}})
	if err != nil {
		t.Fatal(err)
	}
	gotLines, wantLines := strings.Split(string(res.Stdout), "\n"), strings.Split(string(want), "\n")
	if len(gotLines) < 5 || len(wantLines) < 5 {
		t.Fatalf("short output: %q / %q", res.Stdout, want)
	}
	if g, w := strings.Join(gotLines[:4], "\n"), strings.Join(wantLines[:4], "\n"); g != w {
		t.Errorf("as the owner through ownerScript:\n%s\nthrough runuser:\n%s", g, w)
	}
	// The script's shell becomes setpriv (sw_exec), which execs the
	// command: its parent is whoever ran the script, here this test;
	// runuser would fork it and wait, holding the PAM session.
	if len(gotLines) < 6 || gotLines[5] != strconv.Itoa(os.Getpid()) {
		t.Errorf("ownerScript's command ran under %q, want this test's process (the script's shell exec'd setpriv, no runuser or shell in between)", gotLines[4:])
	}

	// Without ao_quick (what restarts use), runuser and its PAM session.
	slow := `owner=$1 script=$2
shift 2
` + asOwnerFn + `as_owner sh -c "$script" sh "$@"
`
	res, err = transport.NewLocal().Run(context.Background(), transport.Command{Args: []string{"sh", "-c", slow, "sh", owner, probe}})
	if err != nil {
		t.Fatal(err)
	}
	if l := strings.Split(string(res.Stdout), "\n"); len(l) < 5 || l[4] != "runuser" {
		t.Errorf("without ao_quick the switch ran under %q, want runuser", l)
	}
}
