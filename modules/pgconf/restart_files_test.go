package pgconf

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestRestartFilesKeptForTheDetachedPart: where sh is bash, the EXIT trap
// also runs when a cancel's TERM kills the script. Once the detached
// restart is started it writes its output file by name, so the script
// must leave both files to it (it removes them): removed, their names in
// /tmp would be free for anyone to plant a file root then writes through.
// Before that, the script's own exit removes them.
func TestRestartFilesKeptForTheDetachedPart(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("bash is needed: it is the shell whose EXIT trap runs on TERM")
	}
	for _, tc := range []struct {
		name     string
		detached bool
	}{{"killed while the restart runs detached", true}, {"killed before it", false}} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			// The names are told once the state is set: a TERM sent on
			// reading them finds it so.
			body := ""
			if tc.detached {
				body += "detached=1; "
			}
			body += `echo "$out $res"; `
			// The wait stands for setsid -w, killed with the script's group.
			cmd := exec.Command(bash, "-c", restartFiles+body+"sleep 30 & wait $!; finished=1")
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			files := strings.Fields(line)
			if len(files) != 2 {
				t.Fatalf("files %q", line)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			for _, f := range files {
				_, err := os.Stat(f)
				if kept := err == nil; kept != tc.detached {
					t.Errorf("%s kept %v after TERM, want %v", f, kept, tc.detached)
				}
			}
		})
	}
}
