package oom

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
)

// maxChildren bounds how many of the postmaster's children are read: any
// one tells whether they reset themselves; a few show it is not a fluke.
const maxChildren = 64

// capSysResource is CAP_SYS_RESOURCE's bit in a capability mask.
const capSysResource = 24

// readScript reads, as root, in one round trip: whether systemd is PID 1
// and answers; its own effective capabilities; the postmaster's start time, oom_score_adj, the two
// PG_OOM_ADJUST_* variables of its environment (nothing else of it ever
// leaves the host: it may hold passwords) and the oom_score_adj of up to
// maxChildren of its children; the service unit whose cgroup holds it
// (else, for a stopped cluster, the unit named by $2) with the unit's
// properties; and that unit's pgtune drop-in. Every line is key=value;
// the drop-in follows a "--- dropin" line.
const readScript = `export LC_ALL=C
pid=$1 unit=$2 name=$3 max=$4
sd=0
c1=
read -r c1 2>/dev/null < /proc/1/comm || :
if [ "$c1" = systemd ] && command -v systemctl >/dev/null 2>&1 && systemctl show -p Version --value >/dev/null 2>&1; then sd=1; fi
echo "systemd=$sd"
ce=
while read -r k v rest; do if [ "$k" = CapEff: ]; then ce=$v; break; fi; done < /proc/self/status
echo "capeff=$ce"
if [ -n "$pid" ]; then
  unit=
  if [ -r "/proc/$pid/stat" ]; then
    st=
    read -r st 2>/dev/null < "/proc/$pid/stat" || :
    st=${st##*) }
    set -f
    set -- $st
    set +f
    echo "pm_start=${20:-}"
    a=
    read -r a 2>/dev/null < "/proc/$pid/oom_score_adj" || :
    echo "pm_adj=$a"
    { tr '\0' '\n' < "/proc/$pid/environ" | awk 'n < 4 && /^PG_OOM_ADJUST_(FILE|VALUE)=/ { print "pm_env_" substr($0, 1, 300); n++ }'; } 2>/dev/null
    kids=
    if [ -r "/proc/$pid/task/$pid/children" ]; then read -r kids 2>/dev/null < "/proc/$pid/task/$pid/children" || :
    else
      for d in /proc/[0-9]*; do
        pp=$(sed -n '1s/^.*) //p' "$d/stat" 2>/dev/null | cut -d' ' -f2)
        if [ "$pp" = "$pid" ]; then kids="$kids ${d#/proc/}"; fi
      done
    fi
    n=0
    for c in $kids; do
      case $c in ''|*[!0-9]*) continue;; esac
      a=
      read -r a 2>/dev/null < "/proc/$c/oom_score_adj" || continue
      [ -n "$a" ] || continue
      echo "child=$c $a"
      n=$((n+1))
      if [ "$n" -ge "$max" ]; then break; fi
    done
    cg=
    while IFS= read -r l; do
      case $l in 0::*|*:name=systemd:*) cg=${l#*:}; cg=${cg#*:}; break;; esac
    done 2>/dev/null < "/proc/$pid/cgroup"
    u=${cg##*/}
    case $u in *.service) unit=$u;; esac
  fi
fi
case $unit in *[!A-Za-z0-9@._:-]*|-*) unit=;; esac
if [ "$sd" = 1 ] && [ -n "$unit" ]; then
  echo "unit=$unit"
  systemctl show -p LoadState -p MainPID -p OOMPolicy -p OOMScoreAdjust "$unit" 2>/dev/null | sed -n '1,8s/^/unit_/p'
  f="/etc/systemd/system/$unit.d/$name"
  if [ -f "$f" ] && [ ! -L "$f" ]; then echo "--- dropin"; head -c 65536 -- "$f"; fi
fi
exit 0
`

// child is one child process of the postmaster.
type child struct{ PID, Adj int }

// hostState is what readScript reported.
type hostState struct {
	Systemd bool
	// CanLower: pgtune's shell on the host has CAP_SYS_RESOURCE, without
	// which the kernel refuses to lower an oom_score_adj (containers).
	CanLower bool
	// The postmaster, when a PID was asked.
	Read          bool
	Start         int64
	Adj           int
	EnvFile       string
	EnvFileSet    bool
	EnvValue      string
	EnvValueSet   bool
	Children      []child
	Unit          string
	UnitLoad      string
	UnitMainPID   int
	UnitOOMPolicy string
	UnitScoreAdj  string
	Dropin        []byte
	DropinPresent bool
}

// resets reports whether the postmaster's children reset themselves to
// backendScoreAdj at fork.
func (h *hostState) resets() bool {
	if !h.EnvFileSet || h.EnvFile != adjustFile {
		return false
	}
	if !h.EnvValueSet {
		return backendScoreAdj == 0 // PostgreSQL's default
	}
	n, err := strconv.Atoi(h.EnvValue)
	return err == nil && n == backendScoreAdj
}

// inheriting counts the children whose oom_score_adj is not the reset value.
func (h *hostState) inheriting() int {
	n := 0
	for _, c := range h.Children {
		if c.Adj != backendScoreAdj {
			n++
		}
	}
	return n
}

// readArgs is the command readHost runs.
func readArgs(pid, unit string) []string {
	return []string{"sh", "-c", readScript, "sh", pid, unit, dropinName, strconv.Itoa(maxChildren)}
}

// FactSet declares no facts of the module's own: only the read of a
// running postmaster's OOM state, which the gather runs ahead
// (facts.Set.PostmasterRuns) so that check finds it without a round trip.
// The unit is left empty: for a running postmaster readScript takes the
// unit from its cgroup, and Check asks with the same arguments.
func (*Module) FactSet() facts.Set {
	return facts.Set{Name: Name, PostmasterRuns: [][]string{readArgs(facts.PMPid, "")}}
}

// readHost runs readScript for the postmaster pid (0: none running) and,
// when it is not running, the unit that would run it.
func readHost(ctx context.Context, t *engine.Target, pid int, unit string) (*hostState, error) {
	p := ""
	if pid > 0 {
		p = strconv.Itoa(pid)
	}
	res, err := t.Run(ctx, readArgs(p, unit)...)
	if err != nil {
		return nil, fmt.Errorf("read the OOM state: %w", err)
	}
	return parseHost(string(res.Stdout))
}

var (
	policyPattern   = regexp.MustCompile(`^[a-z]{1,16}$`)
	loadPattern     = regexp.MustCompile(`^[a-z-]{1,32}$`)
	envValuePattern = regexp.MustCompile(`^[\x21-\x7e]{0,256}$`)
)

// parseHost reads readScript's output. Everything in it comes from the
// host: unknown or repeated keys, numbers out of range and names that are
// not names are errors, never guesses.
func parseHost(out string) (*hostState, error) {
	h := &hostState{}
	head, dropin, hasDropin := strings.Cut(out, "--- dropin\n")
	if hasDropin {
		h.Dropin, h.DropinPresent = []byte(dropin), true
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(head, "\n") {
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("read the OOM state: unexpected line %s", strconv.QuoteToASCII(cut(line)))
		}
		if k != "child" {
			if seen[k] {
				return nil, fmt.Errorf("read the OOM state: %s reported twice", strconv.QuoteToASCII(cut(k)))
			}
			seen[k] = true
		}
		if err := h.set(k, v); err != nil {
			return nil, fmt.Errorf("read the OOM state: %w", err)
		}
	}
	if h.Unit == "" && (h.UnitLoad != "" || h.DropinPresent) {
		return nil, fmt.Errorf("read the OOM state: unit properties without a unit")
	}
	return h, nil
}

func (h *hostState) set(k, v string) error {
	var err error
	switch k {
	case "systemd":
		if v != "0" && v != "1" {
			return fmt.Errorf("systemd=%s: not 0 or 1", strconv.QuoteToASCII(cut(v)))
		}
		h.Systemd = v == "1"
	case "capeff":
		caps, perr := strconv.ParseUint(v, 16, 64)
		if perr != nil || len(v) > 16 {
			return fmt.Errorf("CapEff %s: not a capability mask", strconv.QuoteToASCII(cut(v)))
		}
		h.CanLower = caps&(1<<capSysResource) != 0
	case "pm_start":
		h.Read = true
		h.Start, err = facts.ParseInt("postmaster start time", v, 0, 1<<62)
	case "pm_adj":
		h.Read = true
		h.Adj, err = parseAdj("postmaster oom_score_adj", v)
	case "pm_env_PG_OOM_ADJUST_FILE":
		if !envValuePattern.MatchString(v) {
			return fmt.Errorf("the postmaster's PG_OOM_ADJUST_FILE is not a path pgtune accepts")
		}
		h.EnvFile, h.EnvFileSet = v, true
	case "pm_env_PG_OOM_ADJUST_VALUE":
		if !envValuePattern.MatchString(v) {
			return fmt.Errorf("the postmaster's PG_OOM_ADJUST_VALUE is not a value pgtune accepts")
		}
		h.EnvValue, h.EnvValueSet = v, true
	case "child":
		if len(h.Children) >= maxChildren {
			return fmt.Errorf("more than %d children reported", maxChildren)
		}
		ps, as, ok := strings.Cut(v, " ")
		if !ok {
			return fmt.Errorf("child=%s: not a pid and a value", strconv.QuoteToASCII(cut(v)))
		}
		var c child
		var pid int64
		if pid, err = facts.ParseInt("child pid", ps, 1, facts.MaxPID); err != nil {
			return err
		}
		c.PID = int(pid)
		if c.Adj, err = parseAdj("child oom_score_adj", as); err != nil {
			return err
		}
		h.Children = append(h.Children, c)
	case "unit":
		if !unitPattern.MatchString(v) {
			return fmt.Errorf("unit %s: not a service name", strconv.QuoteToASCII(cut(v)))
		}
		h.Unit = v
	case "unit_LoadState":
		if !loadPattern.MatchString(v) {
			return fmt.Errorf("LoadState %s: not a load state", strconv.QuoteToASCII(cut(v)))
		}
		h.UnitLoad = v
	case "unit_MainPID":
		var n int64
		n, err = facts.ParseInt("unit MainPID", v, 0, facts.MaxPID)
		h.UnitMainPID = int(n)
	case "unit_OOMPolicy":
		if !policyPattern.MatchString(v) {
			return fmt.Errorf("OOMPolicy %s: not a policy", strconv.QuoteToASCII(cut(v)))
		}
		h.UnitOOMPolicy = v
	case "unit_OOMScoreAdjust":
		if v != "" {
			if _, err = parseAdj("unit OOMScoreAdjust", v); err == nil {
				h.UnitScoreAdj = v
			}
		}
	default:
		return fmt.Errorf("unexpected key %s", strconv.QuoteToASCII(cut(k)))
	}
	return err
}

// parseAdj reads an oom_score_adj, which the kernel keeps in [-1000, 1000].
func parseAdj(what, v string) (int, error) {
	n, err := facts.ParseInt(what, strings.TrimSpace(v), -1000, 1000)
	return int(n), err
}

// cut shortens host text quoted in errors.
func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// debianUnit is the systemd unit Debian runs the cluster pg under
// (postgresql@15-main.service), or "" for a cluster that is not Debian's.
func debianUnit(pg *facts.Postgres) string {
	if pg.Cluster == "" {
		return ""
	}
	ver := strconv.Itoa(pg.Major)
	if strings.HasPrefix(pg.ConfigFile, "/etc/postgresql/") {
		ver = path.Base(path.Dir(path.Dir(pg.ConfigFile)))
	}
	u := "postgresql@" + ver + "-" + pg.Cluster + ".service"
	if !unitPattern.MatchString(u) {
		return ""
	}
	return u
}
