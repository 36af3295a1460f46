package pgconf

import (
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
)

// sizeScript does a whole sizing on the host in one round trip, as the
// cluster owner (runAsOwner: one runuser for everything below, nothing of
// the host's runs as root).
//
// It makes a scratch data directory in $12 (/tmp: see scratchParent),
// mode 0700 as the server demands:
// PG_VERSION and global/pg_control copied from the data directory, the
// planned configuration files and global/ from the tar archive on stdin. `postgres -C`
// answers runtime-computed settings there while the live server holds its
// postmaster.pid lock. Built by the owner, it can hold nothing the owner
// could not read: a PG_VERSION linked to a root-only file fails the copy.
// The directory is removed when the script ends, however it ends.
//
// Then, in order:
//
//	L name=value      the running server's settings (psql, when $psql is set)
//	Q base64          psql failed; its error output
//	R name sb value   postgres -C name, one run per query pair in $@ (-C
//	                  prints only the last setting asked); sb "-": as the
//	                  files say, else shared_buffers=sb on the command line;
//	                  name +pages: see pagesQuery
//	C sb mb pages     with $pool set: the first candidate of fitPool,
//	                  computed here from the answers of the first query
//	                  (the segment at shared_buffers = the pool) and the
//	                  block size, and probed: so pass 1 and pass 2 share
//	                  the round trip and the scratch directory; pages
//	                  computed from mb where pagesFromMB can ($10: the
//	                  huge page size in MiB, 0 when not whole MiB)
//
// The block size comes from the running server ($11 when the caller knows
// it, else psql's answer: a data directory's block size is fixed at
// initdb, the server and the binary agree or the binary refuses the
// directory), else from -C.
const sizeScript = `export LC_ALL=C
data=$1 pg=$2 conf=$3 hps=$4 pool=$5 psql=$6 sock=$7 port=$8 sql=$9 hpmb=${10} blk=${11} tmp=${12}
shift 12
cd /
s=$(mktemp -d "$tmp/pgtune-scratch.XXXXXX") || exit 1
trap 'rm -rf -- "$s"' EXIT
trap 'exit 1' HUP INT TERM
# mktemp -d makes the directory 0700 and the archive brings global/: the
# only processes are tar and one cp. PG_VERSION is one short line, copied
# with the shell's own read and printf.
pv=
tar -x -f - -C "$s" --no-same-owner &&
  { IFS= read -r pv < "$data/PG_VERSION" || [ -n "$pv" ]; } &&
  case $pv in ''|*[!0-9.]*) false;; esac &&
  printf '%s\n' "$pv" > "$s/PG_VERSION" &&
  cp -- "$data/global/pg_control" "$s/global/pg_control" || exit 1
conf=$s/$conf
# num: a decimal number for $((...)): no leading zero (octal there).
num() { case $1 in ''|*[!0-9]*|0?*) return 1;; esac; return 0; }
ask() {
  if [ "$2" != - ]; then
    v=$("$pg" -D "$s" -c "config_file=$conf" -c "data_directory=$s" -c "huge_page_size=$hps" -c "shared_buffers=$2" -C "$1" 2>"$s/.err") || { cat -- "$s/.err" >&2; exit 1; }
  else
    v=$("$pg" -D "$s" -c "config_file=$conf" -c "data_directory=$s" -C "$1" 2>"$s/.err") || { cat -- "$s/.err" >&2; exit 1; }
  fi
}
# pages SB sets v to shared_memory_size_in_huge_pages at shared_buffers
# SB, $mb being shared_memory_size there: computed when pagesFromMB can,
# else asked.
pages() {
  if num "$hpmb" && [ "$hpmb" -gt 0 ] && num "$mb" && [ "$mb" -gt 0 ] && [ $((mb % hpmb)) -ne 0 ]; then v=$((mb / hpmb + 1))
  else ask shared_memory_size_in_huge_pages "$1"; fi
}
if [ -n "$psql" ]; then
  if out=$(
    set -- "$psql" ` + facts.PsqlConnect + ` -A -t -q -v ON_ERROR_STOP=1 -c "$sql"
    if [ -n "$sock" ]; then set -- "$@" -h "$sock"; fi
    if [ -n "$port" ]; then set -- "$@" -p "$port"; fi
    "$@" 2>"$s/.perr"); then
    while IFS= read -r l; do
      printf 'L %s\n' "$l"
      case $l in block_size=*) blk=${l#block_size=};; esac
    done <<EOF
$out
EOF
  else
    printf 'Q %s\n' "$(base64 -w0 < "$s/.perr")"
  fi
fi
seg1= mb=
while [ $# -ge 2 ]; do
  if [ "$1" = +pages ]; then pages "$2"; else ask "$1" "$2"; fi
  if [ "$1" = shared_memory_size ]; then mb=$v; fi
  printf 'R %s %s %s\n' "$1" "$2" "$v"
  if [ -z "$blk" ] && [ "$1" = block_size ]; then blk=$v; fi
  if [ -z "$seg1" ] && [ "$1" = shared_memory_size ]; then seg1=$v; fi
  shift 2
done
if [ -n "$pool" ] && num "$seg1" && num "$blk" && [ "$blk" -gt 0 ]; then
  over=$((seg1 * 1048576 - pool))
  [ "$over" -ge 0 ] || over=0
  sb=$(( (pool - over) / blk * blk ))
  if [ "$sb" -ge $((16 * blk)) ]; then
    ask shared_memory_size "$((sb / 1024))kB"; mb=$v
    pages "$((sb / 1024))kB"
    printf 'C %s %s %s\n' "$sb" "$mb" "$v"
  fi
fi
`

// sizeArgs is a sizing round trip's request.
type sizeArgs struct {
	hps  string // huge_page_size to size in ("0": the kernel's default)
	pool int64  // bytes; > 0: compute and probe fitPool's first candidate
	live bool   // also read the running server's settings
	// hugePage is the huge page size in bytes that hps names, for
	// pagesFromMB (0: unknown, always ask postgres).
	hugePage int64
	// block is the block size when already known (the running server's,
	// with the topology), else 0.
	block   int64
	queries []query // postgres -C runs, in order
}

// pagesQuery asks shared_memory_size_in_huge_pages at the shared_buffers
// of the shared_memory_size query just before it: computed from that
// answer where pagesFromMB can, else a postgres -C run.
const pagesQuery = "+pages"

// query is one postgres -C run.
type query struct {
	Name          string
	SharedBuffers int64 // bytes; 0: as configured
}

// sizeAnswer is what a sizing round trip found out.
type sizeAnswer struct {
	values []string          // the queries' answers, in order
	live   map[string]string // the running server's settings; nil if not asked
	// liveErr is why the running server could not be asked.
	liveErr error
	// cand is the probed first candidate (cand.sb 0: none).
	cand struct{ sb, mb, pages int64 }
}

// sizeOnHost runs one sizing round trip on the planned configuration.
func sizeOnHost(ctx context.Context, t *engine.Target, pg *facts.Postgres, archive []byte, a sizeArgs) (*sizeAnswer, error) {
	hps := a.hps
	if hps == "" {
		hps = "0"
	}
	pool := ""
	if a.pool > 0 {
		pool = strconv.FormatInt(a.pool, 10)
	}
	psql, sock, port := "", "", ""
	if a.live && pg.Running {
		psql, sock = path.Join(pg.BinDir, "psql"), pg.SocketDir
		if pg.Port != 0 {
			port = strconv.Itoa(pg.Port)
		}
	}
	args := []string{pg.DataDir, path.Join(pg.BinDir, "postgres"), path.Join("f", pg.ConfigFile), hps, pool, psql, sock, port, facts.LiveSettingsSQL,
		strconv.FormatInt(hugePageMiB(a.hugePage), 10), blockArg(a.block), scratchParent(ctx)}
	for _, q := range a.queries {
		args = append(args, q.Name, sbArg(q.SharedBuffers))
	}
	res, err := runAsOwner(ctx, t, pg, archive, sizeScript, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres -C on a scratch copy of the planned configuration: %w", err)
	}
	return parseSizeAnswer(res.Stdout, a, pg.Port)
}

// scratchParentKey carries, in a context, the directory the scratch data
// directory is made in instead of /tmp: tests point it at a directory of
// their own, so that what they find there (a leak) is theirs only, not a
// scratch directory of another pgtune running on the machine meanwhile.
type scratchParentKey struct{}

func scratchParent(ctx context.Context) string {
	if dir, ok := ctx.Value(scratchParentKey{}).(string); ok && dir != "" {
		return dir
	}
	return "/tmp"
}

func blockArg(block int64) string {
	if block <= 0 {
		return ""
	}
	return strconv.FormatInt(block, 10)
}

func sbArg(sb int64) string {
	if sb <= 0 {
		return "-"
	}
	return strconv.FormatInt(sb/1024, 10) + "kB"
}

// parseSizeAnswer reads sizeScript's records. Numbers stay text here; the
// caller bounds each where it uses it.
func parseSizeAnswer(out []byte, a sizeArgs, port int) (*sizeAnswer, error) {
	ans := &sizeAnswer{}
	if a.live {
		ans.live = map[string]string{}
	}
	for _, l := range strings.Split(string(out), "\n") {
		tag, rest, _ := strings.Cut(l, " ")
		switch tag {
		case "L":
			if k, v, ok := strings.Cut(strings.TrimSpace(rest), "="); ok && ans.live != nil {
				ans.live[k] = v
			}
		case "Q":
			msg, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(rest))
			ans.liveErr = fmt.Errorf("query the running server (port %d): %s", port, strings.TrimSpace(string(msg)))
		case "R":
			f := strings.SplitN(rest, " ", 3)
			if len(f) == 3 {
				ans.values = append(ans.values, strings.TrimSpace(f[2]))
			}
		case "C":
			f := strings.Fields(rest)
			if len(f) != 3 {
				return nil, fmt.Errorf("postgres -C on the scratch copy: malformed candidate line")
			}
			sb, err1 := facts.ParseInt("candidate shared_buffers", f[0], 1, facts.MaxBytes)
			mb, err2 := facts.ParseInt("postgres -C shared_memory_size", f[1], 0, facts.MaxBytes/mib)
			pages, err3 := facts.ParseInt("postgres -C shared_memory_size_in_huge_pages", f[2], -1, facts.MaxPages)
			for _, err := range []error{err1, err2, err3} {
				if err != nil {
					return nil, err
				}
			}
			ans.cand.sb, ans.cand.mb, ans.cand.pages = sb, mb, pages
		}
	}
	if len(ans.values) != len(a.queries) {
		return nil, fmt.Errorf("postgres -C on the scratch copy: expected %d answers, got %d", len(a.queries), len(ans.values))
	}
	if ans.live != nil && ans.liveErr == nil && (ans.live["shared_buffers"] == "" || ans.live["block_size"] == "") {
		ans.liveErr = fmt.Errorf("query the running server: unexpected answer")
	}
	return ans, nil
}

// pagesFromMB is shared_memory_size_in_huge_pages as PostgreSQL computes
// it (ipci.c: bytes / huge page + 1) from shared_memory_size (ceil of
// bytes / MiB), without another postgres -C run. The bytes lie in
// ((mb-1) MiB, mb MiB]; when mb is not a whole number of huge pages that
// range holds no page boundary and the answer is exact. When it is, the
// answer depends on whether the segment ends exactly on the boundary:
// ok is false and postgres must be asked.
func pagesFromMB(mb, hugePage int64) (pages int64, ok bool) {
	r := hugePageMiB(hugePage)
	if r <= 0 || mb <= 0 || mb%r == 0 {
		return 0, false
	}
	return mb/r + 1, true
}

// hugePageMiB is the huge page size in MiB, 0 when it is not a whole
// number of MiB (arm64's 64 kB pages, say).
func hugePageMiB(hugePage int64) int64 {
	if hugePage <= 0 || hugePage%mib != 0 {
		return 0
	}
	return hugePage / mib
}
