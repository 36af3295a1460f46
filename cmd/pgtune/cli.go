package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The command line is spf13/cobra over spf13/pflag: GNU-style long flags
// with the short forms Ansible users type (-i, -l, -f, -v), flags before,
// between or after the PLAYBOOK argument, generated help and shell
// completion for bash, zsh and fish. It is the most used Go CLI library
// (kubectl, gh, helm, hugo), maintained, and adds no runtime dependency
// beyond pflag.

const contract = `pgtune puts a fleet of PostgreSQL hosts on a safe memory policy over SSH:
huge pages reserved and verified, shared_buffers sized so the shared memory
segment lands on the pool, strict overcommit. It is not a postgresql.conf
calculator: it plans from each host's real facts, shows the diff, applies
in order, restarts and verifies what the kernel and postmaster did.

Usage:
  pgtune check    [-i INVENTORY] [--limit PATTERN] [--forks N] [--format text|json|junit] [--shard I/N] [PLAYBOOK]
  pgtune apply    [-i INVENTORY] [--limit PATTERN] [--forks N] [--format text|json] [--yes]
                  [--shard I/N] [--serial SIZES] [--max-fail-percentage P] [--any-errors-fatal]
                  [--pause-between-batches D] [--confirm-each-batch] [--resume[=RUN]] [PLAYBOOK]
  pgtune rollback [-i INVENTORY] [--limit PATTERN] [--forks N] [--format text|json] [--yes] [--run ID]
  pgtune facts    [-i INVENTORY] [--limit PATTERN] [--format text|json]
  pgtune explain  [-i INVENTORY] [--limit PATTERN] [PLAYBOOK]
  pgtune validate [-i INVENTORY] [PLAYBOOK]
  pgtune inventory list [-i INVENTORY] [--host HOST] [--format text|json]
  pgtune report merge [--format json|text|junit] FILE...
  pgtune version
  pgtune completion bash|zsh|fish

check, apply, rollback, facts and explain also take -k/--ask-pass (SSH login
password) and -K/--ask-become-pass (sudo password), read from the terminal
without echo; inventory vars ansible_password / ansible_become_password win.

Without -i the inventory is ansible.cfg's, else localhost over the local
connection (-i also takes a directory or a host list "db1,db2,"); without
PLAYBOOK the built-in policy (playbooks/memory.yml) is used.

Exit codes: check exits 0 when every host is in policy, 2 on drift, 1 on
any error; apply exits 0 when every host is ok and verified, 1 otherwise.
`

// usage is what a bare "pgtune" prints on stderr.
var usage = contract + "\nRun 'pgtune COMMAND --help' for a command's flags and examples.\n"

// commandSpec describes one planning command.
type commandSpec struct {
	name, short, long, example string
	maxArgs                    int  // positional PLAYBOOK arguments taken
	connects                   bool // reaches hosts: takes -k and -K
	flags                      func(*pflag.FlagSet, *options)
	run                        func(*options) int
}

// Run executes one command line and returns the exit code.
func (a *App) Run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(a.Stderr, usage)
		return 1
	}
	if err := refuseAnsibleFlags(args[1:]); err != nil {
		return a.fail(err)
	}
	if args[0] == "apply" {
		args = resumeArgs(args)
	}
	code := 0
	root := a.rootCommand(&code)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		return a.usageError(err)
	}
	return code
}

func (a *App) rootCommand(code *int) *cobra.Command {
	root := &cobra.Command{
		Use:           "pgtune",
		Short:         "Put PostgreSQL hosts on a safe memory policy",
		Long:          contract,
		Version:       versionLine(),
		SilenceErrors: true,
		SilenceUsage:  true,
		// No RunE: a bare "pgtune" is handled in Run; an unknown word is
		// cobra's "unknown command" error.
	}
	root.SetOut(a.Stdout)
	root.SetErr(a.Stderr)
	root.SetVersionTemplate("pgtune {{.Version}}\n")
	// -v is verbose before the command word too, as Ansible users type
	// it ("pgtune -v check"): left to cobra, a root -v would be --version,
	// print it and exit 0 with nothing checked. Each command's own -v
	// (commonFlags) takes the count: cobra finds the command, then parses
	// the whole line with the command's flags. The version is --version.
	root.PersistentFlags().CountP("verbose", "v", "debug logs on stderr (also after the command)")
	root.SetFlagErrorFunc(flagError)
	root.CompletionOptions.HiddenDefaultCmd = false
	for _, spec := range a.commandSpecs() {
		root.AddCommand(a.planningCommand(spec, code))
	}
	root.AddCommand(a.inventoryCommand(code), a.reportCommand(code), a.versionCommand())
	return root
}

// planningCommand turns a spec into a cobra command whose flags fill a
// fresh options value, validated by complete before the command runs.
func (a *App) planningCommand(spec commandSpec, code *int) *cobra.Command {
	o := newOptions()
	use := spec.name + " [flags]"
	if spec.maxArgs > 0 {
		use += " [PLAYBOOK]"
	}
	cmd := &cobra.Command{
		Use:     use,
		Short:   spec.short,
		Long:    spec.long,
		Example: spec.example,
		Args:    cobra.ArbitraryArgs, // complete says which are too many
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.complete("pgtune "+spec.name, cmd.Flags(), args, spec.maxArgs); err != nil {
				return err
			}
			*code = spec.run(o)
			return nil
		},
	}
	if spec.maxArgs > 0 {
		cmd.ValidArgsFunction = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return []string{"yml", "yaml"}, cobra.ShellCompDirectiveFilterFileExt
		}
	}
	fs := cmd.Flags()
	commonFlags(fs, o)
	if spec.flags != nil {
		spec.flags(fs, o)
	}
	if spec.connects {
		passwordFlagsOn(fs, &a.passwords)
	}
	registerCompletions(cmd)
	return cmd
}

// registerCompletions offers the closed value sets of flags.
func registerCompletions(cmd *cobra.Command) {
	fixed := func(values ...string) cobra.CompletionFunc {
		return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return values, cobra.ShellCompDirectiveNoFileComp
		}
	}
	if f := cmd.Flags().Lookup("format"); f != nil {
		formats := []string{"text", "json"}
		if strings.Contains(f.Usage, "junit") {
			formats = append(formats, "junit")
		}
		_ = cmd.RegisterFlagCompletionFunc("format", fixed(formats...))
	}
	if cmd.Flags().Lookup("inventory") != nil {
		_ = cmd.MarkFlagFilename("inventory", "yml", "yaml", "ini", "cfg")
	}
}

// options are the flags the commands share.
type options struct {
	inventory string
	limit     string
	forks     int
	format    string
	yes       bool
	verbose   int // -v debug logs, -vvv also how each host is reached
	noColor   bool
	diff      bool // show file diffs in plans (--no-diff hides them)
	timeout   time.Duration
	runID     string
	playbook  string
	planOnly  bool            // check: no apply follows the plan
	given     map[string]bool // flags given on the command line
	formats   []string        // the --format values this command takes
	extraVars []string        // -e KEY=VALUE
	fleet     fleetOptions    // rollout, resume and shard flags (fleet.go)
}

func newOptions() *options {
	return &options{forks: 20, format: "text", timeout: 30 * time.Minute, diff: true, formats: []string{"text", "json"}}
}

// parse reads flags and at most maxArgs positional arguments, which may
// stand before, between or after the flags.
func (a *App) parse(name string, args []string, maxArgs int, setup func(*pflag.FlagSet, *options)) (*options, error) {
	o := newOptions()
	fs := pflag.NewFlagSet("pgtune "+name, pflag.ContinueOnError)
	fs.SetOutput(a.Stderr)
	commonFlags(fs, o)
	if setup != nil {
		setup(fs, o)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return o, o.complete("pgtune "+name, fs, fs.Args(), maxArgs)
}

// complete records which flags were given, takes the PLAYBOOK argument and
// checks the values no flag type checks.
func (o *options) complete(name string, fs *pflag.FlagSet, pos []string, maxArgs int) error {
	o.given = map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { o.given[f.Name] = true })
	if fs.Changed("no-diff") {
		o.diff = false
	}
	if len(pos) > maxArgs {
		return fmt.Errorf("%s: unexpected argument %q", name, pos[maxArgs])
	}
	if len(pos) == 1 {
		o.playbook = pos[0]
	}
	valid := false
	for _, f := range o.formats {
		valid = valid || o.format == f
	}
	if !valid && len(o.formats) == 1 {
		return fmt.Errorf("%s: --format must be %s, not %q: it prints %s only", name, o.formats[0], o.format, o.formats[0])
	}
	if !valid {
		msg := "text or json"
		if len(o.formats) > 2 {
			msg += " (or " + strings.Join(o.formats[2:], ", ") + ")"
		}
		return fmt.Errorf("%s: --format must be %s, not %q", name, msg, o.format)
	}
	if o.forks < 1 {
		return fmt.Errorf("%s: --forks must be at least 1", name)
	}
	if o.timeout < 0 {
		return fmt.Errorf("%s: --timeout must not be negative (0: no time limit)", name)
	}
	if file, ok := strings.CutPrefix(o.limit, "@"); ok {
		limit, err := limitFromFile(file)
		if err != nil {
			return fmt.Errorf("%s: --limit @%s: %w", name, file, err)
		}
		o.limit = limit
	}
	return nil
}

// limitFromFile reads Ansible's --limit @FILE: one host or pattern a line
// (a .retry file), blank lines and # comments skipped.
func limitFromFile(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	var pats []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			pats = append(pats, l)
		}
	}
	if len(pats) == 0 {
		return "", fmt.Errorf("no host named in it")
	}
	return strings.Join(pats, ","), nil
}

// commonFlags are on every command that reads an inventory.
func commonFlags(fs *pflag.FlagSet, o *options) {
	fs.StringVarP(&o.inventory, "inventory", "i", "", "inventory `file`, directory or host list \"db1,db2,\" (default: ansible.cfg's, else localhost over the local connection)")
	fs.CountVarP(&o.verbose, "verbose", "v", "debug logs on stderr; -vvv also shows how each host is reached (user, port, key, jump host, host keys)")
	fs.BoolVar(&o.noColor, "no-color", false, "no colour, even on a terminal (NO_COLOR does the same)")
}

func targetFlags(fs *pflag.FlagSet, o *options) {
	fs.StringVarP(&o.limit, "limit", "l", "", "only hosts or groups matching `pattern` (Ansible's syntax: db*,!db3,&prod; @FILE: the hosts listed in FILE, one a line)")
	fs.IntVarP(&o.forks, "forks", "f", 20, "hosts worked on at once")
	fs.StringVar(&o.format, "format", "text", "output `format`: text or json")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up on a host after this long (e.g. 90s, 10m; 0: never)")
	extraVarsFlag(fs, o)
}

// planFlags are the flags of commands that show a plan.
func planFlags(fs *pflag.FlagSet, o *options) {
	targetFlags(fs, o)
	fs.BoolVar(&o.diff, "diff", true, "show the diff of every file a plan changes")
	fs.Bool("no-diff", false, "show changed files by name only")
}

// flagError is the one message a bad flag gets; usage is not repeated
// (--help shows it).
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		// The wording the go flag package always printed, which scripts
		// and the acceptance tests match.
		msg = "flag provided but not defined: -" + name
	}
	return fmt.Errorf("%s: %s (see '%s --help')", cmd.CommandPath(), msg, cmd.CommandPath())
}

// usageError reports a command-line mistake, once.
func (a *App) usageError(err error) int {
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "unknown command") {
		msg = "pgtune: " + msg + " (see 'pgtune --help')"
	}
	fmt.Fprintf(a.Stderr, "%s\n", safeText(msg))
	return 1
}
