package pgconf

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/transport"
)

// Every script here is fixed text; paths, names and values reach it as
// positional parameters, never spliced into the script.

// asOwnerFn runs "$@" as the cluster owner ($owner): directly when we are
// the owner, with runuser when root, else with sudo -n -u. Our uid comes
// from rh_ids (facts.SwitchOwnerFn: a builtin read, no process).
// With ao_quick set (reads and sizing: commands that start nothing that
// outlives them), root switches with facts.SwitchOwnerFn's setpriv
// instead; what starts a server (restart.go) keeps runuser and the PAM
// session that applies the owner's limits.
var asOwnerFn = facts.SwitchOwnerFn + asOwnerBody

// asOwnerBody is as_owner alone, for a script that has rh_ids and
// sw_owner already (facts.RunBinFn brings them). With sw_exec=exec (the
// switch is the script's last command) the shell becomes the switch.
const asOwnerBody = `as_owner() {
  rh_ids
  if [ "$rh_me" = 0 ] && [ "$owner" != root ] && command -v runuser >/dev/null 2>&1; then
    if [ -n "${ao_quick:-}" ]; then sw_owner "$@"; else $sw_exec runuser -u "$owner" -- "$@"; fi
  elif [ "$(id -un)" = "$owner" ]; then $sw_exec "$@"
  else $sw_exec sudo -n -u "$owner" -- "$@"; fi
}
`

// ownerScript runs the script $2 with the arguments after it as the
// cluster owner $1, stdin passed through.
var ownerScript = `owner=$1 script=$2 ao_quick=1
shift 2
` + asOwnerFn + `cd /
# The last command: the shell becomes the switch (nothing after it runs).
sw_exec=exec
as_owner sh -c "$script" sh "$@"
`

// runAsOwner runs one of the fixed scripts as the cluster owner.
func runAsOwner(ctx context.Context, t *engine.Target, pg *facts.Postgres, stdin []byte, script string, args ...string) (transport.Result, error) {
	return t.RunInput(ctx, stdin, append([]string{"sh", "-c", ownerScript, "sh", pg.Owner, script}, args...)...)
}

// readScript reads the configuration as the cluster owner: the server's
// own view. What the server cannot read, pgtune does not read either, so
// no root-only file reached through a link can come out of a report. It
// prints, in argument order, one record per argument:
//
//	P i REAL                            an allowed place ("p:PATH"), resolved
//	P i =                               that place, which resolves to itself
//	F i 1 mode owner group REAL \n B64  a readable regular file
//	F i 0                               no such file
//	F i 2 REAL                          exists, but unreadable or not a regular file
//	F i 3 REAL                          a link to nothing the owner can reach
//	D i 1 \n (E name \n)* Z             a directory: its *.conf regular files
//	D i 0                               no such directory
//
// REAL is the base64 of the resolved path when links lead elsewhere ("-"
// when they do not), B64 the content in base64 on one line: nothing a
// file holds can shift the records that follow it. Names with a line
// break are skipped.
const readScript = `export LC_ALL=C
# b64v TEXT sets bv to TEXT in base64, "-" when empty: a process only
# for a path that links elsewhere.
b64v() { if [ -z "$1" ]; then bv=-; else bv=$(printf %s "$1" | base64 -w0); fi; }
# direct PATH: PATH is absolute and clean, and no part of it is a link, so
# readlink -f would print it unchanged (tested with the shell's own test,
# not a readlink process per path).
direct() {
  case $1 in /*) ;; *) return 1;; esac
  case $1/ in *//*|*/./*|*/../*) return 1;; esac
  dq=$1
  while [ -n "$dq" ]; do
    [ -L "$dq" ] && return 1
    dq=${dq%/*}
  done
  return 0
}
nl='
'
# One stat for every readable file ahead of the loop (a stat process per
# file was a third of the read's processes): their modes and owners, a
# line each in order, in sts; rdi lists their indexes. Should stat not
# answer for each (a file gone since), each file asks on its own.
readable() {
  rdi=' ' sts= j=0 n=$#
  for a do
    case $a in f:*) if [ -f "${a#f:}" ] && [ -r "${a#f:}" ]; then rdi="$rdi$j "; set -- "$@" "${a#f:}"; fi;; esac
    j=$((j+1))
  done
  shift "$n"
  if [ $# -gt 0 ]; then sts=$(stat -L -c '%a %U %G' -- "$@" 2>/dev/null) || sts=; fi
}
readable "$@"
# modes sets stl to the next file's line of sts (its own stat without).
modes() {
  if [ -z "$sts" ]; then stl=$(stat -L -c '%a %U %G' -- "$p"); return; fi
  stl=${sts%%"$nl"*}
  case $sts in *"$nl"*) sts=${sts#*"$nl"};; *) sts=;; esac
}
i=0
for a in "$@"; do
  p=${a#?:}
  case $a in
  p:*)
    if [ -e "$p" ] && direct "$p"; then printf 'P %d =\n' "$i"
    else b64v "$(readlink -f -- "$p" 2>/dev/null || true)"; printf 'P %d %s\n' "$i" "$bv"; fi;;
  f:*)
    if direct "$p"; then real=
    else
      real=$(readlink -f -- "$p" 2>/dev/null) || real=$(readlink -- "$p" 2>/dev/null) || real=
      if [ "$real" = "$p" ]; then real=; fi
    fi
    if case $rdi in *" $i "*) true;; *) false;; esac; then
      b64v "$real"
      modes
      printf 'F %d 1 %s %s\n' "$i" "$stl" "$bv"
      base64 -w0 -- "$p" || true
      printf '\n'
    elif [ -e "$p" ]; then b64v "$real"; printf 'F %d 2 %s\n' "$i" "$bv"
    elif [ -L "$p" ]; then b64v "$real"; printf 'F %d 3 %s\n' "$i" "$bv"
    else printf 'F %d 0\n' "$i"; fi;;
  d:*)
    if [ -d "$p" ]; then
      printf 'D %d 1\n' "$i"
      for f in "$p"/*.conf; do
        case ${f##*/} in *"$nl"*) continue;; esac
        if [ -f "$f" ]; then printf 'E %s\n' "${f##*/}"; fi
      done
      echo Z
    else printf 'D %d 0\n' "$i"; fi;;
  esac
  i=$((i+1))
done
`

// Symbolic links in the configuration. The policy, for every file the
// configuration names (postgresql.conf, postgresql.auto.conf, includes,
// conf.d files, the drop-in):
//
//   - a file reached through links is followed to its real file (stat -L)
//     when that is a regular file owned by the cluster owner or root and
//     lies inside an allowed place: the data directory, the directory of
//     postgresql.conf, or /etc/postgresql (each resolved on the host);
//   - pgtune then writes the real file and keeps the link: the link is
//     never replaced by a file;
//   - anything else (another owner, elsewhere, a link to nothing, a file
//     the owner cannot read) is refused, naming the path.
//
// Reads run as the owner whatever the policy says, so a link can at worst
// show pgtune what the owner could read anyway.

// linkPolicy applies the rule above.
type linkPolicy struct {
	Owner  string
	Places []string // resolved allowed directories
}

func (lp linkPolicy) check(p string, f *confFile) error {
	if f.Real == "" && !f.Dangling {
		return nil
	}
	refuse := func(what string) error {
		return fmt.Errorf("%s is reached through a symbolic link to %s, %s: pgtune follows configuration links only to regular files owned by %s or root inside %s; refusing",
			p, f.Real, what, lp.Owner, strings.Join(lp.Places, ", "))
	}
	switch {
	case f.Dangling:
		return refuse("which does not exist or " + lp.Owner + " cannot reach")
	case f.Unreadable:
		return refuse(lp.Owner + " cannot read it as a regular file")
	case f.Owner != lp.Owner && f.Owner != "root":
		return refuse("owned by " + f.Owner)
	}
	for _, place := range lp.Places {
		if place != "" && (f.Real == place || strings.HasPrefix(f.Real, strings.TrimSuffix(place, "/")+"/")) {
			return nil
		}
	}
	return refuse("outside the allowed places")
}

// linkPlaces are the allowed places of the link policy, unresolved: the
// data directory, the main file's directory, /etc/postgresql.
func linkPlaces(dataDir, confDir string) []string {
	return []string{dataDir, confDir, "/etc/postgresql"}
}

// The files of the data directory every read asks for (newCheckRun,
// firstRead).
const (
	autoConfName = "postgresql.auto.conf"
	optsName     = "postmaster.opts"
)

// firstRead is readConfiguration's first request to readScript: the
// main file, auto.conf, the drop-in and its directory, postmaster.opts,
// then the places of the link policy. The module's fact set asks it with
// the gather's placeholders, so it is built from the data directory, the
// main file and its directory as given, never derived from them here: a
// placeholder has no directory to take.
func firstRead(dataDir, config, confDir, dropin string) []string {
	return withPlaces([]string{"f:" + config, "f:" + path.Join(dataDir, autoConfName), "f:" + dropin,
		"d:" + path.Dir(dropin), "f:" + path.Join(dataDir, optsName)}, dataDir, confDir)
}

// readRequest is readScript's request for the files and directories in
// want ("f:PATH", "d:PATH"), the places of the link policy after them.
func readRequest(pg *facts.Postgres, want []string) []string {
	return withPlaces(want, pg.DataDir, path.Dir(pg.ConfigFile))
}

// withPlaces is want with the places of the link policy ("p:PATH") after it.
func withPlaces(want []string, dataDir, confDir string) []string {
	args := slices.Clone(want)
	for _, p := range linkPlaces(dataDir, confDir) {
		args = append(args, "p:"+p)
	}
	return args
}

// readInto reads the requested files and directories into fs, in one
// round trip, as the cluster owner, and applies the link policy.
func readInto(ctx context.Context, t *engine.Target, pg *facts.Postgres, fs *confFS, want []string) error {
	if len(want) == 0 {
		return nil
	}
	return readArgs(ctx, t, pg, fs, readRequest(pg, want))
}

// readArgs runs readScript for args (readRequest), as the cluster owner
// (facts.OwnerRunArgs, as the gather runs firstRead ahead: a dry run
// takes that answer), and applies the link policy to the files.
func readArgs(ctx context.Context, t *engine.Target, pg *facts.Postgres, fs *confFS, args []string) error {
	for _, a := range args {
		if strings.ContainsAny(a, "\n\x00") {
			return fmt.Errorf("refusing path %q: contains a line break", a[2:])
		}
	}
	res, err := t.Run(ctx, facts.OwnerRunArgs(pg.Owner, readScript, args...)...)
	if err != nil {
		return fmt.Errorf("read configuration files as %s: %w", pg.Owner, err)
	}
	places, err := parseRead(res.Stdout, args, fs)
	if err != nil {
		return err
	}
	lp := linkPolicy{Owner: pg.Owner, Places: slices.Compact(places)}
	for _, a := range args {
		if f := fs.Files[a[2:]]; a[0] == 'f' && f != nil {
			if err := lp.check(a[2:], f); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseRead reads readScript's records into fs and returns the resolved
// places. Errors never quote the output: it holds file content.
func parseRead(out []byte, want []string, fs *confFS) ([]string, error) {
	r := bufio.NewReader(bytes.NewReader(out))
	var places []string
	bad := func(i int) error {
		return fmt.Errorf("read configuration files: malformed record %d of %d", i+1, len(want))
	}
	for n := range want {
		hdr, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("read configuration files: truncated output")
		}
		f := strings.Fields(hdr)
		if len(f) < 3 {
			return nil, bad(n)
		}
		i, err := strconv.Atoi(f[1])
		if err != nil || i < 0 || i >= len(want) {
			return nil, bad(n)
		}
		p := want[i][2:]
		switch {
		case f[0] == "P" && f[2] == "=" && len(f) == 3:
			places = append(places, p)
		case f[0] == "P" && len(f) == 3:
			real, err := unb64(f[2])
			if err != nil {
				return nil, bad(n)
			}
			places = append(places, real)
		case f[0] == "F" && f[2] == "1" && len(f) == 7:
			real, err1 := unb64(f[6])
			line, err2 := r.ReadString('\n')
			content, err3 := base64.StdEncoding.DecodeString(strings.TrimSuffix(line, "\n"))
			if err1 != nil || err2 != nil || err3 != nil {
				return nil, fmt.Errorf("read %s: truncated or malformed", p)
			}
			fs.Files[p] = &confFile{Exists: true, Content: content, Mode: f[3], Owner: f[4], Group: f[5], Real: real}
		case f[0] == "F" && f[2] == "0":
			fs.Files[p] = &confFile{}
		case f[0] == "F" && (f[2] == "2" || f[2] == "3") && len(f) == 4:
			real, err := unb64(f[3])
			if err != nil {
				return nil, bad(n)
			}
			fs.Files[p] = &confFile{Exists: f[2] == "2", Unreadable: true, Dangling: f[2] == "3", Real: real}
		case f[0] == "D" && f[2] == "1":
			names := []string{}
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return nil, fmt.Errorf("read directory %s: truncated", p)
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
			return nil, bad(n)
		}
	}
	return places, nil
}

// unb64 decodes a REAL field ("-": empty).
func unb64(s string) (string, error) {
	if s == "-" {
		return "", nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	return string(b), err
}

// scratchArchive lays out fs (the planned configuration) as the tar
// archive the sizing script unpacks in its scratch directory. Include
// directives are rewritten to point at the scratch copies, so the answers
// reflect the planned files even where a config names its includes by
// absolute path.
func scratchArchive(fs *confFS, w *walk, autoConf string) ([]byte, error) {
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
	// global/ for the pg_control the sizing script copies in.
	if err := addDir("global"); err != nil {
		return nil, err
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
			name = autoConfName
		}
		if err := addFile(name, content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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

// psqlScript runs one query as the owner over the unix socket.
var psqlScript = `export LC_ALL=C
owner=$1 psql=$2 sock=$3 port=$4 sql=$5 ao_quick=1
` + asOwnerFn + `cd /
set -- "$psql" ` + facts.PsqlConnect + ` -A -t -q -v ON_ERROR_STOP=1 -c "$sql"
if [ -n "$sock" ]; then set -- "$@" -h "$sock"; fi
if [ -n "$port" ] && [ "$port" != 0 ]; then set -- "$@" -p "$port"; fi
# The last command: the shell becomes the switch (nothing after it runs).
sw_exec=exec
as_owner "$@"
`

// liveSettings reads the running server's settings that pgtune manages.
func liveSettings(ctx context.Context, t *engine.Target, pg *facts.Postgres) (map[string]string, error) {
	res, err := t.Run(ctx, "sh", "-c", psqlScript, "sh", pg.Owner, path.Join(pg.BinDir, "psql"),
		pg.SocketDir, strconv.Itoa(pg.Port), facts.LiveSettingsSQL)
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
		return nil, fmt.Errorf("query the running server: unexpected answer %q", transport.Clip(string(res.Stdout)))
	}
	return out, nil
}
