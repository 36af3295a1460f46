package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// commandSpecs are the commands of DESIGN.md's CLI contract, each with
// the description and examples --help shows.
func (a *App) commandSpecs() []commandSpec {
	return []commandSpec{{
		name:     "check",
		connects: true,
		short:    "Plan every host against the policy; change nothing",
		long: `check connects to every host, gathers its facts and plans what the policy
(PLAYBOOK, default: the built-in playbooks/memory.yml) would change. It changes
nothing on any host. Each host's result is printed as soon as it is known.

Exit codes: 0 every host in policy, 2 drift on at least one host (and no
errors), 1 any error, failed or unreachable host.`,
		example: `  pgtune check                                  # this machine, built-in policy
  pgtune check -i inventory.yml                 # every host, built-in policy
  pgtune check -i inventory.yml -l 'db*' site.yml   # PLAYBOOK site.yml, hosts db*
  pgtune check -i inventory.yml --format junit > audit.xml   # CI: drift fails the job`,
		maxArgs: 1,
		flags: func(fs *pflag.FlagSet, o *options) {
			planFlags(fs, o)
			shardFlag(fs, o)
			o.formats = append(o.formats, "junit")
			fs.Lookup("format").Usage = "output `format`: text, json, or junit (CI test report)"
		},
		run: a.runCheck,
	}, {
		name:     "apply",
		connects: true,
		short:    "Plan, show the plan, ask, apply in order and verify",
		long: `apply plans like check, shows the plan, asks on a terminal (--yes skips the
question; without a terminal it refuses unless --yes), then applies each
host's changes in dependency order (hugepages → pgconf → overcommit),
restarting PostgreSQL where needed, and verifies what the kernel and the
postmaster did. PLAYBOOK defaults to the built-in policy.

A fleet goes in batches (the playbook's serial, or --serial): each batch is
planned, shown, applied and verified before the next; a failure budget
(--max-fail-percentage, --any-errors-fatal) stops the rollout. The run's
state is kept on this machine: Ctrl-C lets every host finish the step in
flight and exits 130; --resume continues the run where it stopped.

Exit codes: 0 every host ok (changed or not) and verified, 1 otherwise,
130 interrupted.`,
		example: `  pgtune apply -i inventory.yml -l db01            # a canary first
  pgtune apply -i inventory.yml -f 4 --yes site.yml   # the rest, 4 at a time, PLAYBOOK site.yml
  pgtune apply -i inventory.yml --serial 1,10%,100% --max-fail-percentage 5
  pgtune apply --resume                             # continue the last interrupted run`,
		maxArgs: 1,
		flags: func(fs *pflag.FlagSet, o *options) {
			planFlags(fs, o)
			yesFlag(fs, o)
			shardFlag(fs, o)
			rolloutFlags(fs, o)
		},
		run: a.runApply,
	}, {
		name:     "rollback",
		connects: true,
		short:    "Put hosts back as they were before pgtune changed them",
		long: `rollback restores, from the journals and backups pgtune keeps on each host,
the state before pgtune's first run (or before --run ID), through the same
plan → confirm → apply → verify flow as apply. It takes no PLAYBOOK: what to
undo is read from the hosts.`,
		example: `  pgtune rollback -i inventory.yml -l db01
  pgtune rollback -i inventory.yml --run 20261130T190000Z-a1b2c3 --yes`,
		flags: func(fs *pflag.FlagSet, o *options) {
			planFlags(fs, o)
			yesFlag(fs, o)
			fs.StringVar(&o.runID, "run", "", "go back to the state before this run `ID` (default: before pgtune's first run)")
		},
		run: a.runRollback,
	}, {
		name:     "facts",
		connects: true,
		short:    "Show what pgtune reads from each host",
		long: `facts gathers and prints each host's facts (memory, huge pages, commit limit,
sysctl values and files, the PostgreSQL cluster found). It changes nothing.
The PLAYBOOK's expressions see these as facts.NAME.`,
		example: `  pgtune facts
  pgtune facts -i inventory.yml -l db01 --format json`,
		flags: targetFlags,
		run:   a.runFacts,
	}, {
		name:     "explain",
		connects: true,
		short:    "Show every planned value with its formula and this host's numbers",
		long: `explain plans like check (changing nothing) and prints, per host and module,
every policy value of PLAYBOOK (default: the built-in policy): its formula as
written and where, the formula with the host's numbers substituted, the
result, and the module's own arithmetic (pages from the pool, the commit
limit from ratio and headroom), so a reviewer can check it by hand.`,
		example: `  pgtune explain
  pgtune explain -i inventory.yml -l db01 site.yml`,
		maxArgs: 1,
		flags: func(fs *pflag.FlagSet, o *options) {
			// Text only: its JSON would be a second, unversioned report
			// (check --format json has the plan); --format json printed
			// text and exited 0.
			targetFlags(fs, o)
			o.formats = []string{"text"}
			_ = fs.MarkHidden("format")
		},
		run: a.runExplain,
	}, {
		name:  "validate",
		short: "Check an inventory and PLAYBOOK without contacting any host",
		long: `validate loads the inventory and PLAYBOOK (default: the built-in policy),
resolves every play's hosts and checks every module's params (types,
bounds, the names expressions use), touching no host: a pre-commit check
for policy repositories.`,
		example: `  pgtune validate site.yml
  pgtune validate -i inventory.yml site.yml`,
		maxArgs: 1,
		flags:   extraVarsFlag,
		run:     a.runValidate,
	}}
}

func yesFlag(fs *pflag.FlagSet, o *options) {
	fs.BoolVarP(&o.yes, "yes", "y", false, "change hosts without asking")
}

// inventoryCommand is "pgtune inventory list".
func (a *App) inventoryCommand(code *int) *cobra.Command {
	inv := &cobra.Command{
		Use:   "inventory list",
		Short: "Show hosts as pgtune resolves them",
		Long:  inventoryUsage,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprint(a.Stderr, inventoryUsage)
			*code = 1
			return nil
		},
	}
	o := newOptions()
	var host, pbDir string
	list := &cobra.Command{
		Use:   "list",
		Short: "List hosts with their groups, connection and vars, secrets masked",
		Long:  inventoryUsage,
		Example: `  pgtune inventory list -i inventory.yml
  pgtune inventory list -i inventory.yml --host db01 --format json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.complete("pgtune inventory list", cmd.Flags(), args, 0); err != nil {
				return err
			}
			*code = a.runInventoryList(o, host, pbDir)
			return nil
		},
	}
	fs := list.Flags()
	commonFlags(fs, o)
	fs.StringVar(&host, "host", "", "only this `host`")
	fs.StringVarP(&o.limit, "limit", "l", "", "only hosts or groups matching `pattern`")
	fs.StringVar(&pbDir, "playbook-dir", "", "also read group_vars/ and host_vars/ in `dir`")
	fs.StringVar(&o.format, "format", "text", "output `format`: text or json")
	registerCompletions(list)
	inv.AddCommand(list)
	return inv
}

func (a *App) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print pgtune's version and the revision it was built from",
		Example: "  pgtune version\n  pgtune --version",
		Args:    cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			fmt.Fprintln(a.Stdout, "pgtune "+versionLine())
		},
	}
}

// versionLine is the module version and VCS revision from the build info
// the Go toolchain embeds ("(devel)" and no revision for a plain go build
// with -buildvcs=false).
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: no build info)"
	}
	version := bi.Main.Version
	if version == "" {
		version = "(devel)"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	line := version
	if rev := settings["vcs.revision"]; rev != "" {
		line += ", revision " + rev
		if settings["vcs.modified"] == "true" {
			line += " (modified)"
		}
		if t := settings["vcs.time"]; t != "" {
			line += ", committed " + t
		}
	} else {
		line += ", revision unknown (built without VCS information)"
	}
	return line + ", " + bi.GoVersion
}
