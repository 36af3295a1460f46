package facts

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine/transport"
)

// discoverScript finds and describes PostgreSQL clusters in one round trip.
// It is fixed text; the inventory overrides arrive as positional
// parameters ($1 pg_data, $2 pg_bin, $3 "only": describe $1 and nothing
// else). Output is blocks, each opened by a [kind] line, of key=value lines:
//
//	[postmaster]  a running postmaster: a postgres process whose parent is not one
//	[override]    the inventory's pg_data
//	[cluster]     a line of Debian's pg_lsclusters
//
// A postmaster's children (backends, workers) are postgres processes too:
// the parent test tells the postmaster apart. comm is read rather than the
// exe link because comm is readable without privileges.
const discoverScript = `export LC_ALL=C
want_data=$1 want_bin=$2 only=$3

procinfo() {
  p=$1
  printf 'pid=%s\n' "$p"
  printf 'exe=%s\n' "$(readlink "/proc/$p/exe" 2>/dev/null)"
  printf 'cwd=%s\n' "$(readlink "/proc/$p/cwd" 2>/dev/null)"
  printf 'stderr=%s\n' "$(readlink "/proc/$p/fd/2" 2>/dev/null)"
  while read -r k v rest; do
    if [ "$k" = HugetlbPages: ]; then printf 'hugetlb_kb=%s\n' "$v"; fi
  done < "/proc/$p/status"
  read -r st < "/proc/$p/stat" || st=
  st=${st##*) }
  set -- $st
  printf 'starttime=%s\n' "${20:-}"
  tr '\000' '\n' < "/proc/$p/cmdline" | sed 's/^/arg=/'
}

is_postgres() {
  c=
  read -r c < "/proc/$1/comm" 2>/dev/null || return 1
  case $c in postgres|postmaster) return 0;; esac
  return 1
}

pginfo() {
  d=$1 b=$2
  printf 'data=%s\n' "$d"
  [ -n "$d" ] || return 0
  if [ -d "$d" ]; then
    printf 'realdata=%s\n' "$(cd -- "$d" 2>/dev/null && pwd -P)"
    printf 'owner=%s\n' "$(stat -c %U -- "$d" 2>/dev/null)"
  fi
  v=
  if [ -f "$d/PG_VERSION" ]; then read -r v < "$d/PG_VERSION"; printf 'pg_version=%s\n' "$v"; fi
  if [ -f "$d/postgresql.conf" ]; then echo 'has_conf=1'; fi
  pid=
  if [ -f "$d/postmaster.pid" ]; then
    n=0
    while IFS= read -r l; do
      n=$((n+1))
      case $n in
        1) pid=$l; printf 'pidfile_pid=%s\n' "$l";;
        4) printf 'pidfile_port=%s\n' "$l";;
        5) printf 'pidfile_socket=%s\n' "$l";;
      esac
    done < "$d/postmaster.pid"
  fi
  if [ -z "$b" ] && [ -n "$v" ] && [ -x "/usr/lib/postgresql/$v/bin/postgres" ]; then b=/usr/lib/postgresql/$v/bin; fi
  if [ -z "$b" ]; then p=$(command -v postgres 2>/dev/null) && b=$(dirname -- "$p"); fi
  if [ -z "$b" ] && command -v pg_config >/dev/null 2>&1; then b=$(pg_config --bindir 2>/dev/null); fi
  printf 'bin=%s\n' "$b"
  if [ -n "$b" ] && [ -x "$b/postgres" ]; then printf 'version=%s\n' "$("$b/postgres" --version 2>/dev/null)"; fi
  case $pid in ''|*[!0-9]*) return 0;; esac
  if [ "$3" = proc ] && is_postgres "$pid"; then echo 'alive=1'; procinfo "$pid"; fi
}

found=
if [ -n "$want_data" ]; then
  echo '[override]'
  pginfo "$want_data" "$want_bin" proc
  found=1
fi
[ "$only" = only ] && exit 0

for s in /proc/[0-9]*/stat; do
  p=${s#/proc/}; p=${p%/stat}
  is_postgres "$p" || continue
  read -r st < "$s" 2>/dev/null || continue
  st=${st##*) }
  set -- $st
  is_postgres "$2" && continue
  echo '[postmaster]'
  procinfo "$p"
  exe=$(readlink "/proc/$p/exe" 2>/dev/null)
  [ -n "$exe" ] || exe=$(tr '\000' '\n' < "/proc/$p/cmdline" | head -n 1)
  case $exe in /*) b=${want_bin:-$(dirname -- "$exe")};; *) b=$want_bin;; esac
  d=$(readlink "/proc/$p/cwd" 2>/dev/null)
  if [ -z "$d" ]; then
    d=$(tr '\000' '\n' < "/proc/$p/cmdline" | awk 'prev == "-D" { print; exit } /^-D./ { print substr($0, 3); exit } { prev = $0 }')
  fi
  pginfo "$d" "$b" noproc
  found=1
done

if command -v pg_lsclusters >/dev/null 2>&1; then
  pg_lsclusters -h 2>/dev/null | while read -r v c port status owner d log rest; do
    echo '[cluster]'
    printf 'cluster=%s\n' "$c"
    printf 'cluster_version=%s\n' "$v"
    printf 'log=%s\n' "$log"
    if [ -z "$found" ]; then pginfo "$d" "/usr/lib/postgresql/$v/bin" proc; else printf 'data=%s\n' "$d"; fi
  done
fi
exit 0
`

// DiscoverPostgres finds the cluster pgtune manages on the host, in one
// round trip: the inventory's pg_data (with pg_bin and pg_config_file)
// when set; else the one running postmaster found in /proc; else the one
// cluster Debian's pg_lsclusters knows.
//
// No cluster at all is not an error: it returns (nil, nil), and the runner
// reports "no PostgreSQL cluster found" while still auditing the kernel.
// Several candidates without pg_data to pick one is an error.
func DiscoverPostgres(ctx context.Context, t transport.Transport, opts Options) (*Postgres, error) {
	if err := checkOverride("pg_data", opts.PGData); err != nil {
		return nil, err
	}
	if err := checkOverride("pg_bin", opts.PGBin); err != nil {
		return nil, err
	}
	if err := checkOverride("pg_config_file", opts.PGConfigFile); err != nil {
		return nil, err
	}
	res, err := t.Run(ctx, transport.Command{
		Args:   []string{"sh", "-c", discoverScript, "sh", opts.PGData, opts.PGBin, ""},
		Become: opts.Become,
	})
	if err != nil {
		return nil, fmt.Errorf("discover postgres: %w", err)
	}
	return choosePostgres(parseBlocks(res.Stdout), opts)
}

// RefreshPostgres re-reads a known cluster (after a restart: new PID, start
// time, huge page use), keeping how it was found.
func RefreshPostgres(ctx context.Context, t transport.Transport, become bool, pg *Postgres) (*Postgres, error) {
	res, err := t.Run(ctx, transport.Command{
		Args:   []string{"sh", "-c", discoverScript, "sh", pg.DataDir, pg.BinDir, "only"},
		Become: become,
	})
	if err != nil {
		return nil, fmt.Errorf("read postgres state: %w", err)
	}
	blocks := parseBlocks(res.Stdout)
	if len(blocks) != 1 || blocks[0].kind != "override" {
		return nil, fmt.Errorf("read postgres state: unexpected output %q", res.Stdout)
	}
	out, err := describe(blocks[0], pg.Source)
	if err != nil {
		return nil, err
	}
	out.ConfigFile, out.Cluster = pg.ConfigFile, pg.Cluster
	return out, nil
}

// checkOverride refuses values that cannot be a path: a newline would end
// a line of the discovery output and could forge a field.
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

func parseBlocks(out []byte) []block {
	var blocks []block
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			blocks = append(blocks, block{kind: line[1 : len(line)-1], kv: map[string]string{}})
			continue
		}
		if len(blocks) == 0 {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
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

func choosePostgres(blocks []block, opts Options) (*Postgres, error) {
	var postmasters, clusters []block
	var override *block
	for i, b := range blocks {
		switch b.kind {
		case "postmaster":
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

	var chosen block
	var source string
	var pm *block // the postmaster serving the chosen data dir, if any
	switch {
	case override != nil:
		chosen, source = *override, "inventory"
		if chosen.get("realdata") == "" {
			return nil, fmt.Errorf("pg_data %s: no such directory (or not readable: set become)", opts.PGData)
		}
		for i, p := range postmasters {
			if samePath(p.get("realdata"), chosen.get("realdata")) || samePath(p.get("data"), opts.PGData) {
				pm = &postmasters[i]
			}
		}
	case len(postmasters) == 1:
		chosen, source, pm = postmasters[0], "postmaster", &postmasters[0]
	case len(postmasters) > 1:
		var dirs []string
		for _, p := range postmasters {
			dirs = append(dirs, fmt.Sprintf("%s (pid %s)", p.get("data"), p.get("pid")))
		}
		sort.Strings(dirs)
		return nil, fmt.Errorf("%d postmasters are running (%s): set pg_data in the inventory to pick one",
			len(postmasters), strings.Join(dirs, ", "))
	case len(clusters) == 1:
		chosen, source = clusters[0], "pg_lsclusters"
	case len(clusters) > 1:
		var names []string
		for _, c := range clusters {
			names = append(names, fmt.Sprintf("%s/%s (%s)", c.get("cluster_version"), c.get("cluster"), c.get("data")))
		}
		return nil, fmt.Errorf("pg_lsclusters lists %d clusters (%s) and none is running: set pg_data in the inventory to pick one",
			len(clusters), strings.Join(names, ", "))
	default:
		return nil, nil
	}

	pg, err := describe(chosen, source)
	if err != nil {
		return nil, err
	}
	if opts.PGBin != "" {
		pg.BinDir = opts.PGBin
	}
	// The active config file: the inventory's; else the one the
	// postmaster was started with; else Debian's; else the data dir's.
	var args []string
	if pm != nil {
		args = pm.args
	}
	cfgFromArgs, dFromArgs := configFromArgs(args)
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
	if m := debianConfRE.FindStringSubmatch(pg.ConfigFile); m != nil {
		pg.Cluster = m[2]
	} else if debName != "" {
		pg.Cluster = debName
	}
	return pg, nil
}

var debianConfRE = regexp.MustCompile(`^/etc/postgresql/([^/]+)/([^/]+)/postgresql\.conf$`)

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
	if b.get("pg_version") == "" {
		return nil, fmt.Errorf("%s: not a PostgreSQL data directory (no PG_VERSION, or not readable: set become)", data)
	}
	if pg.BinDir == "" || b.get("version") == "" {
		return nil, fmt.Errorf("%s: no postgres binary found for PostgreSQL %s (set pg_bin)", data, b.get("pg_version"))
	}
	ver, major, err := ParseVersion(b.get("version"))
	if err != nil {
		return nil, fmt.Errorf("%s/postgres --version: %w", pg.BinDir, err)
	}
	pg.Version, pg.Major = ver, major
	// postmaster blocks are alive by construction; the others say so
	// when postmaster.pid names a live postgres process.
	alive := b.kind == "postmaster" || b.get("alive") == "1"
	if alive {
		pid, _ := strconv.Atoi(b.get("pid"))
		filePID, _ := strconv.Atoi(b.get("pidfile_pid"))
		if b.kind == "postmaster" && filePID != pid {
			// postmaster.pid unreadable or stale: still running, but the
			// port and socket are unknown.
			filePID = pid
		}
		pg.Running, pg.PID = true, pid
		pg.Port, _ = strconv.Atoi(strings.TrimSpace(b.get("pidfile_port")))
		pg.SocketDir = strings.TrimSpace(b.get("pidfile_socket"))
		if kb, err := strconv.ParseInt(b.get("hugetlb_kb"), 10, 64); err == nil {
			pg.HugetlbPages = kb * 1024
		}
		pg.StartTime, _ = strconv.ParseInt(b.get("starttime"), 10, 64)
	}
	return pg, nil
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
