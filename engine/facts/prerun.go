package facts

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/pgtune/pgtune/engine/transport"
)

// Commands run ahead. A check asks a host's running postmaster a few
// read-only questions right after discovery: its replication topology
// (as the cluster owner) and whatever a module declares
// (Set.PostmasterRuns: a read, as root, of the postmaster's process
// state, say). Each
// was a session of its own: on the host an sshd channel, a login shell
// and a sudo. GatherHost runs them at the end of its own round trip
// instead, for the one postmaster discovery found running alone, with its
// pid, owner, binaries, socket and configuration put in place of the
// placeholders below, and keeps each answer under the exact command it
// ran (Ran). A later Run of that very command (same arguments, same
// privileges, no stdin) takes the answer once instead of running it;
// anything else runs as before. So a wrong guess on the host (a
// configuration file the controller then chooses differently) costs a
// run, never a wrong answer.
//
// Order keeps the owner's code last: every run as root comes first, and
// a process the owner leaves behind can only write after the answers that
// do not come from it. Each run gets /dev/null for stdin and stderr, and
// is framed by the discovery's nonce (see discoverTail):
//
//	NONCE args I      its arguments, each ended by a NUL
//	NONCE out I       its standard output
//	NONCE status I S  its exit status
//
// Only status 0 is kept: a failed run is run again where it is asked,
// for its error.

// Placeholders in a pre-run's arguments. A module's run as root
// (Set.PostmasterRuns) may use PMPid and PMOwner, each a whole argument:
// values the discovery checked (a number, a name from /etc/passwd). The
// others are the owner's own text (postmaster.pid's lines, directories
// the owner may have chosen): only in runs as the owner (Set.OwnerRuns,
// the engine's topology query), where they may also be part of an
// argument ("f:{pg.data}/postmaster.opts"); never passed to a command run
// as root.
const (
	PMPid   = "{pg.pid}"   // the postmaster's pid
	PMOwner = "{pg.owner}" // the cluster owner's name
	// For runs as the owner only.
	PMData      = "{pg.data}"    // the data directory, as Postgres.DataDir names it
	PMConfig    = "{pg.config}"  // postgresql.conf; a run naming it is left out when the script cannot tell it
	PMConfigDir = "{pg.confdir}" // PMConfig's directory (its text up to the last slash)
	pmBin       = "{pg.bin}"     // the binaries' directory
	pmSocket    = "{pg.socket}"  // the socket directory, from postmaster.pid
	pmPort      = "{pg.port}"    // the port, from postmaster.pid
)

// placeholderWord is the discovery script's expansion of each
// placeholder, quoted: part of one shell word.
var placeholderWord = map[string]string{
	PMPid: `"$lp_pid"`, PMOwner: `"$lp_owner"`, PMData: `"$lp_data"`, PMConfig: `"$lp_conf"`,
	PMConfigDir: `"${lp_conf%/*}"`, pmBin: `"$lp_bin"`, pmSocket: `"$lp_sock"`, pmPort: `"$lp_port"`,
}

var placeholderRE = regexp.MustCompile(`\{pg\.[a-z]+\}`)

// checkPreRun refuses a module's run as root (Set.PostmasterRuns) the
// gather could not run as written or must not run as root: a program
// that is not an absolute path of the controller's (a placeholder, or a
// name the discovery script's functions could answer), a placeholder
// other than PMPid and PMOwner, or one that is not a whole argument.
func checkPreRun(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("an empty command")
	}
	if !strings.HasPrefix(args[0], "/") && args[0] != "sh" {
		return fmt.Errorf("program %q: not an absolute path (or sh)", args[0])
	}
	for i, a := range args {
		for _, loc := range placeholderRE.FindAllStringIndex(a, -1) {
			p := a[loc[0]:loc[1]]
			switch {
			case p != PMPid && p != PMOwner:
				return fmt.Errorf("placeholder %s: a module's run may use only %s and %s", p, PMPid, PMOwner)
			case i == 0:
				return fmt.Errorf("placeholder %s as the program", p)
			case p != a:
				return fmt.Errorf("placeholder %s inside argument %q", p, a)
			}
		}
	}
	return nil
}

// OwnerRun is a read-only script a module's check runs as the cluster
// owner, with OwnerRunArgs: the gather runs it ahead (Set.OwnerRuns).
type OwnerRun struct {
	Script string   // fixed text, run by sh -c
	Args   []string // its arguments, with placeholders
}

// OwnerRunArgs is the command that runs script as the cluster owner with
// args (ownerRunScript: nothing found on the host runs as root). A
// module's check runs its OwnerRuns through it, so that the gather's
// answer is taken.
func OwnerRunArgs(owner, script string, args ...string) []string {
	return append([]string{"sh", "-c", ownerRunScript, "sh", owner, script}, args...)
}

// checkOwnerRun refuses an owner run with no script or a placeholder the
// gather does not know.
func checkOwnerRun(r OwnerRun) error {
	if r.Script == "" {
		return fmt.Errorf("an empty script")
	}
	for _, a := range r.Args {
		for _, p := range placeholderRE.FindAllString(a, -1) {
			if placeholderWord[p] == "" {
				return fmt.Errorf("placeholder %s: not one the gather knows", p)
			}
		}
	}
	return nil
}

// shellWord is argument a as one shell word, each placeholder in it the
// discovery's value.
func shellWord(a string) string {
	var b strings.Builder
	last := 0
	for _, loc := range placeholderRE.FindAllStringIndex(a, -1) {
		if w := placeholderWord[a[loc[0]:loc[1]]]; w != "" {
			if loc[0] > last {
				b.WriteString(shellQuote(a[last:loc[0]]))
			}
			b.WriteString(w)
			last = loc[1]
		}
	}
	if last < len(a) || last == 0 {
		b.WriteString(shellQuote(a[last:]))
	}
	return b.String()
}

// namesConfig says whether a run names the configuration file (or its
// directory): the script's guess, so the run is asked only where the
// script can tell the file as the controller will (preRunRequest).
func namesConfig(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool {
		return strings.Contains(a, PMConfig) || strings.Contains(a, PMConfigDir)
	})
}

// preRunScript is the shell code that runs the pre-runs (runs, in order),
// evaluated at the end of the discovery script for a lone postmaster: of
// those, the ones whose index the request lists ($pq: "post I J ...",
// preRunRequest), so the script is the same whichever modules a play
// runs. A run naming a value the script does not have is left out.
func preRunScript(runs [][]string) string {
	var b strings.Builder
	b.WriteString(`pr() {
  pr_i=$1
  case " $pq " in *" $pr_i "*) ;; *) return 0;; esac
  shift
  printf '\n%s args %s\n' "$dn" "$pr_i"
  printf '%s\0' "$@"
  printf '\n%s out %s\n' "$dn" "$pr_i"
  ( exec "$@" ) </dev/null 2>/dev/null
  printf '\n%s status %s %s\n' "$dn" "$pr_i" "$?"
}
`)
	for i, args := range runs {
		words := make([]string, len(args))
		for j, a := range args {
			words[j] = shellWord(a)
		}
		line := "pr " + strconv.Itoa(i) + " " + strings.Join(words, " ")
		var need []string
		if namesConfig(args) {
			need = append(need, `[ -n "$lp_conf" ]`)
		}
		if slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, PMData) }) {
			need = append(need, `[ -n "$lp_data" ]`)
		}
		if len(need) > 0 {
			line = "if " + strings.Join(need, " && ") + "; then " + line + "; fi"
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// preRunsOf is every pre-run of the gather: the sets' runs as root
// first (where the gather is), then their runs as the owner, the topology
// query (as the owner) last; owners has each one's set name ("" for the
// topology).
func preRunsOf(sets []Set) (runs [][]string, owners []string) {
	for _, s := range sets {
		for _, r := range s.PostmasterRuns {
			runs, owners = append(runs, r), append(owners, s.Name)
		}
	}
	for _, s := range sets {
		for _, r := range s.OwnerRuns {
			runs, owners = append(runs, OwnerRunArgs(PMOwner, r.Script, r.Args...)), append(owners, s.Name)
		}
	}
	runs = append(runs, topologyArgs(PMOwner, pmBin+"/psql", pmSocket, pmPort, PMPid, PMConfig))
	return runs, append(owners, "")
}

// preRunRequest is the request's line that asks for the pre-runs of the
// sets named in ask, and the topology's: "post I J ...". Runs as the
// owner (the sets' OwnerRuns, the topology query) are asked only with
// owner: where the script can tell the configuration file as the
// controller will (the inventory does not name it), and not when the
// gather runs again because the owner's output failed it.
func preRunRequest(sets []Set, ask []string, owner bool) string {
	_, owners := preRunsOf(sets)
	root := 0
	for _, s := range sets {
		root += len(s.PostmasterRuns)
	}
	line := "post"
	for i, o := range owners {
		if (o == "" || slices.Contains(ask, o)) && (owner || i < root) {
			line += " " + strconv.Itoa(i)
		}
	}
	return line
}

// Ran is what the gather ran ahead, by exact command: each answer is
// taken once. A nil Ran holds nothing.
type Ran struct {
	mu      sync.Mutex
	results map[string]transport.Result
}

func ranKey(args []string, become bool) string {
	return strconv.FormatBool(become) + "\x00" + strings.Join(args, "\x00")
}

// Keep records res as the answer to args run with become: for tools and
// tests that build facts by hand (GatherHost fills its own).
func (r *Ran) Keep(args []string, become bool, res transport.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.results == nil {
		r.results = map[string]transport.Result{}
	}
	r.results[ranKey(args, become)] = res
}

// Take returns the answer kept for cmd and forgets it; ok is false when
// there is none (or cmd has stdin: nothing run ahead had any).
func (r *Ran) Take(cmd transport.Command) (res transport.Result, ok bool) {
	if r == nil || len(cmd.Stdin) > 0 {
		return transport.Result{}, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := ranKey(cmd.Args, cmd.Become)
	res, ok = r.results[k]
	delete(r.results, k)
	return res, ok
}

// Len is how many answers are kept.
func (r *Ran) Len() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.results)
}

// Transport answers Run from r where it can, else through t.
func (r *Ran) Transport(t transport.Transport) transport.Transport {
	if r == nil {
		return t
	}
	return ranTransport{t, r}
}

type ranTransport struct {
	transport.Transport
	ran *Ran
}

func (t ranTransport) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	if res, ok := t.ran.Take(cmd); ok {
		return res, nil
	}
	return t.Transport.Run(ctx, cmd)
}

// parsePreRuns reads the frames between the discovery's records and its
// last line (parts: the output split at "\nNONCE "). Anything malformed
// (which only a process left behind by a run can cause, writing without
// the nonce) drops every answer: each command then runs where it is asked.
func parsePreRuns(parts [][]byte, become bool) *Ran {
	if len(parts) == 0 || len(parts)%3 != 0 {
		return nil
	}
	r := &Ran{}
	for k := 0; k < len(parts); k += 3 {
		ah, args, ok1 := bytes.Cut(parts[k], []byte("\n"))
		oh, out, ok2 := bytes.Cut(parts[k+1], []byte("\n"))
		st := string(parts[k+2])
		if !ok1 || !ok2 || !strings.HasPrefix(string(ah), "args ") || !strings.HasSuffix(st, "\n") {
			return nil
		}
		i := strings.TrimPrefix(string(ah), "args ")
		if _, err := strconv.Atoi(i); err != nil || string(oh) != "out "+i || !strings.HasPrefix(st, "status "+i+" ") {
			return nil
		}
		status := strings.TrimSuffix(strings.TrimPrefix(st, "status "+i+" "), "\n")
		if _, err := strconv.Atoi(status); err != nil {
			return nil
		}
		if len(args) == 0 || args[len(args)-1] != 0 {
			return nil
		}
		if status != "0" {
			continue
		}
		argv := strings.Split(string(args[:len(args)-1]), "\x00")
		r.Keep(argv, become, transport.Result{Stdout: bytes.Clone(out)})
	}
	return r
}
