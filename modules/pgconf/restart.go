package pgconf

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/transport"
)

// restartScript restarts the cluster and waits until it accepts
// connections, in one round trip. The method, in order: the inventory's
// pg_restart (a command line, run by sh -c as root); for a Debian cluster
// under systemd, its unit postgresql@V-C (when it is pinned to this
// cluster: see the script); pg_ctlcluster V C restart as the owner;
// pg_ctl restart as the data directory's owner (which reuses
// postmaster.opts, so port and options stay).
//
// The server's log is where the running postmaster's stderr goes (pg_ctl
// -l, pg_ctlcluster's log; only when the PID in postmaster.pid is a
// postgres or postmaster process of the cluster owner, the same before
// and after the readlink), else Debian's log, else a file in the data
// directory; the script reports its size before the restart and, on
// failure, prints what was added since, so the caller can quote the FATAL
// line. Output lines: method=, log=, old_pid=, rc=, ready=, new_pid=, then
// "--- log" and the log tail.
// restartFiles makes the files of restartScript: pg_ctl's output and the
// detached part's report, named for pgtune, gone on the way out. A
// controller killed mid-restart leaves the script waiting for the
// detached part, and its first write after that meets a closed
// connection: SIGPIPE, trapped so the EXIT trap runs. Other signals stay
// fatal at once (a trapped TERM would wait for the restart, holding up a
// cancel). Once the detached part is started ($detached), only it removes
// them (restartInner): it writes $out by name, and a shell that runs the
// EXIT trap on TERM too (bash as sh) would free that name in /tmp, for
// anyone to plant a file root then writes through.
//
// The inventory's pg_restart (it may hold a password) reaches the host on
// stdin and the detached part in $cmdf, a file of root's alone: an
// argument would sit in /proc/PID/cmdline, sudo's included, for anyone
// on the host to read while the restart runs.
const restartFiles = `res= cmdf= detached= finished=
out=$(mktemp "${TMPDIR:-/tmp}/pgtune-restart.XXXXXX") || exit 1
trap 'if [ -z "$detached" ] || [ -n "$finished" ]; then rm -f -- "$out" ${res:+"$res"} ${cmdf:+"$cmdf"}; fi' EXIT
trap 'exit 1' PIPE
res=$(mktemp "${TMPDIR:-/tmp}/pgtune-restart.XXXXXX") || exit 1
if [ -n "$custom" ]; then
  cmdf=$(mktemp "${TMPDIR:-/tmp}/pgtune-restart.XXXXXX") || exit 1
  printf '%s\n' "$custom" > "$cmdf" || exit 1
fi
`

var restartScript = `export LC_ALL=C
custom= data=$2 bin=$3 owner=$4 ver=$5 cluster=$6 sock=$7 port=$8 timeout=$9 action=${10} marker=${11} runid=${12} inner=${13}
trusted_dir=
nl='
'
# $1 = 1: the pg_restart command is on stdin.
if [ "$1" = 1 ]; then custom=$(cat); fi
` + facts.RunBinFn + asOwnerBody + `cd /
pid=
# postmaster.pid is the owner's file: read as the owner, so a link put in
# its place shows root nothing (not even a number).
if [ -f "$data/postmaster.pid" ]; then pid=$(as_owner head -n 1 -- "$data/postmaster.pid" 2>/dev/null) || pid=; fi
case $pid in *[!0-9]*) pid=;; esac
# Its stderr is the server's log only if it is the owner's postgres: the
# number is the owner's to write, and must not make root name the file
# any other process writes to (checked again after the readlink, in case
# the process ended and its PID was taken meanwhile).
log= running=
own_postgres() {
  case $(cat "/proc/$1/comm" 2>/dev/null) in postgres|postmaster) ;; *) return 1;; esac
  ids=$(sed -n 's/^Uid:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null | tr -s ' \t' '  ')
  [ -n "$ouid" ] && [ "$ids" = "$ouid $ouid $ouid $ouid" ]
}
if [ -n "$pid" ] && [ -d "/proc/$pid" ]; then
  ouid=$(id -u "$owner" 2>/dev/null) || ouid=
  l=
  # The same process before and after the readlink: its start time (field
  # 22 of stat, after the parenthesised comm) does not change with it.
  st=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f20) || st=
  if own_postgres "$pid"; then l=$(readlink "/proc/$pid/fd/2" 2>/dev/null) || l=; fi
  st2=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f20) || st2=
  # A line break in the name would let the owner's file name forge the
  # report's lines (rc=, ready=) that follow log=.
  case $l in *"$nl"*) l=;; esac
  if [ -n "$st" ] && [ "$st" = "$st2" ] && own_postgres "$pid"; then
    running=$pid
    case $l in /*) if [ -f "$l" ]; then log=$l; fi;; esac
  fi
fi
if [ -z "$log" ] && [ -n "$cluster" ] && [ -f "/var/log/postgresql/postgresql-$ver-$cluster.log" ]; then
  log=/var/log/postgresql/postgresql-$ver-$cluster.log
fi
if [ -z "$log" ]; then
  log=$data/pgtune-startup.log
  # Nothing the owner runs writes to our stdout, the report.
  as_owner touch -- "$log" </dev/null >/dev/null 2>&1
fi
off=$(stat -c %s -- "$log" 2>/dev/null) || off=0
# Debian's names (the unit postgresql@V-C, pg_ctlcluster V C) come from
# the postmaster's command line, its config file: the owner's to choose,
# and they could name another user's cluster. Root uses them only as far
# as they are pinned to this cluster:
#   - an active unit is restarted only when its main process is this
#     cluster's postmaster ($running: the owner's postgres that
#     postmaster.pid names), so stopping its processes stops ours;
#   - an inactive unit (systemd starts it, as pg_ctlcluster would have
#     asked it to) only when this server is down, and root's pg_lsclusters
#     lists V/C with this data directory, the owner's: a start stops
#     nothing, and starts no other user's cluster;
#   - otherwise pg_ctlcluster runs as the owner, with the owner's rights
#     alone (a server running outside systemd, a host without it).
# deb_listed prints debian_data=, the data directory pg_lsclusters lists
# for V/C ("" when none, or pg_lsclusters is not root's alone), and
# succeeds when it is this one.
deb_listed() {
  dm_d=
  if dm_l=$(command -v pg_lsclusters 2>/dev/null) && dm_l=$(bin_trusted "$dm_l"); then
    dm_d=$("$dm_l" -h "$ver" "$cluster" 2>/dev/null </dev/null | while read -r dm_v dm_c _ _ _ dm_rest; do
      # Its own line: the data directory, then the log file.
      if [ "$dm_v" = "$ver" ] && [ "$dm_c" = "$cluster" ]; then printf '%s' "${dm_rest% *}"; break; fi
    done) || dm_d=
  fi
  echo "debian_data=$dm_d"
  [ -n "$dm_d" ] || return 1
  dm_a=$(readlink -f -- "$dm_d" 2>/dev/null) || return 1
  dm_b=$(readlink -f -- "$data" 2>/dev/null) || return 1
  [ -n "$dm_a" ] && [ "$dm_a" = "$dm_b" ] || return 1
  # And the owner's: $data may be the owner's link to another user's
  # stopped cluster, which a start would bring back.
  dm_u=$(stat -c %u -- "$dm_a" 2>/dev/null) || return 1
  [ "$dm_u" = "$(id -u -- "$owner" 2>/dev/null)" ]
}
refused=
if [ "$action" = status ]; then method=status
elif [ -n "$custom" ]; then method=pg_restart
elif [ -n "$cluster" ] && [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ] && command -v systemctl >/dev/null 2>&1; then
  unit=postgresql@$ver-$cluster
  if systemctl is-active --quiet "$unit" 2>/dev/null; then
    method=systemd
    # (--value is systemd 230's: without it the line reads MainPID=N.)
    main=$(systemctl show -p MainPID "$unit" 2>/dev/null </dev/null) || main=
    main=${main#MainPID=}
    echo "unit_pid=$main"
    if [ -z "$running" ] || [ "$main" != "$running" ] || ! own_postgres "$main"; then refused=unit; fi
  elif [ -z "$running" ]; then
    method=systemd
    deb_listed || refused=debian
  else method=pg_ctlcluster; fi
elif [ -n "$cluster" ] && command -v pg_ctlcluster >/dev/null 2>&1; then method=pg_ctlcluster
else method=pg_ctl; fi
echo "method=$method"
if [ -n "$refused" ]; then echo "refused=$refused"; exit 0; fi
echo "log=$log"
echo "old_pid=$pid"
` + restartFiles + `# The restart and the wait for readiness run detached (setsid: a session
# and process group of their own, stdio on files), so that once begun they
# complete even when this script is killed — a cancelled run or timeout
# kills our process group, a dropped connection or a killed controller
# closes our stdout — instead of leaving postgres stopped between stop and
# start. flock on the data directory serialises them with any other pgtune
# restart or status of this cluster, so a status waits for a restart still
# in flight. Nothing left running may hold our stdout: a postmaster
# inheriting it would keep this command from ever finishing. The lock is
# taken on "$data/.": the owner may have swapped the data directory for a
# link, and flock creates what it cannot open — as root, never a file.
set -- "$method" "$cmdf" "$data" "$bin" "$owner" "$ver" "$cluster" "$sock" "$port" "$timeout" "$log" "$out" "$marker" "$runid" "$$" "$res"
detached=1
if command -v setsid >/dev/null 2>&1 && command -v flock >/dev/null 2>&1; then
  setsid -w flock -o -w "$timeout" "$data/." sh -c "$inner" sh "$@" </dev/null >"$res" 2>&1 || true
else
  sh -c "$inner" sh "$@" </dev/null >"$res" 2>&1 || true
fi
finished=1
cat -- "$res"
echo "--- output"
tail -n 20 -- "$out"
echo "--- log"
# The log is the owner's file (the server writes it): read as the owner,
# so that a link put in its place shows nothing root alone may read.
if ! grep -qx 'ready=1' -- "$res"; then as_owner tail -c "+$((off+1))" -- "$log" 2>/dev/null | tail -n 200; fi
exit 0
`

// restartInner is the detached part of restartScript: the restart itself
// and the wait until the server accepts connections. It prints rc=,
// ready= and new_pid=. A restart leaves a marker file (when one is named)
// from before the stop until the server is ready again, so a later run
// can tell a server pgtune left stopped from one stopped on purpose.
//
// The cluster's binaries come from a directory found on the host: pg_ctl
// runs as the owner (it refuses root anyway), pg_isready through run_bin
// (facts.RunBinFn), as the owner too, or as root only when root alone can
// change it.
var restartInner = `method=$1 cmdf=$2 data=$3 bin=$4 owner=$5 ver=$6 cluster=$7 sock=$8 port=$9 timeout=${10} log=${11} out=${12} marker=${13} runid=${14} outer=${15} res=${16}
trusted_dir=
` + facts.RunBinFn + asOwnerBody + `if [ "$method" != status ] && [ -n "$marker" ]; then
  mkdir -p -- "$(dirname -- "$marker")" && printf 'run=%s\ndata=%s\n' "$runid" "$data" > "$marker" || true
fi
rc=0
case $method in
status) timeout=3 ;;
pg_restart) sh -- "$cmdf" </dev/null >"$out" 2>&1 || rc=$? ;;
systemd) systemctl restart "postgresql@$ver-$cluster" </dev/null >"$out" 2>&1 || rc=$? ;;
pg_ctlcluster) as_owner pg_ctlcluster "$ver" "$cluster" restart </dev/null >"$out" 2>&1 || rc=$? ;;
pg_ctl) as_owner ${PGTUNE_OOM_ENV:+env $PGTUNE_OOM_ENV} "$bin/pg_ctl" -D "$data" -l "$log" -w -t "$timeout" -m fast restart </dev/null >"$out" 2>&1 || rc=$? ;;
esac
echo "rc=$rc"
ready=0
if [ "$rc" = 0 ]; then
  i=0
  while [ "$i" -lt "$timeout" ]; do
    s=$sock p=$port
    # A cluster that was stopped when its facts were gathered has no known
    # socket or port: the new postmaster.pid names them (lines 5 and 4).
    if { [ -z "$s" ] || [ -z "$p" ] || [ "$p" = 0 ]; } && [ -f "$data/postmaster.pid" ]; then
      pf=$(as_owner head -n 5 -- "$data/postmaster.pid" 2>/dev/null) || pf=
      pp=$(printf '%s\n' "$pf" | sed -n 4p) ss=$(printf '%s\n' "$pf" | sed -n 5p)
      if [ -z "$s" ]; then s=${ss:-}; fi
      if [ -z "$p" ] || [ "$p" = 0 ]; then p=${pp:-}; fi
    fi
    set -- -q -d postgres
    if [ -n "$s" ]; then set -- "$@" -h "$s"; fi
    if [ -n "$p" ] && [ "$p" != 0 ]; then set -- "$@" -p "$p"; fi
    if run_bin "$bin/pg_isready" "$@" </dev/null >/dev/null 2>&1; then ready=1; break; fi
    sleep 1
    i=$((i+1))
  done
fi
echo "ready=$ready"
npid=
if [ -f "$data/postmaster.pid" ]; then npid=$(as_owner head -n 1 -- "$data/postmaster.pid" 2>/dev/null) || npid=; fi
case $npid in *[!0-9]*) npid=;; esac
if [ -n "$npid" ] && [ ! -d "/proc/$npid" ]; then npid=; fi
echo "new_pid=$npid"
if [ "$ready" = 1 ] && [ -n "$marker" ]; then rm -f -- "$marker"; fi
# restartScript reads the two files and removes them on its way out. When
# it is gone by now (killed: a cancel's TERM, a KILL), nothing will:
# they go here. A pid taken again since leaves them, never
# removes what is still read.
if [ -n "$outer" ] && ! kill -0 "$outer" 2>/dev/null; then rm -f -- "$out" "$res" ${cmdf:+"$cmdf"}; fi
`

// restartTimeout bounds the stop (a fast shutdown still writes a
// checkpoint) and the start, in seconds, each.
const restartTimeout = 300

// restartResult is what restartScript reported.
type restartResult struct {
	Method         string
	Log            string
	OldPID, NewPID int
	RC             int
	Ready          bool
	Output         string
	LogTail        string
	// Refused says why the script would not use the Debian unit the
	// names ver/cluster gave: "unit" (an active unit whose main process,
	// UnitPID, is not this cluster's postmaster), "debian" (an inactive
	// one pg_lsclusters does not list with this data directory:
	// DebianData is what it lists, host text).
	Refused    string
	UnitPID    string
	DebianData string
}

// restartPostgres restarts the server: with the inventory's pg_restart
// when custom is true and one is set, else with the built-in method.
func restartPostgres(ctx context.Context, t *engine.Target, pg *facts.Postgres, custom bool) (*restartResult, error) {
	cmd := ""
	if custom {
		cmd = restartCommand(t)
	}
	return runRestartScript(ctx, t, pg, cmd, "restart")
}

// startAgain (re)starts the server as pgtune does when it must come back:
// with pg_restart when the inventory sets one, then with the built-in
// method if that did not bring it up.
func startAgain(ctx context.Context, t *engine.Target, pg *facts.Postgres) (*restartResult, error) {
	res, err := restartPostgres(ctx, t, pg, true)
	if restartCommand(t) != "" && (err != nil || !res.ok()) {
		res, err = restartPostgres(ctx, t, pg, false)
	}
	return res, err
}

// restartFailure says why a restart did not bring the server up; "" when
// it did.
func restartFailure(res *restartResult, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case !res.ok():
		return res.failure()
	}
	return ""
}

// postgresStatus tells whether the server is up, without touching it.
func postgresStatus(ctx context.Context, t *engine.Target, pg *facts.Postgres) (*restartResult, error) {
	return runRestartScript(ctx, t, pg, "", "status")
}

func runRestartScript(ctx context.Context, t *engine.Target, pg *facts.Postgres, custom, action string) (*restartResult, error) {
	if pg.Owner == "" || pg.Owner == "root" {
		// as_owner would run the cluster's binaries as root.
		return nil, fmt.Errorf("%s postgres: the data directory's owner is %q: pgtune runs the cluster's binaries as its owner, never as root", action, pg.Owner)
	}
	ver := ""
	if pg.Cluster != "" {
		// Debian names units and pg_ctlcluster arguments by the version
		// directory of /etc/postgresql/V/C.
		ver = strconv.Itoa(pg.Major)
		if strings.HasPrefix(pg.ConfigFile, "/etc/postgresql/") {
			ver = path.Base(path.Dir(path.Dir(pg.ConfigFile)))
		}
	}
	if err := checkDebianNames(ver, pg.Cluster); err != nil {
		return nil, fmt.Errorf("%s postgres: %w", action, err)
	}
	onStdin := ""
	if custom != "" {
		onStdin = "1"
	}
	res, err := t.RunInput(ctx, []byte(custom), withOOMEnv(t, "sh", "-c", restartScript, "sh", onStdin, pg.DataDir, pg.BinDir, pg.Owner,
		ver, pg.Cluster, pg.SocketDir, strconv.Itoa(pg.Port), strconv.Itoa(restartTimeout), action,
		restartMarker(t, pg), runID(t), restartInner)...)
	if err != nil {
		return nil, fmt.Errorf("%s postgres: %w", action, err)
	}
	r := parseRestart(string(res.Stdout))
	if r.Refused != "" {
		return nil, fmt.Errorf("%s postgres: %w", action, debianRefusal(ver, pg, r))
	}
	shieldStarted(ctx, t, pg, action, r) // the OOM shield at every start pgtune performs (oomshield.go)
	return r, nil
}

// Debian's version and cluster names come from paths the cluster owner
// can create (/etc/postgresql belongs to postgres, and the postmaster's
// command line names its config file) and become arguments of commands
// run as root (pg_ctlcluster V C, the unit postgresql@V-C): anything but a
// plain name, one that pg_ctlcluster would read as an option above all,
// is refused.
var (
	debianVersionRE = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?$`)
	debianClusterRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$`)
)

func checkDebianNames(ver, cluster string) error {
	if cluster == "" {
		return nil
	}
	if !debianVersionRE.MatchString(ver) || !debianClusterRE.MatchString(cluster) {
		return fmt.Errorf("refusing Debian cluster %s %s: not a version and cluster name (the names come from paths the cluster owner controls)",
			strconv.QuoteToASCII(ver), strconv.QuoteToASCII(cluster))
	}
	return nil
}

// debianRefusal says why the script would not use Debian's unit
// postgresql@ver-pg.Cluster: the names come from the postmaster's command
// line, which the cluster owner chooses, and root restarts a unit only
// when it is this cluster's.
func debianRefusal(ver string, pg *facts.Postgres, r *restartResult) error {
	unit := "postgresql@" + ver + "-" + pg.Cluster
	why := ""
	switch r.Refused {
	case "unit":
		why = "its main process is " + strconv.QuoteToASCII(r.UnitPID) + ", not this cluster's running postmaster"
	case "debian":
		why = "pg_lsclusters does not list " + ver + "/" + pg.Cluster + " (or is not root's alone to change)"
		if r.DebianData != "" {
			why = "pg_lsclusters lists its data directory as " + strconv.QuoteToASCII(r.DebianData)
		}
	default:
		why = "refused: " + strconv.QuoteToASCII(r.Refused)
	}
	return fmt.Errorf("refusing to restart %s with systemctl: %s (data directory %s; the unit's name comes from the config file on the postmaster's command line, %s, which the cluster owner chooses); set pg_restart in the inventory to choose the command",
		unit, why, strconv.QuoteToASCII(pg.DataDir), strconv.QuoteToASCII(pg.ConfigFile))
}

// restartMarker is the file a restart leaves on the host until the server
// accepts connections again: under the state directory, named after the
// data directory.
func restartMarker(t *engine.Target, pg *facts.Postgres) string {
	dir := t.StateDir
	if dir == "" {
		dir = engine.StateDir
	}
	return path.Join(dir, "restart-pending"+strings.ReplaceAll(path.Clean(pg.DataDir), "/", "%"))
}

func parseRestart(out string) *restartResult {
	r := &restartResult{}
	head, rest, _ := strings.Cut(out, "--- output\n")
	r.Output, r.LogTail, _ = strings.Cut(rest, "--- log\n")
	for _, l := range strings.Split(head, "\n") {
		k, v, _ := strings.Cut(l, "=")
		switch k {
		case "method":
			r.Method = v
		case "log":
			r.Log = v
		case "old_pid":
			r.OldPID = hostPID(v)
		case "new_pid":
			r.NewPID = hostPID(v)
		case "rc":
			// An exit status the host garbled is no success.
			rc, err := facts.ParseInt("restart exit status", v, 0, 255)
			if err != nil {
				rc = -1
			}
			r.RC = int(rc)
		case "ready":
			r.Ready = v == "1"
		case "refused":
			r.Refused = v
		case "unit_pid":
			r.UnitPID = v
		case "debian_data":
			r.DebianData = v
		}
	}
	return r
}

// hostPID reads a PID the host printed: 0 (none) unless it is one.
func hostPID(v string) int {
	n, err := facts.ParseInt("pid", v, 1, facts.MaxPID)
	if err != nil {
		return 0
	}
	return int(n)
}

// ok reports whether the restart brought a new postmaster up.
func (r *restartResult) ok() bool { return r.RC == 0 && r.Ready && r.NewPID != 0 }

// failure describes a failed restart by its FATAL line, from the server's
// log or, failing that, from what the restart command printed.
func (r *restartResult) failure() string {
	if line := fatalLine(r.LogTail); line != "" {
		return line
	}
	if line := fatalLine(r.Output); line != "" {
		return line
	}
	switch {
	case r.RC != 0:
		msg := strings.TrimSpace(r.Output)
		if msg == "" {
			msg = "no output"
		}
		return fmt.Sprintf("%s exited with status %d: %s", r.Method, r.RC, lastLines(msg, 3))
	case !r.Ready:
		return fmt.Sprintf("server did not accept connections within %ds (log %s)", restartTimeout, r.Log)
	}
	return "postmaster not running after restart"
}

// fatalLine returns the FATAL (or PANIC) line that ended a failed start,
// with the DETAIL and HINT that follow it, if any. A server log holds
// other FATAL lines too, the clients' above all: a client connecting
// while the server starts gets "the database system is starting up" (a
// prober, a pooler's health check), a standby's WAL receiver logs every
// failed connection. With PostgreSQL's default log_line_prefix ('%m
// [%p] ') the line of the process that ended the start is known: the
// startup process the postmaster names ("startup process (PID N) exited
// with exit code 1") or the postmaster itself (the PID of "starting
// PostgreSQL"). Without PIDs, the first FATAL that is not a client's
// wins, else the first.
func fatalLine(log string) string {
	lines := strings.Split(log, "\n")
	ended := map[string]bool{}
	for _, l := range lines {
		if m := childExitRE.FindStringSubmatch(l); m != nil {
			ended[m[1]] = true
		}
		if strings.Contains(l, "LOG:  starting PostgreSQL") {
			if pid := linePID(l); pid != "" {
				ended[pid] = true
			}
		}
	}
	chosen, first := -1, -1
	for i, l := range lines {
		idx := severityIndex(l)
		if idx < 0 {
			continue
		}
		if first < 0 {
			first = i
		}
		if pid := linePID(l[:idx]); pid != "" && ended[pid] {
			chosen = i
			break
		}
		if chosen < 0 && !clientFatal(l[idx:]) {
			chosen = i
		}
	}
	if chosen < 0 {
		chosen = first
	}
	if chosen < 0 {
		return ""
	}
	l := lines[chosen]
	msg := strings.TrimSpace(l[severityIndex(l):])
	var extra []string
	for _, next := range lines[chosen+1:] {
		if strings.HasPrefix(next, "\t") {
			continue // a message wrapped onto tab-indented lines
		}
		if d := strings.Index(next, "DETAIL:"); d >= 0 {
			extra = append(extra, strings.Join(strings.Fields(next[d:]), " "))
			continue
		}
		if h := strings.Index(next, "HINT:"); h >= 0 {
			extra = append(extra, strings.Join(strings.Fields(next[h:]), " "))
		}
		break
	}
	if len(extra) > 0 {
		msg += " (" + strings.Join(extra, "; ") + ")"
	}
	return msg
}

// childExitRE is the postmaster's line about a child process that ended
// the server: "startup process (PID 4242) exited with exit code 1".
var childExitRE = regexp.MustCompile(`(?:startup|checkpointer|background writer) process \(PID ([0-9]+)\) (?:exited|was terminated)`)

// linePIDRE is the PID of log_line_prefix's default '%m [%p] '.
var linePIDRE = regexp.MustCompile(`\[([0-9]+)\]\s*(?:[A-Z]+:|$)`)

func linePID(prefix string) string {
	if m := linePIDRE.FindStringSubmatch(prefix); m != nil {
		return m[1]
	}
	return ""
}

func severityIndex(l string) int {
	if i := strings.Index(l, "FATAL:"); i >= 0 {
		return i
	}
	return strings.Index(l, "PANIC:")
}

// clientFatals are FATAL messages of processes other than the one that
// ends a failed start: clients refused while it starts or stops, a WAL
// receiver that cannot reach its primary or is stopped.
var clientFatals = []string{
	"the database system is starting up",
	"the database system is shutting down",
	"the database system is not yet accepting connections",
	"the database system is not accepting connections",
	"the database system is in recovery mode",
	"could not connect to the primary server",
	"terminating walreceiver",
	"terminating connection due to administrator command",
	"no pg_hba.conf entry",
	"password authentication failed",
}

func clientFatal(msg string) bool {
	for _, c := range clientFatals {
		if strings.Contains(msg, c) {
			return true
		}
	}
	return false
}

// lastLines is the last n lines of host output for an error, clipped to
// their end: a line may be as long as the output cap, and the last one
// is the one that says why (pg_ctl's "server does not shut down" after a
// long line of dots).
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return transport.ClipOutputTail(strings.Join(lines, " / "))
}
