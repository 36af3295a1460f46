package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/rollout"
	"github.com/pgtune/pgtune/engine/transport"
)

// interruptingApp runs the CLI in-process over fleetApp's hosts and sends
// sig to this process from the run's first connection: with serial that
// is the pre-batch fact gather's. The connection is held until the run
// cancels it, so the signal is known to have reached the run, and
// cancelled reports whether it did (false: the deadline passed).
func interruptingApp(t *testing.T, m *mark, sig syscall.Signal) (run func(args ...string) (code int, stderr, stdout string), cancelled func() bool) {
	t.Helper()
	transcript := []byte(profiles[0].transcript())
	log := &commandLog{path: filepath.Join(t.TempDir(), "fake.log")}
	var once sync.Once
	var cut bool
	dial := func(ctx context.Context, h *inventory.Host) (transport.Transport, error) {
		first := false
		once.Do(func() { first = true })
		if !first {
			return localFacts{Local: transport.NewLocal(), fake: &fakeHost{name: h.Name, transcript: transcript, log: log}}, nil
		}
		if err := syscall.Kill(os.Getpid(), sig); err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			cut = true
			return nil, ctx.Err()
		case <-time.After(time.Minute): // a deadline, not a wait: the signal cuts it
			return nil, errors.New("the signal did not cut the connection")
		}
	}
	return func(args ...string) (int, string, string) {
			t.Helper()
			var mod engine.Module
			if m != nil { // nil: pgtune's own modules
				mod = m
			}
			app, stdout, stderr := testApp(mod)
			app.Dial = dial
			if args[0] != "explain" { // explain prints text only
				args = append(args, "--format", "json")
			}
			code := app.Run(args)
			return code, stderr.String(), stdout.String()
		}, func() bool {
			return cut
		}
}

// TestRolloutInterruptedDuringGather: Ctrl-C (SIGINT or SIGTERM) while a
// serial apply reads every host's facts before its first batch stops the
// run there: exit 130, no host planned or applied, and no run state for a
// run that never started. Interrupted the same way, a resume leaves its
// run's state as it was and can be resumed again.
func TestRolloutInterruptedDuringGather(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			m := newMark("h1")
			normal, inv, book := fleetApp(t, m)
			dir, err := rollout.Dir()
			if err != nil {
				t.Fatal(err)
			}

			run, cancelled := interruptingApp(t, m, sig)
			code, stderr, _ := run("apply", "-i", inv, "--yes", "--serial", "2", book)
			if !cancelled() {
				t.Fatalf("the gather went on after the signal\n%s", stderr)
			}
			if code != exitInterrupted || len(m.events) != 0 {
				t.Errorf("exit %d, module calls %v; want exit %d and no host planned or applied\n%s", code, m.events, exitInterrupted, stderr)
			}
			if !strings.Contains(stderr, "interrupted while reading the hosts' facts") || !strings.Contains(stderr, "no host was changed") {
				t.Errorf("stderr does not say the run was interrupted and nothing changed:\n%s", stderr)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a run that never started left run state: %v", entries)
			}

			// A run stopped by its failed canary, then resumed and
			// interrupted during the gather: its state is untouched.
			code, _, stderr = normal("apply", "-i", inv, "--yes", "--serial", "1,100%", book)
			if code != 1 || !strings.Contains(stderr, "--resume") {
				t.Fatalf("failed canary: exit %d\n%s", code, stderr)
			}
			st, err := rollout.Load(dir, "")
			if err != nil {
				t.Fatal(err)
			}
			before := readString(t, st.Path())
			delete(m.fail, "h1")
			m.events, m.applied = nil, nil
			run, cancelled = interruptingApp(t, m, sig)
			code, stderr, _ = run("apply", "--resume", "--yes")
			if !cancelled() || code != exitInterrupted || len(m.events) != 0 {
				t.Errorf("interrupted resume: exit %d, module calls %v; want exit %d and none\n%s", code, m.events, exitInterrupted, stderr)
			}
			if !strings.Contains(stderr, "--resume "+st.ID) {
				t.Errorf("stderr does not say how to continue run %s:\n%s", st.ID, stderr)
			}
			if after := readString(t, st.Path()); after != before {
				t.Errorf("an interrupted resume changed the run state:\n%s\nwas:\n%s", after, before)
			}

			// The run resumes after all: every host applied once.
			code, _, stderr = normal("apply", "--resume", "--yes")
			if code != 0 || len(m.applied) != 5 {
				t.Errorf("resume: exit %d, applied %v; want 0 and all 5 hosts\n%s", code, m.applied, stderr)
			}
		})
	}
}

// noDiscovery is a localFacts host whose PostgreSQL discovery fails: a
// rollback, which names no host in a play, skips a host where no cluster
// was found, but looks at one where the discovery failed.
type noDiscovery struct{ localFacts }

func (h noDiscovery) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	if isDiscovery(cmd) {
		res := transport.Result{ExitCode: 1, Stderr: []byte("discovery refused by the test")}
		return res, &transport.ExitError{Command: cmd.String(), Result: res}
	}
	return h.localFacts.Run(ctx, cmd)
}

// promptWriter is stderr that calls asked once the confirmation question
// (or want, when set) has been written.
type promptWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	once  sync.Once
	want  string
	asked func()
}

func (w *promptWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	n, err := w.buf.Write(p)
	want := w.want
	if want == "" {
		want = "[y/N]"
	}
	done := strings.Contains(w.buf.String(), want)
	w.mu.Unlock()
	if done {
		w.once.Do(w.asked)
	}
	return n, err
}

func (w *promptWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestRollbackInterrupted: Ctrl-C while rollback plans, or at its
// question, stops it with exit 130 and nothing changed. Its signal
// context takes the signal, so before, a rollback went on to ask and to
// apply under a cancelled context (with --yes at once), and a Ctrl-C at
// the question went unnoticed.
func TestRollbackInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the host lock's commands on this machine as root")
	}
	for _, when := range []string{"planning", "question"} {
		t.Run(when, func(t *testing.T) {
			t.Setenv("XDG_STATE_HOME", t.TempDir())
			work := t.TempDir()
			dir := filepath.Join(work, "managed")
			file := filepath.Join(dir, "managed.conf")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, file, "old\n")
			inv := filepath.Join(work, "inventory.yml")
			writeFile(t, inv, "all:\n  hosts:\n    h1:\n      pgtune_state_dir: "+filepath.Join(work, "h1")+"\n    h2:\n      pgtune_state_dir: "+filepath.Join(work, "h2")+"\n")
			book := filepath.Join(work, "gate.yml")
			writeFile(t, book, "- hosts: h1\n  policy:\n    gate:\n      file: "+file+"\n      content: \"new\\n\"\n")
			transcript := []byte(profiles[0].transcript())
			log := &commandLog{path: filepath.Join(work, "fake.log")}
			signal := func() {
				if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
					t.Error(err)
				}
			}
			app := func(dial func(ctx context.Context, h *inventory.Host) error, stdin io.Reader, stderr io.Writer, args ...string) int {
				a := newApp()
				a.Modules = []engine.Module{&gate{dir: dir}}
				a.Stdin, a.Stdout, a.Stderr = stdin, io.Discard, stderr
				a.IsTerminal = func() bool { return stdin != nil }
				a.Dial = func(ctx context.Context, h *inventory.Host) (transport.Transport, error) {
					if err := dial(ctx, h); err != nil {
						return nil, err
					}
					return noDiscovery{localFacts{Local: transport.NewLocal(), fake: &fakeHost{name: h.Name, transcript: transcript, log: log}}}, nil
				}
				return a.Run(args)
			}
			reach := func(context.Context, *inventory.Host) error { return nil }
			var out bytes.Buffer
			if code := app(reach, nil, &out, "apply", "--yes", "-i", inv, book); code != 0 || readString(t, file) != "new\n" {
				t.Fatalf("apply: exit %d, file %q\n%s", code, readString(t, file), out.String())
			}

			var code int
			var stderr fmt.Stringer
			switch when {
			case "planning":
				// h1 is planned (its rollback has a change), then the
				// signal comes while h2 is reached.
				var cut bool
				dial := func(ctx context.Context, h *inventory.Host) error {
					if h.Name != "h2" {
						return nil
					}
					signal()
					select {
					case <-ctx.Done():
						cut = true
						return ctx.Err()
					case <-time.After(time.Minute): // a deadline, not a wait: the signal cuts it
						return errors.New("the signal did not cut the connection")
					}
				}
				var buf bytes.Buffer
				code, stderr = app(dial, nil, &buf, "rollback", "--yes", "--forks", "1", "-i", inv), &buf
				if !cut {
					t.Fatalf("the signal did not reach the rollback\n%s", buf.String())
				}
			case "question":
				// A terminal nobody answers, closed (no answer: not
				// confirmed) should the signal go unnoticed.
				stdin, hold := io.Pipe()
				w := &promptWriter{asked: func() {
					signal()
					time.AfterFunc(time.Minute, func() { hold.Close() }) // a deadline, not a wait
				}}
				code, stderr = app(reach, stdin, w, "rollback", "-i", inv), w
				hold.Close()
			}
			if code != exitInterrupted || !strings.Contains(stderr.String(), "interrupted") || !strings.Contains(stderr.String(), "nothing was changed") {
				t.Errorf("exit %d, want %d, and stderr saying it was interrupted and nothing was changed:\n%s", code, exitInterrupted, stderr)
			}
			if got := readString(t, file); got != "new\n" {
				t.Errorf("the interrupted rollback changed the file: %q", got)
			}
		})
	}
}

// TestOnSignal: the first signal stops a run, a second SIGINT or SIGTERM
// aborts it, a second SIGHUP (a dropped session sends two) does not.
func TestOnSignal(t *testing.T) {
	for _, tc := range []struct {
		sig         syscall.Signal
		stopping    bool
		stop, abort bool
	}{
		{syscall.SIGINT, false, true, false},
		{syscall.SIGHUP, false, true, false},
		{syscall.SIGINT, true, false, true},
		{syscall.SIGTERM, true, false, true},
		{syscall.SIGHUP, true, false, false},
	} {
		if stop, abort := onSignal(tc.sig, tc.stopping); stop != tc.stop || abort != tc.abort {
			t.Errorf("%v (stopping %t): stop %t abort %t, want %t %t", tc.sig, tc.stopping, stop, abort, tc.stop, tc.abort)
		}
	}
}

// hookedGate is gate with an after-rollback hook: it runs on a host once
// the host's gate files are put back, inside the host's rollback module.
type hookedGate struct {
	*gate
	after func(ctx context.Context, t *engine.Target) error
}

func (g hookedGate) AfterRollback(ctx context.Context, t *engine.Target) error {
	return g.after(ctx, t)
}

// TestRollbackInterruptedWhileApplying: Ctrl-C while rollback puts hosts
// back lets the host in flight finish (its files and its after hook, run
// under a context the first signal does not cut) and starts no other
// host; the exit is 130, and running the same rollback again puts back
// the rest. Before, rollback ran under a signal context: the first Ctrl-C
// cut the step in flight.
func TestRollbackInterruptedWhileApplying(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the host lock's commands on this machine as root")
	}
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	work := t.TempDir()
	dir := filepath.Join(work, "managed")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"h1": filepath.Join(dir, "h1.conf"), "h2": filepath.Join(dir, "h2.conf")}
	inv := filepath.Join(work, "inventory.yml")
	writeFile(t, inv, "all:\n  hosts:\n    h1:\n      pgtune_state_dir: "+filepath.Join(work, "h1")+"\n    h2:\n      pgtune_state_dir: "+filepath.Join(work, "h2")+"\n")
	book := filepath.Join(work, "gate.yml")
	var plays string
	for _, h := range []string{"h1", "h2"} {
		writeFile(t, files[h], "old\n")
		plays += "- hosts: " + h + "\n  policy:\n    gate:\n      file: " + files[h] + "\n      content: \"new\\n\"\n"
	}
	writeFile(t, book, plays)
	transcript := []byte(profiles[0].transcript())
	log := &commandLog{path: filepath.Join(work, "fake.log")}
	run := func(after func(context.Context, *engine.Target) error, stderr io.Writer, args ...string) int {
		a := newApp()
		a.Modules = []engine.Module{hookedGate{gate: &gate{dir: dir}, after: after}}
		a.Stdin, a.Stdout, a.Stderr = nil, io.Discard, stderr
		a.IsTerminal = func() bool { return false }
		a.Dial = func(ctx context.Context, h *inventory.Host) (transport.Transport, error) {
			return noDiscovery{localFacts{Local: transport.NewLocal(), fake: &fakeHost{name: h.Name, transcript: transcript, log: log}}}, nil
		}
		return a.Run(args)
	}
	none := func(context.Context, *engine.Target) error { return nil }
	var out bytes.Buffer
	if code := run(none, &out, "apply", "--yes", "-i", inv, book); code != 0 {
		t.Fatalf("apply: exit %d\n%s", code, out.String())
	}

	// The first host put back (forks 1: h1, then h2) sends the signal
	// from its after hook and holds until the run has taken it.
	taken := make(chan struct{})
	stderr := &promptWriter{want: "pgtune: interrupted: each host finishes", asked: func() { close(taken) }}
	var inFlight []string
	var cut bool
	after := func(ctx context.Context, tg *engine.Target) error {
		inFlight = append(inFlight, tg.Name)
		if len(inFlight) > 1 {
			return nil
		}
		if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
			return err
		}
		select {
		case <-taken:
		case <-time.After(time.Minute): // a deadline, not a wait
			return errors.New("the signal was not taken")
		}
		cut = ctx.Err() != nil
		return nil
	}
	code := run(after, stderr, "rollback", "--yes", "--forks", "1", "-i", inv, "--format", "json")
	if code != exitInterrupted || !strings.Contains(stderr.String(), "run the same rollback again") {
		t.Errorf("exit %d, want %d and how to finish on stderr:\n%s", code, exitInterrupted, stderr)
	}
	if cut {
		t.Error("the first Ctrl-C cut the host in flight")
	}
	if len(inFlight) != 1 {
		t.Fatalf("hosts put back: %v, want one (the other is not started after the Ctrl-C)", inFlight)
	}
	first, second := inFlight[0], map[string]string{"h1": "h2", "h2": "h1"}[inFlight[0]]
	if got := readString(t, files[first]); got != "old\n" {
		t.Errorf("%s, the host in flight, was not put back whole: %q", first, got)
	}
	if got := readString(t, files[second]); got != "new\n" {
		t.Errorf("%s was changed after the Ctrl-C: %q", second, got)
	}

	out.Reset()
	if code := run(none, &out, "rollback", "--yes", "-i", inv); code != 0 {
		t.Fatalf("the second rollback: exit %d\n%s", code, out.String())
	}
	for h, f := range files {
		if got := readString(t, f); got != "old\n" {
			t.Errorf("after the second rollback %s: %q, want it put back (first put back: %s)\n%s\nfirst:\n%s", h, got, first, out.String(), stderr)
		}
	}
}

// TestReadOnlyInterrupted: Ctrl-C cuts check, explain and facts where
// they are, shows what was read, and exits 130 as apply does, not 1 as
// for a failed host (before: 1, each host cut reported as failed).
func TestReadOnlyInterrupted(t *testing.T) {
	for _, args := range [][]string{{"check"}, {"explain"}, {"facts"}} {
		t.Run(args[0], func(t *testing.T) {
			m := newMark("h1")
			_, inv, book := fleetApp(t, m)
			mod := m
			if args[0] == "facts" {
				// facts takes no playbook: the built-in one's modules.
				args, mod = append(args, "-i", inv), nil
			} else {
				args = append(args, "-i", inv, book)
			}
			run, cancelled := interruptingApp(t, mod, syscall.SIGINT)
			code, stderr, stdout := run(args...)
			if !cancelled() {
				t.Fatalf("the signal did not cut the run\n%s", stderr)
			}
			if code != exitInterrupted || !strings.Contains(stderr, "pgtune: interrupted") {
				t.Errorf("exit %d, want %d and stderr saying it was interrupted:\n%s", code, exitInterrupted, stderr)
			}
			// The host cut while it was reached is not blamed on the
			// network (was: unreachable, "context canceled").
			if strings.Contains(stdout, `"unreachable": true`) || strings.Contains(stdout, "context canceled") ||
				!strings.Contains(stdout, "interrupted before it was read") {
				t.Errorf("the report does not say the host was cut by the interrupt:\n%s", stdout)
			}
		})
	}
}

// TestApplyInterruptedWhilePlanning: the first Ctrl-C while apply plans
// cuts the plan (it only reads) instead of waiting for every host to be
// planned: exit 130, nothing applied, and the run resumes. Before, the
// plan of the whole wave went on to its end (with hundreds of hosts,
// minutes) and only then did the run stop.
func TestApplyInterruptedWhilePlanning(t *testing.T) {
	m := newMark()
	normal, inv, book := fleetApp(t, m)
	run, cancelled := interruptingApp(t, m, syscall.SIGINT)
	code, stderr, _ := run("apply", "-i", inv, "--yes", book)
	if !cancelled() {
		t.Fatalf("the plan went on after the signal\n%s", stderr)
	}
	if code != exitInterrupted || len(m.applied) != 0 || !strings.Contains(stderr, "--resume") {
		t.Errorf("exit %d, applied %v; want exit %d, none applied, and how to resume\n%s", code, m.applied, exitInterrupted, stderr)
	}
	code, _, stderr = normal("apply", "--resume", "--yes")
	if code != 0 || len(m.applied) != 5 {
		t.Errorf("resume: exit %d, applied %v; want 0 and all 5 hosts\n%s", code, m.applied, stderr)
	}
}

// TestReadOnlySecondInterrupt: a second SIGINT or SIGTERM ends a read-only
// command at once (a host that holds on to its cut session must not keep
// the terminal); a second SIGHUP does not, as a dropped SSH session sends
// two. Before, every signal after the first was swallowed. The signals
// after the first are sent together: the pending SIGHUP (1) reaches the
// handler before SIGINT (2) whatever the timing, so an abort on SIGHUP
// would show as Abort(SIGHUP).
func TestReadOnlySecondInterrupt(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after []syscall.Signal
	}{
		{"SIGINT twice", []syscall.Signal{syscall.SIGINT}},
		{"SIGTERM after SIGINT", []syscall.Signal{syscall.SIGTERM}},
		{"a hangup does not abort", []syscall.Signal{syscall.SIGHUP, syscall.SIGINT}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMark("h1")
			_, inv, book := fleetApp(t, m)
			aborted := make(chan os.Signal, 4)
			app, _, stderr := testApp(m)
			app.Abort = func(s os.Signal) { aborted <- s }
			var once sync.Once
			var got []os.Signal
			app.Dial = func(ctx context.Context, h *inventory.Host) (transport.Transport, error) {
				first := false
				once.Do(func() { first = true })
				if !first {
					return nil, errors.New("not this one")
				}
				if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
					return nil, err
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Minute): // a deadline, not a wait
					return nil, errors.New("the first signal did not cut the connection")
				}
				for _, s := range tc.after {
					if err := syscall.Kill(os.Getpid(), s); err != nil {
						return nil, err
					}
				}
				select {
				case s := <-aborted:
					got = append(got, s)
				case <-time.After(time.Minute): // a deadline, not a wait
				}
				return nil, ctx.Err()
			}
			code := app.Run([]string{"check", "-i", inv, book, "--format", "json"})
			if len(got) != 1 || got[0] != tc.after[len(tc.after)-1] || len(aborted) != 0 {
				t.Fatalf("aborted by %v (then %d more), want once by %v\n%s", got, len(aborted), tc.after[len(tc.after)-1], stderr)
			}
			if !strings.Contains(stderr.String(), "interrupted again") {
				t.Errorf("stderr does not say why it ends:\n%s", stderr)
			}
			// The Abort hook returns; the run then ends as a first
			// interrupt does.
			if code != exitInterrupted {
				t.Errorf("exit %d, want %d", code, exitInterrupted)
			}
		})
	}
}

// stuckReadEnv makes the test binary a pgtune check whose one host never
// lets go of its cut connection (see TestReadOnlyKilledBySecondInterrupt).
const stuckReadEnv = "PGTUNE_TEST_STUCK_READ"

// runStuckRead is that check: it says "dialing" and "cut" on stderr.
func runStuckRead(inv string) int {
	a := newApp()
	a.Dial = func(ctx context.Context, h *inventory.Host) (transport.Transport, error) {
		fmt.Fprintln(os.Stderr, "dialing")
		<-ctx.Done()
		fmt.Fprintln(os.Stderr, "cut")
		select {} // a host that never answers again
	}
	return a.Run([]string{"check", "-i", inv})
}

// TestReadOnlyKilledBySecondInterrupt: the real second-interrupt path, in
// a process of its own: pgtune dies of the SIGINT, as a shell expects of
// Ctrl-C (a script's loop stops too), instead of waiting on a host that
// ignores the first.
func TestReadOnlyKilledBySecondInterrupt(t *testing.T) {
	inv := filepath.Join(t.TempDir(), "inventory.yml")
	writeFile(t, inv, "all:\n  hosts:\n    h1:\n")
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), stuckReadEnv+"="+inv, "XDG_STATE_HOME="+t.TempDir())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	guard := time.AfterFunc(2*time.Minute, func() { _ = cmd.Process.Kill() }) // a hang guard, not a wait
	defer guard.Stop()
	lines := bufio.NewScanner(stderr)
	var seen []string
	waitFor := func(want string) {
		for lines.Scan() {
			seen = append(seen, lines.Text())
			if lines.Text() == want {
				return
			}
		}
		t.Fatalf("pgtune ended before saying %q:\n%s", want, strings.Join(seen, "\n"))
	}
	waitFor("dialing")
	_ = cmd.Process.Signal(syscall.SIGINT)
	waitFor("cut")
	_ = cmd.Process.Signal(syscall.SIGINT)
	for lines.Scan() {
		seen = append(seen, lines.Text())
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("pgtune: %v, want killed by SIGINT\n%s", err, strings.Join(seen, "\n"))
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
		t.Fatalf("pgtune: %v, want killed by SIGINT\n%s", err, strings.Join(seen, "\n"))
	}
	if !strings.Contains(strings.Join(seen, "\n"), "interrupted again") {
		t.Errorf("stderr does not say why it ends:\n%s", strings.Join(seen, "\n"))
	}
}
