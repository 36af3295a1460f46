package pgconf

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
)

// Every script here is fixed text; paths, names and values reach it as
// positional parameters, never spliced into the script.

// asOwnerFn runs "$@" as the cluster owner ($owner): directly when we are
// the owner, with runuser when root, else with sudo -n -u.
const asOwnerFn = `as_owner() {
  if [ "$(id -un)" = "$owner" ]; then "$@"
  elif [ "$(id -u)" = 0 ] && command -v runuser >/dev/null 2>&1; then runuser -u "$owner" -- "$@"
  else sudo -n -u "$owner" -- "$@"; fi
}
`

// readScript prints files ("f:PATH") and *.conf listings of directories
// ("d:PATH"), in argument order:
//
//	F i 1 mode owner group size \n content \n   a readable file
//	F i 0                                       no such file
//	F i 2                                       exists but unreadable
//	D i 1 \n (E name \n)* Z                     a directory
//	D i 0                                       no such directory
const readScript = `export LC_ALL=C
i=0
for a in "$@"; do
  p=${a#?:}
  case $a in
  f:*)
    if [ -f "$p" ] && [ -r "$p" ]; then
      printf 'F %d 1 %s\n' "$i" "$(stat -c '%a %U %G %s' -- "$p")"
      cat -- "$p"
      printf '\n'
    elif [ -e "$p" ]; then printf 'F %d 2\n' "$i"
    else printf 'F %d 0\n' "$i"; fi;;
  d:*)
    if [ -d "$p" ]; then
      printf 'D %d 1\n' "$i"
      for f in "$p"/*.conf; do
        if [ -f "$f" ]; then printf 'E %s\n' "${f##*/}"; fi
      done
      echo Z
    else printf 'D %d 0\n' "$i"; fi;;
  esac
  i=$((i+1))
done
`

// readInto reads the requested files and directories into fs, in one
// round trip.
func readInto(ctx context.Context, t *engine.Target, fs *confFS, want []string) error {
	if len(want) == 0 {
		return nil
	}
	for _, w := range want {
		if strings.ContainsAny(w, "\n\x00") {
			return fmt.Errorf("refusing path %q: contains a line break", w[2:])
		}
	}
	res, err := t.Run(ctx, append([]string{"sh", "-c", readScript, "sh"}, want...)...)
	if err != nil {
		return fmt.Errorf("read configuration files: %w", err)
	}
	return parseRead(res.Stdout, want, fs)
}

func parseRead(out []byte, want []string, fs *confFS) error {
	r := bufio.NewReader(bytes.NewReader(out))
	for range want {
		hdr, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("read configuration files: truncated output")
		}
		f := strings.Fields(hdr)
		if len(f) < 3 {
			return fmt.Errorf("read configuration files: bad header %q", hdr)
		}
		i, err := strconv.Atoi(f[1])
		if err != nil || i < 0 || i >= len(want) {
			return fmt.Errorf("read configuration files: bad header %q", hdr)
		}
		p := want[i][2:]
		switch {
		case f[0] == "F" && f[2] == "1" && len(f) == 7:
			// The size sizes an allocation: it can be no more than the
			// output that is already here.
			size, err := facts.ParseInt("stat size", f[6], 0, int64(len(out)))
			if err != nil {
				return fmt.Errorf("read %s: %w", p, err)
			}
			buf := make([]byte, size+1)
			if _, err := io.ReadFull(r, buf); err != nil {
				return fmt.Errorf("read %s: truncated", p)
			}
			fs.Files[p] = &confFile{Exists: true, Content: buf[:size], Mode: f[3], Owner: f[4], Group: f[5]}
		case f[0] == "F" && f[2] == "0":
			fs.Files[p] = &confFile{}
		case f[0] == "F" && f[2] == "2":
			fs.Files[p] = &confFile{Exists: true, Unreadable: true}
		case f[0] == "D" && f[2] == "1":
			names := []string{}
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return fmt.Errorf("read directory %s: truncated", p)
				}
				l = strings.TrimSuffix(l, "\n")
				if l == "Z" {
					break
				}
				if name, ok := strings.CutPrefix(l, "E "); ok {
					names = append(names, name)
				}
			}
			sort.Strings(names)
			fs.Dirs[p] = names
		case f[0] == "D" && f[2] == "0":
			fs.Dirs[p] = nil
		default:
			return fmt.Errorf("read configuration files: bad header %q", hdr)
		}
	}
	return nil
}

// scratchScript makes a scratch data directory beside the live one:
// PG_VERSION and global/pg_control copied from the data directory, the
// configuration files from the tar archive on stdin, all owned by the
// cluster owner with the 0700 mode the server demands. `postgres -C`
// answers runtime-computed settings there while the live server holds its
// postmaster.pid lock. It prints the directory.
const scratchScript = `set -eu
data=$1 owner=$2
s=$(mktemp -d /tmp/pgtune-scratch.XXXXXX)
trap 'rm -rf -- "$s"' EXIT
mkdir -- "$s/global"
cp -- "$data/PG_VERSION" "$s/PG_VERSION"
cp -- "$data/global/pg_control" "$s/global/pg_control"
tar -x -f - -C "$s" --no-same-owner
chown -R -- "$owner:" "$s"
chmod 0700 -- "$s"
trap - EXIT
printf '%s\n' "$s"
`

// scratch is a scratch data directory on the host.
type scratch struct {
	Dir    string
	Config string // its postgresql.conf
}

// scratchPath is where a configuration file of the host lives inside the
// scratch directory: its absolute path mirrored under f/.
func scratchPath(dir, p string) string { return path.Join(dir, "f", p) }

// makeScratch lays out fs (the planned configuration) in a new scratch
// directory. Include directives are rewritten to point at the scratch
// copies, so the answers reflect the planned files even where a config
// names its includes by absolute path.
func makeScratch(ctx context.Context, t *engine.Target, pg *facts.Postgres, fs *confFS, w *walk, autoConf string) (*scratch, error) {
	// The scratch directory's name is not known until the host makes it,
	// so includes are rewritten relative to the including file instead.
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	addDir := func(d string) error {
		for _, p := range parents(d) {
			if dirs[p] {
				continue
			}
			dirs[p] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: 0o700}); err != nil {
				return err
			}
		}
		return nil
	}
	addFile := func(name string, data []byte) error {
		if err := addDir(path.Dir(name)); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Size: int64(len(data))}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	// Only what the walk read or listed: the files the server would read.
	paths := append([]string{}, w.Read...)
	sort.Strings(paths)
	for _, d := range w.Directives {
		if d.Kind == "include_dir" && fs.Dirs[d.Target] != nil {
			if err := addDir(path.Join("f", d.Target)); err != nil {
				return nil, err
			}
		}
	}
	for _, p := range paths {
		f := fs.Files[p]
		if f == nil || !f.Exists || f.Unreadable {
			continue
		}
		content, err := rewriteIncludes(p, f.Content)
		if err != nil {
			return nil, err
		}
		name := path.Join("f", p)
		if p == autoConf {
			name = "postgresql.auto.conf"
		}
		if err := addFile(name, content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	res, err := t.RunInput(ctx, buf.Bytes(), "sh", "-c", scratchScript, "sh", pg.DataDir, pg.Owner)
	if err != nil {
		return nil, fmt.Errorf("make scratch data directory: %w", err)
	}
	dir := strings.TrimSpace(string(res.Stdout))
	if !strings.HasPrefix(dir, "/tmp/pgtune-scratch.") {
		return nil, fmt.Errorf("make scratch data directory: unexpected output %q", res.Stdout)
	}
	return &scratch{Dir: dir, Config: scratchPath(dir, pg.ConfigFile)}, nil
}

// parents lists d and its parent directories, outermost first ("f",
// "f/etc", ...).
func parents(d string) []string {
	var out []string
	for d != "." && d != "/" && d != "" {
		out = append([]string{d}, out...)
		d = path.Dir(d)
	}
	return out
}

// rewriteIncludes turns every include directive of file p into a path
// relative to p's own directory, so that inside the scratch mirror it
// resolves to the mirrored copy (absolute include paths would otherwise
// reach the live files).
func rewriteIncludes(p string, data []byte) ([]byte, error) {
	entries, err := parseConf(p, data)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(string(data), "\n")
	dir := path.Dir(p)
	for _, e := range entries {
		switch e.Name {
		case "include", "include_if_exists", "include_dir":
		default:
			continue
		}
		target := e.Value
		if !path.IsAbs(target) {
			continue // already relative: resolves inside the mirror
		}
		rel := relPath(dir, path.Clean(target))
		lines[e.Line-1] = e.Name + " = " + quoteConf(rel)
	}
	return []byte(strings.Join(lines, "\n")), nil
}

// relPath returns target relative to dir (both absolute, clean).
func relPath(dir, target string) string {
	ds := strings.Split(strings.Trim(dir, "/"), "/")
	ts := strings.Split(strings.Trim(target, "/"), "/")
	if dir == "/" {
		ds = nil
	}
	i := 0
	for i < len(ds) && i < len(ts) && ds[i] == ts[i] {
		i++
	}
	var parts []string
	for range ds[i:] {
		parts = append(parts, "..")
	}
	parts = append(parts, ts[i:]...)
	if len(parts) == 0 {
		return "."
	}
	return strings.Join(parts, "/")
}

func removeScratch(t *engine.Target, s *scratch) {
	if s == nil || !strings.HasPrefix(s.Dir, "/tmp/pgtune-scratch.") {
		return
	}
	// The run's context may be cancelled already; the scratch must go.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := t.Run(ctx, "rm", "-rf", "--", s.Dir); err != nil && t.Log != nil {
		t.Log.Warn("could not remove scratch data directory", "dir", s.Dir, "err", err)
	}
}

// probeScript runs `postgres -C` on the scratch directory as the owner,
// once per (name, shared_buffers) pair: -C prints only the last setting
// asked, so each needs its own run. An empty shared_buffers asks what the
// files say; a value probes the segment with that size. Output: R name value.
const probeScript = `export LC_ALL=C
owner=$1 pg=$2 s=$3 conf=$4
shift 4
` + asOwnerFn + `cd /
err=$(mktemp)
trap 'rm -f -- "$err"' EXIT
while [ $# -ge 2 ]; do
  n=$1 sb=$2
  shift 2
  if [ -n "$sb" ]; then
    v=$(as_owner "$pg" -D "$s" -c "config_file=$conf" -c "data_directory=$s" -c huge_page_size=0 -c "shared_buffers=$sb" -C "$n" 2>"$err") || { cat -- "$err" >&2; exit 1; }
  else
    v=$(as_owner "$pg" -D "$s" -c "config_file=$conf" -c "data_directory=$s" -C "$n" 2>"$err") || { cat -- "$err" >&2; exit 1; }
  fi
  printf 'R %s %s\n' "$n" "$v"
done
`

type query struct {
	Name          string
	SharedBuffers int64 // bytes; 0: as configured
}

// probe runs the queries in one round trip and returns name → value.
func probe(ctx context.Context, t *engine.Target, pg *facts.Postgres, s *scratch, qs ...query) ([]string, error) {
	args := []string{"sh", "-c", probeScript, "sh", pg.Owner, path.Join(pg.BinDir, "postgres"), s.Dir, s.Config}
	for _, q := range qs {
		sb := ""
		if q.SharedBuffers > 0 {
			sb = strconv.FormatInt(q.SharedBuffers/1024, 10) + "kB"
		}
		args = append(args, q.Name, sb)
	}
	res, err := t.Run(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres -C on the scratch copy: %w", err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimRight(string(res.Stdout), "\n"), "\n") {
		rest, ok := strings.CutPrefix(l, "R ")
		if !ok {
			continue
		}
		_, v, _ := strings.Cut(rest, " ")
		out = append(out, strings.TrimSpace(v))
	}
	if len(out) != len(qs) {
		return nil, fmt.Errorf("postgres -C on the scratch copy: expected %d answers, got %q", len(qs), res.Stdout)
	}
	return out, nil
}

// psqlScript runs one query as the owner over the unix socket.
const psqlScript = `export LC_ALL=C
owner=$1 psql=$2 sock=$3 port=$4 sql=$5
` + asOwnerFn + `cd /
set -- "$psql" -X -A -t -q -v ON_ERROR_STOP=1 -d postgres -c "$sql"
if [ -n "$sock" ]; then set -- "$@" -h "$sock"; fi
if [ -n "$port" ] && [ "$port" != 0 ]; then set -- "$@" -p "$port"; fi
as_owner "$@"
`

// liveSettings reads the running server's settings that pgtune manages.
func liveSettings(ctx context.Context, t *engine.Target, pg *facts.Postgres) (map[string]string, error) {
	const sql = `SELECT name || '=' || setting FROM pg_settings WHERE name IN ` +
		`('shared_buffers', 'huge_pages', 'huge_page_size', 'huge_pages_status', 'block_size', 'shared_memory_size_in_huge_pages')`
	res, err := t.Run(ctx, "sh", "-c", psqlScript, "sh", pg.Owner, path.Join(pg.BinDir, "psql"),
		pg.SocketDir, strconv.Itoa(pg.Port), sql)
	if err != nil {
		return nil, fmt.Errorf("query the running server (port %d): %w", pg.Port, err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(res.Stdout), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
			out[k] = v
		}
	}
	if out["shared_buffers"] == "" || out["block_size"] == "" {
		return nil, fmt.Errorf("query the running server: unexpected answer %q", res.Stdout)
	}
	return out, nil
}

// mkdirScript creates a directory owned by the cluster owner.
const mkdirScript = `set -eu
[ -d "$1" ] && exit 0
mkdir -p -- "$1"
chown -- "$2:" "$1"
chmod 0755 -- "$1"
`
