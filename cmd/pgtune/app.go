package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	charmlog "github.com/charmbracelet/log"
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
	passwords    passwordFlags
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

const usage = `pgtune puts PostgreSQL hosts on a safe memory policy.

Usage:
  pgtune check    [-i INVENTORY] [--limit PATTERN] [--forks N] [--format text|json] [PLAYBOOK]
  pgtune apply    [-i INVENTORY] [--limit PATTERN] [--forks N] [--format text|json] [--yes] [PLAYBOOK]
  pgtune rollback [-i INVENTORY] [--limit PATTERN] [--forks N] [--format text|json] [--yes] [--run ID]
  pgtune facts    [-i INVENTORY] [--limit PATTERN] [--format text|json]
  pgtune validate [-i INVENTORY] [PLAYBOOK]
  pgtune inventory list [-i INVENTORY] [--host HOST] [--format text|json]

check, apply, rollback and facts also take -k/--ask-pass (SSH login
password) and -K/--ask-become-pass (sudo password), read from the terminal
without echo; inventory vars ansible_password / ansible_become_password win.

Without -i the inventory is ansible.cfg's, else localhost over the local
connection (-i also takes a directory or a host list "db1,db2,"); without
PLAYBOOK the built-in policy (playbooks/memory.yml) is used.

check exits 0 when every host is in policy, 2 on drift, 1 on any error.
apply exits 0 when every host is ok and verified, 1 otherwise.
`

// Run executes one command line and returns the exit code.
func (a *App) Run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(a.Stderr, usage)
		return 1
	}
	cmd, rest := args[0], args[1:]
	if err := refuseAnsibleFlags(rest); err != nil {
		return a.fail(err)
	}
	rest, a.passwords = takePasswordFlags(rest)
	var run func([]string) int
	switch cmd {
	case "check":
		run = a.runCheck
	case "apply":
		run = a.runApply
	case "facts":
		run = a.runFacts
	case "validate":
		run = a.runValidate
	case "rollback":
		run = a.runRollback
	case "inventory":
		run = a.runInventory
	case "help", "-h", "--help":
		fmt.Fprint(a.Stdout, usage)
		return 0
	default:
		fmt.Fprintf(a.Stderr, "pgtune: unknown command %q\n\n%s", cmd, usage)
		return 1
	}
	return run(rest)
}

// options are the flags the commands share.
type options struct {
	inventory string
	limit     string
	forks     int
	format    string
	yes       bool
	verbose   bool
	timeout   time.Duration
	runID     string
	playbook  string
	planOnly  bool            // check: no apply follows the plan
	given     map[string]bool // flags given on the command line
	fleet     fleetOptions    // rollout, resume and shard flags (fleet.go)
}

// parse reads flags and at most maxArgs positional arguments, which may
// stand before, between or after the flags.
func (a *App) parse(name string, args []string, maxArgs int, setup func(*flag.FlagSet, *options)) (*options, error) {
	o := &options{forks: 20, format: "text", timeout: 30 * time.Minute}
	fs := flag.NewFlagSet("pgtune "+name, flag.ContinueOnError)
	fs.SetOutput(a.Stderr)
	fs.StringVar(&o.inventory, "i", "", "inventory `file` (default: localhost, local connection)")
	fs.StringVar(&o.inventory, "inventory", "", "inventory `file`")
	fs.BoolVar(&o.verbose, "v", false, "debug logs on stderr")
	if setup != nil {
		setup(fs, o)
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	o.given = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.given[f.Name] = true })
	if len(pos) > maxArgs {
		return nil, fmt.Errorf("pgtune %s: unexpected argument %q", name, pos[maxArgs])
	}
	if len(pos) == 1 {
		o.playbook = pos[0]
	}
	if o.format != "text" && o.format != "json" {
		return nil, fmt.Errorf("pgtune %s: --format must be text or json, not %q", name, o.format)
	}
	if o.forks < 1 {
		return nil, fmt.Errorf("pgtune %s: --forks must be at least 1", name)
	}
	return o, nil
}

func targetFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.limit, "limit", "", "only hosts or groups matching `pattern`")
	fs.StringVar(&o.limit, "l", "", "short for --limit")
	fs.IntVar(&o.forks, "forks", 20, "hosts worked on at once")
	fs.IntVar(&o.forks, "f", 20, "short for --forks")
	fs.StringVar(&o.format, "format", "text", "output `format`: text or json")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up on a host after this long")
}

// logger writes to stderr, usually the operator's terminal: messages and
// values (paths, errors, command output from hosts) are masked and
// escaped on their way (termsafe.Handler).
func (a *App) logger(verbose bool) *slog.Logger {
	level := charmlog.InfoLevel
	if verbose {
		level = charmlog.DebugLevel
	}
	h := charmlog.NewWithOptions(a.Stderr, charmlog.Options{Level: level, ReportTimestamp: true, TimeFormat: time.TimeOnly})
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
	if hosts, err = o.fleet.inShard(hosts); err != nil {
		return nil, nil, err
	}
	return &loaded{inv: inv, book: book, hosts: hosts}, mods, nil
}

func (a *App) runner(o *options, mods map[string]engine.Module) *engine.Runner {
	return &engine.Runner{
		Modules:     mods,
		Forks:       o.forks,
		Dial:        a.Dial,
		Log:         a.logger(o.verbose),
		RunID:       a.newRunID(),
		HostTimeout: o.timeout,
		PlanOnly:    o.planOnly,
	}
}

// newRunID names a run: sortable by time, unique across controllers.
func (a *App) newRunID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return a.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// signalContext cancels on SIGINT/SIGTERM so remote sessions are torn down
// instead of orphaned.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
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
