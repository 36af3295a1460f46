package facts

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine/transport"
)

// procFilter is an awk program, given every /proc/PID/stat, that lists
// the PIDs the discovery's loop over processes must look at, in the
// order given: all but those it can tell the loop would pass over, each
// told from one read of its stat (the shell's read costs a system call
// per byte: on a server with 300 connections the loop alone took 0.2
// CPU-s). It passes over a process not named postgres or postmaster, and
// one whose parent is so named (a backend), comparing names as the
// loop's read does (blanks at either end dropped). It judges only from a
// whole record: a first line with all of stat's fields after the name.
// A name with a line break cuts that line short (and could fake a few
// fields, never 20): such a process, and any child of it, is listed, for
// the loop to judge as before. Its last line is "." (an awk that stops
// short, or prints nothing and exits 0, is not taken for an empty list).
const procFilter = `
function pg(c) {
  sub(/^[ \t]+/, "", c); sub(/[ \t]+$/, "", c)
  return c == "postgres" || c == "postmaster"
}
BEGIN {
  for (i = 1; i < ARGC; i++) {
    f = ARGV[i]; p = substr(f, 7, length(f) - 11)
    if (f != "/proc/" p "/stat" || p !~ /^[0-9]+$/) continue
    l = ""
    if ((getline l < f) <= 0) { close(f); continue }
    close(f); pid[++n] = p
    if (substr(l, 1, length(p) + 2) != p " (") continue
    r = substr(l, length(p) + 3); j = 0
    while ((k = index(substr(r, j + 1), ") ")) > 0) j += k
    if (j == 0 || split(substr(r, j + 2), fl, " ") < 20 || fl[2] !~ /^[0-9]+$/) continue
    comm[p] = substr(r, 1, j - 1); ppid[p] = fl[2]
  }
  for (i = 1; i <= n; i++) {
    p = pid[i]
    if (p in comm) {
      if (!pg(comm[p])) continue
      q = ppid[p]
      if (q in comm && pg(comm[q])) continue
    }
    print p
  }
  print "."
}
`

// discoverScript finds and describes PostgreSQL clusters in one round trip.
// It is fixed text; the inventory overrides arrive as positional
// parameters ($1 pg_data, $2 pg_bin, $3 "only": describe $1 and nothing
// else, $4 the inventory's pg_bin again: the one directory whose binaries
// are trusted without the ownership check, $5 "lsc": run pg_lsclusters
// even where a lone postmaster's command line names a Debian
// configuration, the debian_conf record, which otherwise leaves it out;
// $6 "post": then run, for a lone postmaster, the gather's commands run
// ahead, prerun.go). Output is blocks, each opened by a [kind] record, of key=value
// records; every record ends in NUL, which no path, process name or file
// line can hold, so nothing read from the host can forge a record:
//
//	[postmaster]  a running postmaster (see below)
//	[impostor]    a process named postgres that is not one: why=...
//	[override]    the inventory's pg_data
//	[cluster]     a line of Debian's pg_lsclusters
//	[list_skipped] pg_lsclusters left out for a lone postmaster's
//	              debian_conf (the controller checks it, else asks $5 lsc)
//
// A process is taken for a postmaster only when the postmaster.pid of its
// data directory (its working directory, else its -D) names its PID and
// it runs as the uid owning that directory, root excepted: a name is
// anyone's to choose, that file only the cluster owner's. Anything else
// named postgres is reported as an impostor, and never run. A postmaster's
// children (backends, workers) are postgres processes too: the parent test
// leaves them out. comm is read rather than the exe link because comm is
// readable without privileges.
//
// The data directory's files belong to the cluster owner: they are read
// without following a final symlink (O_NOFOLLOW) and without waiting on a
// FIFO (O_NONBLOCK). Binaries run through run_bin (RunBinFn): the version
// comes from the owner running its own binary, never from root running
// the owner's.
const discoverScript = `export LC_ALL=C
# (The positional parameters are used again below: each is named here.)
want_data=$1 want_bin=$2 only=$3 want_lsc=${5-} run_ahead=${6-}
# The inventory's pg_bin is the controller's choice, trusted as such; a
# bin directory found on the host ($2 of a re-read) never is.
trusted_dir=${4-}
owner= alive=
lp_pid= lp_owner= lp_bin= lp_sock= lp_port= lp_conf= lp_data= bi_ok=
cd /
` + RunBinFn + `
rec() { printf '%s=%s\0' "$1" "$2"; }
blk() { printf '[%s]\0' "$1"; }
` + walRecvFn + `num() { case $1 in ''|*[!0-9]*) return 1;; esac; return 0; }
# readsafe FILE, only as $(readsafe FILE): the subshell becomes dd.
readsafe() { exec dd if="$1" iflag=nofollow,nonblock bs=4096 count=1 2>/dev/null; }
nl='
'
# proccwd PID sets pc to its working directory ("" when not permitted):
# cd -P resolves the link in the shell, where readlink was a process.
proccwd() { pc=; if cd -P "/proc/$1/cwd" 2>/dev/null; then pc=$PWD; cd /; fi; }
# dirowner DIR sets ouid and owner (its owner's uid and name), one stat
# for both, asked once for the last DIR asked.
do_dir=-
dirowner() {
  [ "$do_dir" != "$1" ] || return 0
  ouid= owner= do_dir=$1
  do_s=$(stat -L -c '%u %U' -- "$1" 2>/dev/null) || return 0
  ouid=${do_s%% *} owner=${do_s#* }
  num "$ouid" || ouid= owner=
}
# debconf FILE succeeds when FILE is a configuration file of Debian's
# layout, /etc/postgresql/VERSION/CLUSTER/postgresql.conf.
debconf() {
  dc_r=${1#/etc/postgresql/}
  [ "$dc_r" != "$1" ] || return 1
  dc_v=${dc_r%%/*} dc_r=${dc_r#*/}
  dc_c=${dc_r%%/*} dc_r=${dc_r#*/}
  [ "$dc_r" = postgresql.conf ] || return 1
  case $dc_v in ''|.*|*.|*..*|*[!0-9.]*) return 1;; esac
  case $dc_c in ''|.*|*[!A-Za-z0-9_.-]*) return 1;; esac
}

# pidfile DIR sets pf_pid, pf_port, pf_sock (lines 1, 4, 5 of
# DIR/postmaster.pid); it fails when there is none to read. When pf_have
# names DIR, the values read last stand (read once per postmaster).
pf_have=
pidfile() {
  if [ -n "$pf_have" ] && [ "$pf_have" = "$1" ]; then pf_have=; return 0; fi
  pf_have=
  pf_pid= pf_port= pf_sock=
  pf_txt=$(readsafe "$1/postmaster.pid")
  [ -n "$pf_txt" ] || return 1
  pf_n=0
  while IFS= read -r pf_l; do
    pf_n=$((pf_n+1))
    case $pf_n in 1) pf_pid=$pf_l;; 4) pf_port=$pf_l;; 5) pf_sock=$pf_l;; esac
  done <<PIDFILE
$pf_txt
PIDFILE
}

# procuid PID sets pu_r, pu_e: its real and effective uid.
procuid() {
  pu_r= pu_e=
  while read -r k r e rest; do
    if [ "$k" = Uid: ]; then pu_r=$r pu_e=$e; break; fi
  done 2>/dev/null < "/proc/$1/status"
}

# procinfo PID [CWD] describes a process (CWD: its working directory,
# when known).
procinfo() {
  pi=$1
  rec pid "$pi"
  pi_exe=$(readlink "/proc/$pi/exe" 2>/dev/null) || pi_exe=
  rec exe "$pi_exe"
  if [ $# -ge 2 ]; then pc=$2; else proccwd "$pi"; fi
  rec cwd "$pc"
  procuid "$pi"
  rec ruid "$pu_r"
  rec euid "$pu_e"
  while read -r k v rest; do
    if [ "$k" = HugetlbPages: ]; then rec hugetlb_kb "$v"; fi
  done 2>/dev/null < "/proc/$pi/status"
  read -r st 2>/dev/null < "/proc/$pi/stat" || st=
  st=${st##*) }
  set -- $st
  rec starttime "${20:-}"
  walrecv "$pi" "$pc" "$pu_r" "$pf_port"
  sed -z 's/^/arg=/' 2>/dev/null < "/proc/$pi/cmdline"
  printf '\0'
}

is_postgres() {
  c=
  read -r c 2>/dev/null < "/proc/$1/comm" || return 1
  case $c in postgres|postmaster) return 0;; esac
  return 1
}

# bininfo finds the binaries of the data directory $d, PostgreSQL $v,
# unless $b names them, and asks postgres its version.
bininfo() {
  rh_ids
  if [ -z "$b" ] && [ -n "$v" ] && [ -x "/usr/lib/postgresql/$v/bin/postgres" ]; then b=/usr/lib/postgresql/$v/bin; fi
  if [ -z "$b" ]; then pb=$(command -v postgres 2>/dev/null) && b=$(dirname -- "$pb"); fi
  if [ -z "$b" ] && pb=$(command -v pg_config 2>/dev/null); then b=$(sw_exec=exec; run_bin "$pb" --bindir </dev/null 2>/dev/null); fi
  rec bin "$b"
  if [ -n "$b" ] && [ -x "$b/postgres" ]; then
    if how_of "$b/postgres"; then
      rec bin_runs_as "$rh_how"
      bi_ok=1
      rec version "$(sw_exec=exec; run_bin "$b/postgres" --version </dev/null 2>/dev/null)"
    else
      rec bin_refused 1
    fi
  fi
}

# pginfo DIR BIN proc|noproc [nobin] describes the data directory DIR:
# with proc, also its running postmaster; with nobin, not its binaries.
pginfo() {
  d=$1 b=$2 bi_ok=
  rec data "$d"
  [ -n "$d" ] && [ -d "$d" ] || return 0
  rd=
  if cd -P -- "$d" 2>/dev/null; then rd=$PWD; cd /; fi
  rec realdata "$rd"
  dirowner "$d"
  rec owner "$owner"
  rec owner_uid "$ouid"
  v=$(readsafe "$d/PG_VERSION")
  v=${v%%"$nl"*}
  case $v in ''|*[!0-9.]*) v=;; *) rec pg_version "$v";; esac
  if [ -f "$d/postgresql.conf" ]; then rec has_conf 1; fi
  if pidfile "$d" && num "$pf_pid"; then
    rec pidfile_pid "$pf_pid"
    rec pidfile_port "$pf_port"
    rec pidfile_socket "$pf_sock"
  else
    pf_pid=
  fi
  # A directory root owns is no cluster's (describe refuses it): nothing
  # is run for it, as root least of all.
  [ "$4" = nobin ] || [ "$ouid" = 0 ] || bininfo
  [ "$3" = proc ] && [ -n "$pf_pid" ] && is_postgres "$pf_pid" || return 0
  procuid "$pf_pid"
  if [ -n "$ouid" ] && [ "$pu_r" = "$ouid" ] && [ "$pu_e" = "$ouid" ]; then rec alive 1; alive=1; procinfo "$pf_pid"; fi
}

# impostor PID WHY DIR OWNER_UID reports a process named postgres that is
# not a postmaster, without running anything of it.
impostor() {
  blk impostor
  rec pid "$1"
  rec why "$2"
  c=
  read -r c 2>/dev/null < "/proc/$1/comm" || :
  rec comm "$c"
  rec exe "$(readlink "/proc/$1/exe" 2>/dev/null)"
  rec data "$3"
  rec owner_uid "$4"
  procuid "$1"
  rec ruid "$pu_r"
  rec euid "$pu_e"
  if num "$pf_pid"; then rec pidfile_pid "$pf_pid"; fi
  rh_ids
  rec reader_uid "$rh_me"
}

# pm_debconf PID sets pm_conf to the Debian configuration file its last
# argument names ("" when none). The shell's read drops the NULs between
# arguments (a hint, checked against the exact arguments by the
# controller).
pm_debconf() {
  pm_conf= pm_cl=
  IFS= read -r pm_cl 2>/dev/null < "/proc/$1/cmdline" || :
  case $pm_cl in *config_file=/etc/postgresql/*) pm_cl=${pm_cl##*config_file=}; if debconf "$pm_cl"; then pm_conf=$pm_cl; fi;; esac
}

# lone_pm PID DIR notes the postmaster PID of data directory DIR (as the
# controller will name it) for the commands run ahead ($6 post, when it
# stays the only one): called just after pginfo accepted its binaries and
# pm_debconf read its command line. Its configuration file is a guess
# (where an argument ends is not known): Debian's (pm_conf), else DIR's
# (Patroni's --config-file, a plain -D). The controller keeps an answer
# only for the very command it would run: a wrong guess costs that run
# again, never a wrong answer.
lone_pm() {
  lp_pid=$1 lp_owner=$owner lp_bin=$b lp_sock=$pf_sock lp_port=$pf_port lp_conf=$pm_conf lp_data=$2
  if [ -z "$lp_conf" ] && [ -f "$2/postgresql.conf" ]; then lp_conf=$2/postgresql.conf; fi
}

found= npm=0 pm_conf= want_pm=
if [ -n "$want_data" ]; then
  blk override
  pginfo "$want_data" "$want_bin" proc
  found=1
  if [ -n "$alive" ]; then
    want_pm=$pf_pid
    if [ -n "$bi_ok" ]; then pm_debconf "$pf_pid"; lone_pm "$pf_pid" "${rd:-$want_data}"; fi
  fi
fi
[ "$only" = only ] && exit 0

# The processes worth the loop below (procFilter), in /proc's order;
# without awk's whole answer (its last line "."), every process, each
# checked by the loop alone.
pm_list=$(awk '` + procFilter + `' /proc/[0-9]*/stat 2>/dev/null) || pm_list=
case $pm_list in
.|*"$nl".) pm_list=${pm_list%.};;
*) pm_list=
  for s in /proc/[0-9]*/stat; do p=${s#/proc/}; pm_list="$pm_list ${p%/stat}"; done;;
esac
for p in $pm_list; do
  s=/proc/$p/stat
  is_postgres "$p" || continue
  read -r st 2>/dev/null < "$s" || continue
  st=${st##*) }
  set -- $st
  is_postgres "$2" && continue
  # pg_data's own postmaster, checked above (its postmaster.pid names it,
  # its owner runs it): no impostor.
  [ "$p" = "$want_pm" ] && continue
  proccwd "$p"
  d=$pc
  if [ -z "$d" ]; then
    d=$(tr '\000' '\n' 2>/dev/null < "/proc/$p/cmdline" | awk 'prev == "-D" { print; exit } /^-D./ { print substr($0, 3); exit } { prev = $0 }')
  fi
  pf_pid=
  if [ -z "$d" ] || [ ! -d "$d" ]; then impostor "$p" no_data_dir "$d" ""; continue; fi
  dirowner "$d"
  procuid "$p"
  if ! pidfile "$d"; then impostor "$p" no_pidfile "$d" "$ouid"; continue; fi
  if [ "$pf_pid" != "$p" ]; then impostor "$p" pidfile_other "$d" "$ouid"; continue; fi
  if [ -z "$ouid" ] || [ "$pu_r" != "$ouid" ] || [ "$pu_e" != "$ouid" ]; then impostor "$p" uid "$d" "$ouid"; continue; fi
  if [ "$ouid" = 0 ]; then impostor "$p" root "$d" "$ouid"; continue; fi
  # With pg_data set, a real postmaster is the override's (described
  # there) or another cluster's, of no use: only impostors are noted.
  [ -n "$want_data" ] && continue
  blk postmaster
  procinfo "$p" "$d"
  case $pi_exe in /*) b=${pi_exe%/*}; b=${b:-/};; *) b=;; esac
  b=${want_bin:-$b}
  pf_have=$d
  pginfo "$d" "$b" noproc
  pf_have=
  # Debian's configuration on the command line: pg_lsclusters has
  # nothing to add for a lone postmaster.
  pm_debconf "$p"
  if [ -n "$pm_conf" ]; then rec debian_conf "$pm_conf"; fi
  if [ "$npm" = 0 ] && [ -n "$bi_ok" ]; then lone_pm "$p" "${rd:-$d}"; fi
  npm=$((npm+1))
  found=1
done

# pg_lsclusters runs as root: only when root alone can change it. With
# pg_data set and its postmaster running, or one postmaster running with
# a configuration file of Debian's layout, the command line names the
# configuration: Debian's list is not needed (and its Perl is costly).
# $5 "lsc" asks for it all the same.
# A [list_skipped] block says the list was left out on that word alone.
lsc= lsc_want=
if [ -z "$want_data" ] || [ -z "$alive" ]; then lsc_want=1; fi
if [ -n "$lsc_want" ] && [ "$npm" = 1 ] && [ -n "$pm_conf" ] && [ "$want_lsc" != lsc ]; then
  lsc_want=
  blk list_skipped
fi
if [ -n "$lsc_want" ]; then
  lsc=$(command -v pg_lsclusters 2>/dev/null) && lsc=$(bin_trusted "$lsc") || lsc=
fi
if [ -n "$lsc" ]; then
  "$lsc" -h 2>/dev/null | while read -r v c port status lowner d log rest; do
    case $v in ''|*[!0-9.]*) continue;; esac
    blk cluster
    rec cluster "$c"
    rec cluster_version "$v"
    rec log "$log"
    if [ -z "$found" ]; then pginfo "$d" "/usr/lib/postgresql/$v/bin" proc; else rec data "$d"; fi
  done
fi
# $6 post (GatherHost): the commands run ahead for pg_data's running
# postmaster, else a lone one (prerun.go), code the gather put in $gpost.
if [ "$run_ahead" = post ] && [ -n "$lp_pid" ] && { [ -n "$want_data" ] || [ "$npm" = 1 ]; }; then eval "$gpost"; fi
exit 0
`

// DiscoverPostgres finds the cluster pgtune manages on the host, in one
// round trip: the inventory's pg_data (with pg_bin and pg_config_file)
// when set; else the one running postmaster found in /proc; else the one
// cluster Debian's pg_lsclusters knows.
//
// No cluster at all is not an error: it returns (nil, nil), and the runner
// reports "no PostgreSQL cluster found" while still auditing the kernel.
// Several candidates without pg_data to pick one is an error. Processes
// named postgres that are not postmasters are left out: Discover says
// which.
func DiscoverPostgres(ctx context.Context, t transport.Transport, opts Options) (*Postgres, error) {
	pg, _, err := Discover(ctx, t, opts)
	return pg, err
}

// Discover is DiscoverPostgres that also returns a note (plain text, host
// strings quoted and escaped) for each process named postgres it ignored
// as not a postmaster. Ignored processes never make discovery fail.
func Discover(ctx context.Context, t transport.Transport, opts Options) (*Postgres, []string, error) {
	pg, ignored, err := discover(ctx, t, opts, false)
	if errors.Is(err, errListClusters) {
		pg, ignored, err = discover(ctx, t, opts, true)
	}
	return pg, ignored, err
}

// discover runs discoverScript once; withLists asks for pg_lsclusters
// even where the script would leave it out.
func discover(ctx context.Context, t transport.Transport, opts Options, withList bool) (*Postgres, []string, error) {
	if err := checkOverrides(opts); err != nil {
		return nil, nil, err
	}
	args := []string{"sh", "-c", discoverScript, "sh", opts.PGData, opts.PGBin, "", opts.PGBin}
	if withList {
		args = append(args, "lsc")
	}
	res, err := t.Run(ctx, transport.Command{Args: args, Become: opts.Become})
	if err != nil {
		return nil, nil, fmt.Errorf("discover postgres: %w", err)
	}
	pg, ignored, err := choosePostgres(parseBlocks(res.Stdout), opts)
	if withList && errors.Is(err, errListClusters) {
		err = fmt.Errorf("discover postgres: pg_lsclusters left out although asked for")
	}
	return pg, ignored, err
}

// errListClusters says the script left pg_lsclusters out on the word of
// a postmaster's command line (debian_conf) that its exact arguments do
// not bear out: discovery must run again with it.
var errListClusters = errors.New("discovery must list Debian's clusters")

// strictDebianConfRE is the shape of a Debian configuration file the
// discovery script may name (debconf): version digits and dots, a
// cluster name of letters, digits, '_', '.', '-', not starting with '.'.
var strictDebianConfRE = regexp.MustCompile(`^/etc/postgresql/[0-9]+(\.[0-9]+)*/[A-Za-z0-9_-][A-Za-z0-9_.-]*/postgresql\.conf$`)

// RefreshPostgres re-reads a known cluster (after a restart: new PID, start
// time, huge page use), keeping how it was found. Its bin directory is
// trusted as the inventory's only when it is the inventory's pg_bin: one
// found on the host may be the owner's, and the owner may since have
// swapped the data directory for a link to a directory root owns.
func RefreshPostgres(ctx context.Context, t transport.Transport, become bool, pg *Postgres) (*Postgres, error) {
	trusted := ""
	if pg.BinFromInventory {
		trusted = pg.BinDir
	}
	res, err := t.Run(ctx, transport.Command{
		Args:   []string{"sh", "-c", discoverScript, "sh", pg.DataDir, pg.BinDir, "only", trusted},
		Become: become,
	})
	if err != nil {
		return nil, fmt.Errorf("read postgres state: %w", err)
	}
	blocks := parseBlocks(res.Stdout)
	if len(blocks) != 1 || blocks[0].kind != "override" {
		return nil, fmt.Errorf("read postgres state: unexpected output (%d blocks)", len(blocks))
	}
	out, err := describe(blocks[0], pg.Source)
	if err != nil {
		return nil, err
	}
	out.ConfigFile, out.Cluster, out.BinFromInventory = pg.ConfigFile, pg.Cluster, pg.BinFromInventory
	return out, nil
}

// checkOverrides checks the inventory's pg_data, pg_bin and
// pg_config_file.
func checkOverrides(opts Options) error {
	if err := checkOverride("pg_data", opts.PGData); err != nil {
		return err
	}
	if err := checkOverride("pg_bin", opts.PGBin); err != nil {
		return err
	}
	return checkOverride("pg_config_file", opts.PGConfigFile)
}

// checkOverride refuses values that cannot be a path: a NUL would end a
// record of the discovery output, a line break a line of its files.
func checkOverride(key, v string) error {
	if v == "" {
		return nil
	}
	if strings.ContainsAny(v, "\n\r\x00") {
		return fmt.Errorf("%s %q: contains a line break or NUL", key, v)
	}
	if !strings.HasPrefix(v, "/") {
		return fmt.Errorf("%s %q: must be an absolute path", key, v)
	}
	return nil
}

type block struct {
	kind string
	kv   map[string]string
	args []string
}

func (b block) get(k string) string { return b.kv[k] }

// parseBlocks reads discoverScript's output: NUL-terminated records, a
// block opened by each "[kind]" one.
func parseBlocks(out []byte) []block {
	var blocks []block
	for _, rec := range strings.Split(string(out), "\x00") {
		if strings.HasPrefix(rec, "[") && strings.HasSuffix(rec, "]") {
			blocks = append(blocks, block{kind: rec[1 : len(rec)-1], kv: map[string]string{}})
			continue
		}
		if len(blocks) == 0 {
			continue
		}
		k, v, ok := strings.Cut(rec, "=")
		if !ok {
			continue
		}
		b := &blocks[len(blocks)-1]
		if k == "arg" {
			b.args = append(b.args, v)
			continue
		}
		if _, dup := b.kv[k]; !dup { // first wins: procinfo precedes pginfo
			b.kv[k] = v
		}
	}
	return blocks
}

// pickOne ends the error for a host with several clusters and no
// pg_data: the one inventory key that settles it, and what it takes.
const pickOne = "set this host's pg_data in the inventory to the data directory of the one to manage"

// listSome joins the first few of a host's clusters for an error, and
// counts the rest: a host may run hundreds.
func listSome(items []string) string {
	const most = 10
	if len(items) <= most {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:most], ", "), len(items)-most)
}

func choosePostgres(blocks []block, opts Options) (*Postgres, []string, error) {
	var postmasters, clusters []block
	var override *block
	var ignored []string
	for i, b := range blocks {
		switch b.kind {
		case "postmaster", "impostor":
			if why := notPostmaster(b); why != "" {
				ignored = append(ignored, ignoredNote(b, why))
				continue
			}
			postmasters = append(postmasters, b)
		case "cluster":
			clusters = append(clusters, b)
		case "override":
			override = &blocks[i]
		}
	}
	// debianConf finds the /etc/postgresql/V/C config of a data dir.
	debian := func(data string) (string, string) {
		for _, c := range clusters {
			if data != "" && samePath(c.get("data"), data) {
				v, name := c.get("cluster_version"), c.get("cluster")
				return path.Join("/etc/postgresql", v, name, "postgresql.conf"), name
			}
		}
		return "", ""
	}

	// The script leaves pg_lsclusters out for a lone postmaster whose
	// command line names a Debian configuration (debian_conf): that is
	// only enough when the controller, too, sees one postmaster, and it
	// is the one.
	skippedList := false
	for _, b := range blocks {
		skippedList = skippedList || b.kind == "list_skipped"
	}
	if skippedList && (override != nil || len(postmasters) != 1 || postmasters[0].get("debian_conf") == "") {
		return nil, ignored, errListClusters
	}

	var chosen block
	var source string
	var pm *block // the postmaster serving the chosen data dir, if any
	switch {
	case override != nil:
		chosen, source = *override, "inventory"
		if chosen.get("realdata") == "" {
			return nil, ignored, fmt.Errorf("pg_data %s: no such directory (or not readable: set become)", opts.PGData)
		}
		for i, p := range postmasters {
			if samePath(p.get("realdata"), chosen.get("realdata")) || samePath(p.get("data"), opts.PGData) {
				pm = &postmasters[i]
			}
		}
		if pm == nil && chosen.get("alive") == "1" {
			// Its postmaster, described in the override itself (the scan
			// leaves real postmasters out when pg_data is set).
			pm = override
		}
	case len(postmasters) == 1:
		chosen, source, pm = postmasters[0], "postmaster", &postmasters[0]
	case len(postmasters) > 1:
		// Each by the data directory pg_data takes, with its Debian
		// cluster name where pg_lsclusters knows it.
		var dirs []string
		for _, p := range postmasters {
			name := ""
			for _, c := range clusters {
				if c.get("cluster") != "" && (samePath(c.get("data"), p.get("data")) || samePath(c.get("realdata"), p.get("realdata"))) {
					name = c.get("cluster_version") + "/" + c.get("cluster") + ", "
				}
			}
			dirs = append(dirs, fmt.Sprintf("%s (%spid %s)", p.get("data"), name, p.get("pid")))
		}
		sort.Strings(dirs)
		return nil, ignored, fmt.Errorf("%d postmasters are running (%s): %s",
			len(postmasters), listSome(dirs), pickOne)
	case len(clusters) == 1:
		chosen, source = clusters[0], "pg_lsclusters"
	case len(clusters) > 1:
		var names []string
		for _, c := range clusters {
			names = append(names, fmt.Sprintf("%s/%s (%s)", c.get("cluster_version"), c.get("cluster"), c.get("data")))
		}
		return nil, ignored, fmt.Errorf("pg_lsclusters lists %d clusters (%s) and none is running: %s",
			len(clusters), listSome(names), pickOne)
	default:
		return nil, ignored, nil
	}

	pg, err := describe(chosen, source)
	if err != nil {
		return nil, ignored, err
	}
	if opts.PGBin != "" {
		pg.BinDir, pg.BinFromInventory = opts.PGBin, true
	}
	// The active config file: the inventory's; else the one the
	// postmaster was started with; else Debian's; else the data dir's.
	var args []string
	if pm != nil {
		args = pm.args
	}
	cfgFromArgs, dFromArgs := configFromArgs(args)
	// Where the script left pg_lsclusters out, the chosen postmaster's
	// exact arguments must name the Debian configuration it saw (a
	// host's hint, checked): else its list is needed after all.
	if skippedList {
		dc := pm.get("debian_conf")
		if cfgFromArgs != dc || !strictDebianConfRE.MatchString(dc) {
			return nil, ignored, errListClusters
		}
	}
	debConf, debName := debian(pg.DataDir)
	switch {
	case opts.PGConfigFile != "":
		pg.ConfigFile = opts.PGConfigFile
	case cfgFromArgs != "":
		pg.ConfigFile = absUnder(cfgFromArgs, pg.DataDir)
	case dFromArgs != "" && !samePath(dFromArgs, pg.DataDir) && !samePath(dFromArgs, chosen.get("realdata")):
		// -D named the config directory; data_directory in it moved the data.
		pg.ConfigFile = path.Join(absUnder(dFromArgs, "/"), "postgresql.conf")
	case chosen.get("has_conf") == "1":
		pg.ConfigFile = path.Join(pg.DataDir, "postgresql.conf")
	case debConf != "":
		pg.ConfigFile = debConf
	default:
		pg.ConfigFile = path.Join(pg.DataDir, "postgresql.conf")
	}
	if strings.ContainsAny(pg.ConfigFile, "\n\x00") {
		return nil, ignored, fmt.Errorf("%s: the postmaster's config file %s contains a line break", pg.DataDir, strconv.QuoteToASCII(pg.ConfigFile))
	}
	if opts.PGConfigFile == "" && (cfgFromArgs != "" || dFromArgs != "") {
		// The inventory's pg_data counts as the path the operator chose
		// (it may be a link to the real directory).
		if err := trustedConfigPlace(pg.ConfigFile, pg.DataDir, chosen.get("realdata"), opts.PGData); err != nil {
			return nil, ignored, err
		}
	}
	if m := debianConfRE.FindStringSubmatch(pg.ConfigFile); m != nil {
		pg.Cluster = m[2]
	} else if debName != "" {
		pg.Cluster = debName
	}
	return pg, ignored, nil
}

// trustedConfigPlace refuses a configuration file that the postmaster's
// command line names outside the cluster's own places. The command line is
// the cluster owner's to choose: a server started with
// config_file=/etc/some-root-file would otherwise have root edit that file
// (it appends include_dir) and widen what rollback may restore. Inside the
// data directory or /etc/postgresql the owner controls the files anyway;
// anywhere else the inventory must name the file (pg_config_file).
func trustedConfigPlace(file string, dataDirs ...string) error {
	clean := path.Clean(file)
	places := append([]string{"/etc/postgresql"}, dataDirs...)
	for _, dir := range places {
		if dir == "" || !path.IsAbs(dir) {
			continue
		}
		if strings.HasPrefix(clean, path.Clean(dir)+"/") {
			return nil
		}
	}
	return fmt.Errorf("the postmaster was started with config file %s, outside its data directory and /etc/postgresql: set pg_config_file in the inventory to use it", strconv.Quote(clean))
}

var debianConfRE = regexp.MustCompile(`^/etc/postgresql/([^/]+)/([^/]+)/postgresql\.conf$`)

// notPostmaster says why a [postmaster] or [impostor] block is not a
// postmaster pgtune may take as one, or "" when it is: the script sorts
// processes, and this checks its facts again, so that a block only counts
// when both agree.
func notPostmaster(b block) string {
	if b.kind == "impostor" {
		if why := b.get("why"); why != "" {
			return why
		}
		return "unknown"
	}
	pid, uid := b.get("pid"), b.get("owner_uid")
	switch {
	case !isNumber(pid) || b.get("pidfile_pid") != pid:
		return "pidfile_other"
	case !isNumber(uid) || b.get("ruid") != uid || b.get("euid") != uid:
		return "uid"
	case uid == "0":
		return "root"
	}
	return ""
}

// ignoredNote tells, in plain text with every host string quoted, which
// process was ignored and why.
func ignoredNote(b block, why string) string {
	data := strconv.Quote(b.get("data"))
	var reason string
	switch why {
	case "no_data_dir":
		reason = "cannot tell its data directory"
	case "no_pidfile":
		reason = "no postmaster.pid to read in " + data
	case "pidfile_other":
		reason = "the postmaster.pid of " + data + " does not name it"
		if n := b.get("pidfile_pid"); isNumber(n) {
			reason += " (it names pid " + n + ")"
		}
	case "uid":
		reason = fmt.Sprintf("it runs as uid %s, but %s belongs to uid %s",
			numberOr(b.get("euid"), "?"), data, numberOr(b.get("owner_uid"), "?"))
	case "root":
		reason = "it runs as root, which a postmaster never does"
	default:
		reason = "not a postmaster (" + strconv.Quote(why) + ")"
	}
	if (why == "no_data_dir" || why == "no_pidfile") && b.get("reader_uid") != "0" {
		reason += " (not readable without privileges? set become)"
	}
	name := b.get("comm")
	if name == "" {
		name = "postgres"
	}
	return fmt.Sprintf("ignored process %s named %s (uid %s, binary %s): %s; it was not run",
		numberOr(b.get("pid"), "?"), strconv.Quote(name), numberOr(b.get("ruid"), "?"),
		strconv.Quote(b.get("exe")), reason)
}

func isNumber(s string) bool {
	if s == "" || len(s) > 19 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// numberOr returns s when it is a number, else alt: host text that should
// be a number is never shown as it is.
func numberOr(s, alt string) string {
	if isNumber(s) {
		return s
	}
	return alt
}

// describe turns one block into a Postgres.
func describe(b block, source string) (*Postgres, error) {
	data := b.get("realdata")
	if data == "" {
		data = b.get("data")
	}
	if data == "" {
		return nil, fmt.Errorf("postgres pid %s: cannot tell its data directory (not permitted to read /proc/%s/cwd? set become or pg_data)",
			b.get("pid"), b.get("pid"))
	}
	pg := &Postgres{Source: source, DataDir: data, BinDir: b.get("bin"), Owner: b.get("owner")}
	// Directories the owner may name: a line break in one would forge
	// lines of the scripts' reports that print it.
	for _, p := range [][2]string{{"data directory", data}, {"bin directory", pg.BinDir}} {
		if strings.ContainsAny(p[1], "\n\x00") {
			return nil, fmt.Errorf("refusing the cluster's %s %s: it contains a line break", p[0], strconv.QuoteToASCII(p[1]))
		}
	}
	if b.get("pg_version") == "" {
		return nil, fmt.Errorf("%s: not a PostgreSQL data directory (no PG_VERSION, or not readable: set become)", data)
	}
	if b.get("owner_uid") == "0" {
		// The server refuses to run as root, and pgtune runs the
		// cluster's binaries as its owner: never as root for a directory
		// root owns.
		return nil, fmt.Errorf("%s: owned by root, and PostgreSQL never runs as root (chown it to the cluster owner)", data)
	}
	if b.get("bin_refused") == "1" {
		return nil, fmt.Errorf("%s/postgres: not run: it or a directory above it may be changed by a user other than root, and it cannot run as the cluster owner %q (set pg_bin, or become)",
			pg.BinDir, pg.Owner)
	}
	if pg.BinDir == "" || b.get("version") == "" {
		return nil, fmt.Errorf("%s: no postgres binary found for PostgreSQL %s (set pg_bin)", data, b.get("pg_version"))
	}
	ver, major, err := ParseVersion(b.get("version"))
	if err != nil {
		return nil, fmt.Errorf("%s/postgres --version: %w", pg.BinDir, err)
	}
	pg.Version, pg.Major = ver, major
	// postmaster blocks are alive by construction (their postmaster.pid
	// names them); the others say so when postmaster.pid names a live
	// postgres process of the owner.
	if b.kind == "postmaster" || b.get("alive") == "1" {
		pg.Running, pg.PID = true, atoiIn(b.get("pid"), 1, MaxPID)
		pg.Port = atoiIn(strings.TrimSpace(b.get("pidfile_port")), 1, 65535)
		pg.SocketDir = strings.TrimSpace(b.get("pidfile_socket"))
		if kb := atoiIn(b.get("hugetlb_kb"), 0, 1<<40); kb > 0 {
			pg.HugetlbPages = int64(kb) * 1024
		}
		if st, err := strconv.ParseInt(b.get("starttime"), 10, 64); err == nil && st > 0 {
			pg.StartTime = st
		}
		pg.WALReceiver, pg.WALReceiverSockets, pg.WALReceiverRead = parseWALReceiver(b.get("walrecv"))
	}
	return pg, nil
}

// atoiIn parses a host's number, 0 when it is not one or out of [lo, hi].
func atoiIn(s string, lo, hi int) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0
	}
	return n
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\)\s+(\d+)((?:\.\d+){0,2}|devel|beta\d+|rc\d+)\b`)

// ParseVersion reads `postgres --version` output: "postgres (PostgreSQL)
// 15.18 (Debian 15.18-0+deb12u1)" → ("15.18", 15). Before 10 the major
// version had two parts (9.6); Major is then the first (9).
func ParseVersion(s string) (string, int, error) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return "", 0, fmt.Errorf("unrecognised version %q", strings.TrimSpace(s))
	}
	major, _ := strconv.Atoi(m[1])
	return m[1] + m[2], major, nil
}

// configFromArgs reads a postmaster command line for the config file
// (-c config_file=X, --config-file=X, --config_file=X) and -D.
func configFromArgs(args []string) (config, dataDir string) {
	for i := 1; i < len(args); i++ {
		a := args[i]
		next := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "-D":
			dataDir = next()
		case strings.HasPrefix(a, "-D"):
			dataDir = a[2:]
		case a == "-c":
			if v, ok := cutSetting(next(), "config_file"); ok {
				config = v
			}
		case strings.HasPrefix(a, "-c"):
			if v, ok := cutSetting(a[2:], "config_file"); ok {
				config = v
			}
		case strings.HasPrefix(a, "--"):
			if v, ok := cutSetting(a[2:], "config_file"); ok {
				config = v
			}
		}
	}
	return config, dataDir
}

// cutSetting parses name=value, where the name may use - for _.
func cutSetting(s, name string) (string, bool) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || strings.ReplaceAll(k, "-", "_") != name {
		return "", false
	}
	return v, true
}

func absUnder(p, dir string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(dir, p)
}

func samePath(a, b string) bool {
	return a != "" && b != "" && path.Clean(a) == path.Clean(b)
}
