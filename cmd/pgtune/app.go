package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/internal/mask"
	"github.com/pgtune/pgtune/internal/termsafe"
	"github.com/pgtune/pgtune/modules/registry"
	"github.com/pgtune/pgtune/playbooks"
)

// App is the CLI with its dependencies injected, so commands stay thin and
// tests can swap terminals and transports.
type App struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// IsTerminal reports whether stdin is a terminal someone can answer.
	IsTerminal func() bool
	Dial       engine.DialFunc
	Modules    []engine.Module
	Now        func() time.Time
	// ReadPassword reads a password without echo (nil: from the
	// terminal on stdin); see passwords.go.
	ReadPassword func(prompt string) (string, error)
	// Abort ends pgtune on a second interrupt of a read-only command
	// (nil: the signal's own way, see abort).
	Abort     func(os.Signal)
	passwords passwordFlags
}

func newApp() *App {
	return &App{
		Stdin:      os.Stdin,
		Stdout:     os.Stdout,
		Stderr:     os.Stderr,
		IsTerminal: func() bool { return term.IsTerminal(int(os.Stdin.Fd())) },
		Dial:       engine.Dial,
		Modules:    registry.All(),
		Now:        time.Now,
	}
}

// logger writes to stderr, usually the operator's terminal: messages and
// values (paths, errors, command output from hosts) are masked and
// escaped on their way (termsafe.Handler).
func (a *App) logger(o *options) *slog.Logger { return a.loggerTo(a.Stderr, o) }

// loggerTo is logger writing to w (stderr behind a progress line),
// coloured as stderr allows.
func (a *App) loggerTo(w io.Writer, o *options) *slog.Logger {
	level := slog.LevelInfo
	if o.verbose > 0 {
		level = slog.LevelDebug
	}
	h := newLineHandler(w, level, colorFor(a.Stderr, o.noColor))
	return slog.New(termsafe.Handler(h, mask.Text))
}

func (a *App) fail(err error) int {
	fmt.Fprintf(a.Stderr, "pgtune: %s\n", safeText(err.Error()))
	return 1
}

// safeText is how any message that may quote a host reaches the terminal:
// secrets masked, every line escaped.
func safeText(s string) string {
	return strings.Join(termsafe.Lines(mask.Text(s)), "\n")
}

// loaded is what every planning command starts from.
type loaded struct {
	inv   *inventory.Inventory
	book  *playbook.Playbook
	hosts []*inventory.Host
}

func (a *App) load(o *options) (*loaded, map[string]engine.Module, error) {
	inv, err := a.openInventory(o, playbookDir(o.playbook))
	if err != nil {
		return nil, nil, err
	}
	mods, reg := engine.Registry(a.Modules...)
	var book *playbook.Playbook
	if o.playbook == "" {
		book, err = playbook.Parse(playbooks.DefaultName, playbooks.Default, reg)
	} else {
		book, err = playbook.Load(o.playbook, reg)
	}
	if err != nil {
		return nil, nil, err
	}
	hosts, err := engine.Targets(inv, book, o.limit)
	if err != nil {
		return nil, nil, err
	}
	hosts, note, err := o.fleet.inShard(hosts)
	if err != nil {
		return nil, nil, err
	}
	if note != "" {
		fmt.Fprintf(a.Stderr, "pgtune: note: %s\n", note)
	}
	if err := applyExtraVars(o, hosts); err != nil {
		return nil, nil, err
	}
	a.showConnections(o, hosts)
	return &loaded{inv: inv, book: book, hosts: hosts}, mods, nil
}

func (a *App) runner(o *options, mods map[string]engine.Module) *engine.Runner {
	return &engine.Runner{
		Modules:     mods,
		Forks:       o.forks,
		Dial:        a.Dial,
		Log:         a.logger(o),
		RunID:       a.newRunID(),
		HostTimeout: o.timeout,
		PlanOnly:    o.planOnly,
		Shard:       o.fleet.shard != "",
	}
}

// newRunID names a run: sortable by time, unique across controllers.
// The six hex digits after the second are the millisecond (10 bits) and
// 14 random bits: a host's journals are put in run order by their ids
// (rollback goes back to the first), so runs in one second, such as an
// apply and a rollback right after it, must sort as they ran.
func (a *App) newRunID() string {
	now := a.Now().UTC()
	var b [2]byte
	_, _ = rand.Read(b[:])
	suffix := uint32(now.Nanosecond()/int(time.Millisecond))<<14 | uint32(b[0]&0x3f)<<8 | uint32(b[1])
	return fmt.Sprintf("%s-%06x", now.Format("20060102T150405Z"), suffix)
}

// signalContext is the context of the commands that only read (check,
// explain, facts). The first SIGINT or SIGTERM (or SIGHUP, see
// stopSignals) cancels it: remote sessions are torn down instead of
// orphaned, and what was read is still shown. A second SIGINT or SIGTERM
// ends pgtune at once, without the report: nothing is being changed, and
// a host that holds on to a cut session must not keep the terminal. A
// second SIGHUP does not (onSignal): a dropped SSH session sends two.
func (a *App) signalContext() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	// The terminal as it is now: a password prompt reading without echo
	// may be what the second interrupt cuts, and the shell must get its
	// echo back.
	var saved *term.State
	if a.Abort == nil && term.IsTerminal(int(os.Stdin.Fd())) {
		saved, _ = term.GetState(int(os.Stdin.Fd()))
	}
	release := watchSignals(cancel, func(s os.Signal) {
		fmt.Fprintln(a.Stderr, "pgtune: interrupted again: exiting without the report")
		if saved != nil {
			_ = term.Restore(int(os.Stdin.Fd()), saved)
		}
		a.abort(s)
	})
	return ctx, func() {
		release()
		cancel()
	}
}

// watchSignals calls first on the first stop signal (stopSignals) and
// again on a second SIGINT or SIGTERM (onSignal: a second SIGHUP is
// ignored), after which it stops watching; release stops it before.
func watchSignals(first func(), again func(os.Signal)) (release func()) {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, stopSignals()...)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		stopping := false
		for {
			select {
			case <-done:
				return
			case s := <-sig:
				f, abort := onSignal(s, stopping)
				if f {
					stopping = true
					first()
				}
				if abort {
					again(s)
					return
				}
			}
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
		wg.Wait()
	}
}

// abort ends the process the way the signal would have: a calling shell
// or script sees it killed by SIGINT (and stops its own loop) rather
// than a normal exit. App.Abort replaces it in tests.
func (a *App) abort(s os.Signal) {
	if a.Abort != nil {
		a.Abort(s)
		return
	}
	signal.Reset(s)
	if sig, ok := s.(syscall.Signal); ok {
		_ = syscall.Kill(os.Getpid(), sig)
		time.Sleep(time.Second) // the signal is delivered asynchronously
	}
	os.Exit(exitInterrupted)
}

// readInterrupted ends a read-only command a signal cut: what was read
// is shown first, then exit 130 (the user stopped it; no host failed).
func (a *App) readInterrupted(ctx context.Context) bool {
	if ctx.Err() == nil {
		return false
	}
	fmt.Fprintln(a.Stderr, "pgtune: interrupted; the hosts not read to the end are reported with the interruption as their error")
	return true
}

// stopSignals are the signals that stop a run: SIGINT, SIGTERM, and
// SIGHUP (the terminal went away: a laptop's SSH session dropped) unless
// it is ignored. Under nohup it is, and asking for it would undo that.
func stopSignals() []os.Signal {
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		sigs = append(sigs, syscall.SIGHUP)
	}
	return sigs
}

// confirm asks on a terminal; without one it refuses unless --yes.
func (a *App) confirm(o *options, question string) error {
	if o.yes {
		return nil
	}
	if !a.IsTerminal() {
		return errors.New("refusing to change hosts without confirmation: stdin is not a terminal; pass --yes to apply")
	}
	fmt.Fprintf(a.Stderr, "%s [y/N] ", termsafe.Line(question))
	var answer string
	_, _ = fmt.Fscanln(a.Stdin, &answer)
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return errors.New("not confirmed; nothing was changed")
}
