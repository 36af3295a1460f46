package facts

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

// named starts, as nobody, a shell that names itself name (its comm, as
// prctl or a write to /proc/PID/comm can) and waits; with child set, a
// child shell of it names itself child and waits too. It returns their
// PIDs (kid 0 without child). Both are killed in Cleanup.
func named(t *testing.T, name, child string) (shell, kid int) {
	t.Helper()
	dir := testhost.OwnedDir(t, "nobody")
	script := `printf %s "$1" > /proc/$$/comm || exit 1
if [ -n "$2" ]; then sh -c 'printf %s "$1" > /proc/$$/comm && echo $$ > "$2.tmp" && mv "$2.tmp" "$2" && sleep 600' sh "$2" "$3/kid" & fi
echo $$ > "$3/shell.tmp" && mv "$3/shell.tmp" "$3/shell"
sleep 600`
	pid := testhost.StartAs(t, "nobody", "/", "/bin/sh", "-c", script, "sh", name, child, dir)
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }) // the group: children too
	read := func(f string) int {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	deadline := time.Now().Add(testhost.HangGuard)
	for shell = read("shell"); shell == 0 || (child != "" && read("kid") == 0); shell = read("shell") {
		if time.Now().After(deadline) {
			t.Fatalf("%q did not start", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if child != "" {
		kid = read("kid")
	}
	return shell, kid
}

// The processes the discovery's loop looks at are chosen by procFilter
// (awk), which reads each process's stat once: it must pick what the loop
// alone picks (awk missing or failing: every process, as before),
// postmasters and impostors alike, whatever the processes call
// themselves. Here: a real postmaster with its children; a process named
// postgres with a child named postgres (to the loop a backend, not looked
// at); names with a line break, with ") ", with blanks around
// "postgres" (the loop's read drops them), "postmaster"; and a parent
// whose name, cut at its line break, reads as a short stat record of a
// process named postgres: its child is looked at.
func TestDiscoveryProcessListAsTheLoopAlone(t *testing.T) {
	testhost.WatchKernel(t) // other packages' clusters must not come and go mid-read
	c := testhost.Postgres(t)
	realPID := c.PID(t)
	parent, kid := named(t, "postgres", "postgres")
	newline, _ := named(t, "postgres\nx", "")
	paren, _ := named(t, "x) S 1 (pg", "")
	pm, _ := named(t, "postmaster", "")
	trail, _ := named(t, "postgres ", "")
	lead, _ := named(t, "\tpostgres", "")
	fakeParent, fakeKid := named(t, "postgres) 1 2\nx", "postgres")
	ours := []int{realPID, parent, kid, newline, paren, pm, trail, lead, fakeParent, fakeKid}
	names := fmt.Sprintf("pids: postmaster %d, postgres %d and %d under it, line break %d, paren %d, postmaster-named %d, blanks %d %d, short record %d and %d under it",
		realPID, parent, kid, newline, paren, pm, trail, lead, fakeParent, fakeKid)

	// awk failing, and awk saying nothing but exiting 0: the loop alone.
	stub, mute := t.TempDir(), t.TempDir()
	for dir, body := range map[string]string{stub: "#!/bin/sh\nexit 1\n", mute: "#!/bin/sh\nexit 0\n"} {
		if err := os.WriteFile(filepath.Join(dir, "awk"), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	discover := func(path string) map[int]string {
		t.Helper()
		args := []string{"env", "PATH=" + path, "sh", "-c", discoverScript, "sh", "", "", ""}
		res, err := transport.NewLocal().Run(context.Background(), transport.Command{Args: args})
		if err != nil {
			t.Fatal(err)
		}
		got := map[int]string{}
		for _, b := range parseBlocks(res.Stdout) {
			pid, _ := strconv.Atoi(b.get("pid"))
			if slices.Contains(ours, pid) && (b.kind == "postmaster" || b.kind == "impostor") {
				got[pid] = b.kind + " " + b.get("why")
			}
		}
		return got
	}
	path := os.Getenv("PATH")
	alone, muted, withAwk := discover(stub+":"+path), discover(mute+":"+path), discover(path)
	if !maps.Equal(alone, withAwk) || !maps.Equal(muted, withAwk) {
		t.Errorf("the loop alone found %v (awk mute: %v); with awk %v (%s)", alone, muted, withAwk, names)
	}
	want := map[int]string{realPID: "postmaster", parent: "impostor", newline: "impostor", pm: "impostor",
		trail: "impostor", lead: "impostor", fakeKid: "impostor"}
	for _, pid := range ours {
		if kind, _, _ := strings.Cut(withAwk[pid], " "); kind != want[pid] {
			t.Errorf("pid %d: %q; want %q (%s)", pid, withAwk[pid], want[pid], names)
		}
	}

	// The filter itself lists what the loop must judge, and leaves out
	// the backends (the postmaster's children, the child of "postgres")
	// and names it can tell are not postgres.
	out, err := exec.Command("sh", "-c", `exec awk "$1" /proc/[0-9]*/stat`, "sh", procFilter).Output()
	if err != nil {
		t.Fatalf("awk: %v", err)
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 || fields[len(fields)-1] != "." {
		t.Fatalf("filter: %q; want its last line \".\"", out)
	}
	listed := map[int]bool{}
	for _, f := range fields[:len(fields)-1] {
		n, _ := strconv.Atoi(f)
		listed[n] = true
	}
	leftOut := []int{kid, paren}
	for _, b := range childrenOf(t, realPID) {
		leftOut = append(leftOut, b)
	}
	if len(leftOut) < 3 {
		t.Fatalf("the postmaster %d has no children to leave out", realPID)
	}
	for _, pid := range []int{realPID, parent, newline, pm, trail, lead, fakeParent, fakeKid} {
		if !listed[pid] {
			t.Errorf("filter: pid %d not listed (%s)", pid, names)
		}
	}
	for _, pid := range leftOut {
		if listed[pid] {
			t.Errorf("filter: pid %d listed; a backend or not postgres (%s)", pid, names)
		}
	}
}

// childrenOf is the PIDs whose parent is pid, from /proc.
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var kids []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		l := string(b)
		if i := strings.LastIndex(l, ") "); i >= 0 {
			if fl := strings.Fields(l[i+2:]); len(fl) > 1 && fl[1] == strconv.Itoa(pid) {
				n, _ := strconv.Atoi(strings.Fields(l)[0])
				kids = append(kids, n)
			}
		}
	}
	return kids
}
