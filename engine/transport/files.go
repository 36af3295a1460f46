package transport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
)

// File operations are built on Run rather than SFTP so that they work the
// same on every transport and under become (sudo), where SFTP cannot follow.
// Paths travel as positional parameters of fixed scripts, never spliced into
// script text.
//
// Who acts. A root process that creates, chmods, chowns or renames files by
// name in a directory someone else can change can be made to act on
// whatever that someone puts under the name (a symbolic link to
// /etc/shadow, say). Each script therefore decides on the host, when it
// runs, who does the work inside the file's directory:
//
//   - root itself, when every directory from / down to it is a real
//     directory (not a link) owned by root, the directory itself writable
//     by root alone, and each one above it writable by root alone or
//     sticky. Checked top-down, every name checked sits in a directory
//     already shown to be root's alone, so nobody but root can change
//     what the check saw before it is used. /etc/sysctl.d and the state
//     directory are such directories: writes there work as they always did.
//   - otherwise the user that controls the directory (WriteOptions.AsUser,
//     the cluster owner when engine.Target acts; else the directory's
//     owner when it is a real directory owned by a user other than root
//     that no link in the path led to: a link someone else made could
//     lead to any user's directory), through runuser or sudo -u. Every step then
//     runs with that user's rights: whatever links or renames the user
//     plays with, the kernel lets the step do only what the user could do
//     themself, so they can only hurt themself. This was chosen over
//     descriptor tricks (O_NOFOLLOW, fchown through a descriptor) because
//     it needs no helper program on the host and its proof is the
//     sentence above.
//   - nobody, when there is no such user (a root-owned directory others
//     can write, a link in a directory others control): the script
//     refuses and says why.
//
// When pgtune is not root on the host (no become, unprivileged login),
// there is nothing to guard and the login user acts.
//
// Backups are written by root into the state directory (root's alone),
// from content read by whoever acts in the source directory, so a backup
// never holds more than that user could read.

const missingExit = 44

// actorFn defines decide, which prints the user to act as inside $dir (an
// empty line: this shell acts itself) or fails with the reason, and run,
// which runs "$@" as that user. decide takes the directories from / down
// to $dir, outermost first, and reads $as. setpriv is preferred over
// runuser: same effect, no PAM session per step.
//
// Our uid (my_uid sets d_me) comes from /proc/self/status, where the
// shell reads it (id was a process per step).
const actorFn = `my_uid() {
  d_me=
  while read -r d_k d_r d_e d_x; do if [ "$d_k" = Uid: ]; then d_me=$d_e; break; fi; done 2>/dev/null < /proc/self/status
  case $d_me in ''|*[!0-9]*) d_me=$(id -u);; esac
}
decide() {
  my_uid
  [ "$d_me" = 0 ] || return 0
  # One line per name that exists, in order, each ending with its name:
  # a name stat could not answer for (gone for a moment) must not let the
  # next line stand in for it. Only names past the deepest one there may
  # be missing (mkdir -p makes them).
  out=$(LC_ALL=C stat -c '%u %a %f %n' -- "$@" 2>/dev/null) || true
  n=0 safe=1 why= pmode=0 luid= lmode= ltype= linked=
  while read -r uid mode hex name; do
    [ -n "$uid$mode$hex$name" ] || continue
    n=$((n+1))
    if [ $n -gt $# ]; then n=$# safe=0 linked=1 why=${why:-"stat answered for more names than asked"}; break; fi
    eval "p=\${$n}"
    num=1
    case $uid in ''|*[!0-9]*) num=0;; esac
    case $mode in ''|*[!0-7]*) num=0;; esac
    case $hex in ''|*[!0-9a-f]*) num=0;; esac
    if [ "$name" != "$p" ] || [ $num = 0 ]; then
      n=$((n-1)) safe=0 linked=1 why=${why:-"$p could not be inspected (missing, or changed meanwhile)"}
      break
    fi
    case $((0x$hex & 61440)) in 16384) type=directory;; 40960) type="symbolic link";; 32768) type="regular file";; *) type="special file";; esac
    luid=$uid lmode=$mode ltype=$type
    if [ "$type" != directory ]; then safe=0 linked=1 why=${why:-"$p is a $type"}
    elif [ "$uid" != 0 ]; then safe=0 why=${why:-"$p belongs to uid $uid"}
    elif [ $((0$pmode & 022)) -ne 0 ] && [ $((0$pmode & 01000)) -eq 0 ]; then safe=0 why=${why:-"$p lies in a directory others can write"}
    fi
    pmode=$mode
  done <<EOF
$out
EOF
  if [ $n -eq 0 ]; then echo "cannot inspect $dir" >&2; return 1; fi
  eval "deep=\${$n}"
  if [ $safe = 1 ] && [ $((0$lmode & 022)) -ne 0 ]; then safe=0 why="$deep is writable by others (mode $lmode)"; fi
  if [ $safe = 1 ]; then return 0; fi
  if [ -n "$as" ]; then printf '%s\n' "$as"; return 0; fi
  # The directory's owner, only where no link led to it: a link in a
  # chain someone controls could lead to any user's directory.
  if [ -z "$linked" ] && [ "$ltype" = directory ] && [ "$luid" != 0 ]; then
    u=$(getent passwd "$luid" | cut -d: -f1)
    if [ -n "$u" ]; then printf '%s\n' "$u"; return 0; fi
  fi
  echo "refusing to act as root in $deep: $why, and no other user controls it" >&2
  return 1
}
as_user() {
  u=$1
  shift
  if [ "$(id -un)" = "$u" ]; then "$@"
  elif command -v setpriv >/dev/null 2>&1; then setpriv --reuid="$u" --regid="$(id -g -- "$u")" --init-groups -- "$@"
  elif command -v runuser >/dev/null 2>&1; then runuser -u "$u" -- "$@"
  else sudo -n -u "$u" -- "$@"; fi
}
run() { if [ -n "$user" ]; then as_user "$user" "$@"; else "$@"; fi; }
`

// chainSetup sets "$@" to the directories from / down to $dir and picks
// the user.
const chainSetup = `set -- /
p= rest=${dir#/}
while [ -n "$rest" ]; do
  p=$p/${rest%%/*}
  set -- "$@" "$p"
  case $rest in */*) rest=${rest#*/};; *) rest=;; esac
done
user=$(decide "$@")
`

// emitScript, run by the acting user, prints "B mode uid:gid" and the
// content of the file $1 (to be kept as a backup), or "N" when there is
// no such file. It refuses anything but a regular file.
const emitScript = `if [ ! -e "$1" ]; then echo N; exit 0; fi
if [ ! -f "$1" ]; then echo "$1 is not a regular file" >&2; exit 1; fi
printf 'B %s\n' "$(stat -L -c '%a %u:%g' -- "$1")"
cat -- "$1"
`

// maxBackup bounds the file a backup copies: rollback reads a backup back
// as one command's output, capped as much, and a file the owner controls
// (a sparse one reads as any size) must not fill the state directory.
const maxBackup = DefaultMaxOutput

// keepFn defines emit_to, which runs "$@" (as the acting user) with its
// output cut past maxBackup bytes into $raw (made new) and fails when the
// command failed or printed more; and keep, which turns what emitScript
// printed into $raw into the backup $backup, mode and owner kept, and
// sets kept=1 (kept=0 when there was no file). This shell writes them:
// the state directory is root's alone. Call both as plain commands, so
// set -e stops the script on any failure before the file it backs up is
// replaced. Their files are made new (set -C after rm -f), never written
// through a name found there.
//
// Where another user acts, the mode and owner are that user's word: the
// owner must be that user (the write replaced the file as them, and
// could, so it was theirs: chown --reference fails otherwise), and only
// the permission bits are kept; a backup root-owned, or setuid, at the
// user's say-so would stop rollback's write as that user, or worse.
var keepFn = `kmax=` + strconv.Itoa(maxBackup) + `
emit_to() {
  rm -f -- "$raw" "$raw.rc"
  (umask 077; set -C
   { et=0; run "$@" || et=$?; echo "$et" > "$raw.rc"; } | head -c $((kmax+257)) > "$raw")
  et=$(cat -- "$raw.rc")
  rm -f -- "$raw.rc"
  # The copy and a line of mode and owner before it.
  if [ "$(wc -c < "$raw")" -gt $((kmax+256)) ]; then too_large; fi
  [ "$et" = 0 ]
}
too_large() {
  echo "$path is larger than $((kmax>>20)) MiB: not keeping a copy of it, and so not changing it" >&2
  return 1
}
keep() {
  kept=0
  meta=$(head -n 1 -- "$raw")
  case $meta in
  "B "*) ;;
  *) rm -f -- "$raw"; return 0;;
  esac
  m=${meta#B }
  km=${m%% *} ko=${m#* }
  case $km in ''|*[!0-7]*) echo "$path: its mode reads $km" >&2; return 1;; esac
  case $ko in [0-9]*:[0-9]*) ;; *) echo "$path: its owner reads $ko" >&2; return 1;; esac
  case ${ko#*:} in *[!0-9]*) echo "$path: its owner reads $ko" >&2; return 1;; esac
  if [ -n "$user" ]; then
    if [ "${ko%%:*}" != "$(id -u -- "$user")" ]; then
      echo "$path: $user, who acts in its directory, says it belongs to uid ${ko%%:*}: not keeping that copy" >&2
      return 1
    fi
    km=$(printf '%o' $((0$km & 0777)))
  fi
  rm -f -- "$raw.c"
  (umask 077; set -C; tail -n +2 -- "$raw" > "$raw.c")
  rm -f -- "$raw"
  if [ "$(wc -c < "$raw.c")" -gt "$kmax" ]; then rm -f -- "$raw.c"; too_large; fi
  chmod -- "$km" "$raw.c"
  chown -- "$ko" "$raw.c"
  sync -- "$raw.c"
  mv -f -- "$raw.c" "$backup"
  kept=1
}
`

// prelude reads the arguments (vars names $path, $as, ...), defines the
// extra functions given and decides who acts.
func prelude(vars string, funcs ...string) string {
	return "set -eu\ncd /\n" + vars + "\ndir=${path%/*}\ndir=${dir:-/}\n" + actorFn + strings.Join(funcs, "") + chainSetup
}

var readScript = prelude(`path=$1 as=${2-}`) +
	`if [ -z "$user" ]; then
  if [ ! -e "$path" ]; then exit 44; fi
  exec cat -- "$path"
fi
run sh -c 'if [ ! -e "$1" ]; then exit 44; fi; exec cat -- "$1"' sh "$path"
`

// readAsScript reads $path as $as alone (as root, through as_user; as
// ourselves when we are not root, or $as is root or empty): whatever the
// directories, the read gets only what that user may read.
var readAsScript = "set -eu\ncd /\npath=$1 as=$2\n" + actorFn + `my_uid
if [ "$d_me" != 0 ] || [ -z "$as" ] || [ "$as" = root ]; then
  if [ ! -e "$path" ]; then exit 44; fi
  exec cat -- "$path"
fi
as_user "$as" sh -c 'if [ ! -e "$1" ]; then exit 44; fi; exec cat -- "$1"' sh "$path"
`

// ReadFileAs is ReadFile done as user (a name), whatever the directories:
// for a path a host named that root must not read for it.
func ReadFileAs(ctx context.Context, t Transport, path, user string, become bool) ([]byte, error) {
	return readWith(ctx, t, readAsScript, path, user, become)
}

// ReadFile returns the content of path on the host. A missing file is
// reported as an error wrapping os.ErrNotExist. In a directory someone
// other than root controls, the file is read as that user (see above).
func ReadFile(ctx context.Context, t Transport, path string, become bool) ([]byte, error) {
	return ReadFileActing(ctx, t, path, "", become)
}

// ReadFileActing is ReadFile with as the user who reads where root does
// not act itself (WriteOptions.AsUser).
func ReadFileActing(ctx context.Context, t Transport, path, as string, become bool) ([]byte, error) {
	return readWith(ctx, t, readScript, path, as, become)
}

// readWith runs a read script (readScript, readAsScript) for path and
// user.
func readWith(ctx context.Context, t Transport, script, path, user string, become bool) ([]byte, error) {
	if err := checkPath(path); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	res, err := t.Run(ctx, Command{Op: OpReadFile, Args: []string{"sh", "-c", script, "sh", path, user}, Become: become})
	var exitErr *ExitError
	if errors.As(err, &exitErr) && exitErr.ExitCode == missingExit {
		return nil, fmt.Errorf("read %s: %w", path, os.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return res.Stdout, nil
}

// prepScript, run by the acting user, makes the directory if missing,
// puts stdin in the new temporary file $tmp (noclobber: O_EXCL), checks
// its size, gives it the mode and owner (given, or those of the file it
// replaces), syncs it, and when asked emits the file it replaces for the
// backup. A connection that drops mid-transfer ends stdin early, and cat
// cannot tell: renaming a short file would be a half-written one.
const prepScript = `set -eu
dir=$1 tmp=$2 path=$3 size=$4 mode=$5 owner=$6 emit=$7 ownedby=${8-}
if [ -n "$ownedby" ]; then
  if [ -L "$path" ] || [ ! -f "$path" ]; then echo "$path is not a regular file: not replacing it" >&2; exit 1; fi
  fo=$(stat -c %U -- "$path")
  if [ "$fo" != "$ownedby" ]; then echo "$path belongs to $fo, not $ownedby: not replacing it" >&2; exit 1; fi
fi
if [ ! -d "$dir" ]; then mkdir -p -- "$dir"; fi
(umask 077; set -C; cat > "$tmp")
got=$(wc -c < "$tmp")
if [ "$got" -ne "$size" ]; then echo "received $got of $size bytes; $path left unchanged" >&2; exit 1; fi
if [ -e "$path" ]; then
  chmod --reference="$path" -- "$tmp"
  if ! chown --reference="$path" -- "$tmp" 2>/dev/null; then
    echo "$path belongs to $(stat -L -c %U:%G -- "$path"), which $(id -un) (who acts in its directory) cannot give the new file; not replacing it" >&2
    exit 1
  fi
elif [ -z "$mode" ]; then
  chmod 0644 -- "$tmp"
fi
if [ -n "$mode" ]; then chmod -- "$mode" "$tmp"; fi
if [ -n "$owner" ]; then chown -- "$owner" "$tmp"; fi
sync -- "$tmp"
if [ -n "$emit" ]; then sh -c "$emit" sh "$path"; fi
`

// writeScript replaces $path atomically: the new content goes to a
// temporary file in the same directory (mktemp names it, the acting user
// creates it), is fsynced, takes the mode and owner, and is renamed over
// the target (mv -T: never into a directory put in its place); the
// directory is fsynced last. When $backup is set, the file being replaced
// is first copied there (mode and owner kept), so a run can be rolled
// back. A kill at any point leaves either the old file or the new one,
// plus at most a stray .pgtune-* temporary that the next write ignores.
// Every step inside the target's directory is done by the user decide
// picks, in two steps (prepare, then rename) with the backup between.
var writeScript = prelude(`path=$1 mode=$2 owner=$3 backup=$4 size=$5 as=${6-} prep=${7-} emit=${8-} ownedby=${9-}`, keepFn) + `tmp=$(mktemp -u -- "$dir/.pgtune-XXXXXX")
raw=/dev/null
if [ -n "$backup" ]; then mkdir -p -- "${backup%/*}"; raw=$backup.tmp; rm -f -- "$raw"; else emit=; fi
trap 'run rm -f -- "$tmp"; [ "$raw" = /dev/null ] || rm -f -- "$raw" "$raw.rc" "$raw.c"' EXIT
if [ -n "$backup" ]; then
  emit_to sh -c "$prep" sh "$dir" "$tmp" "$path" "$size" "$mode" "$owner" "$emit" "$ownedby"
  keep
else
  run sh -c "$prep" sh "$dir" "$tmp" "$path" "$size" "$mode" "$owner" "" "$ownedby" > /dev/null
fi
run sh -c 'mv -fT -- "$1" "$2" && sync -- "$3"' sh "$tmp" "$path" "$dir"
trap - EXIT
`

// WriteOptions says how WriteFile lays the new file down.
type WriteOptions struct {
	// Mode is an octal mode such as "0644"; empty keeps the replaced
	// file's mode (0644 for a new file).
	Mode string
	// Owner is "user" or "user:group"; empty keeps the replaced file's.
	Owner string
	// Backup, when set, is where the replaced file is copied first.
	Backup string
	// AsUser is who writes when the directory is not root's alone (the
	// cluster owner, for PostgreSQL's files); empty: the directory's
	// owner.
	AsUser string
	// OwnedBy, when set, is the user the file replaced must belong to, a
	// regular file (not a link) that exists: checked by whoever acts, in
	// the step that replaces it. For a path a host named (Patroni's
	// config, from a command line the cluster owner controls): root then
	// rewrites only what that user could rewrite anyway.
	OwnedBy string
	Become  bool
}

// WriteFile atomically replaces path on the host with data.
func WriteFile(ctx context.Context, t Transport, path string, data []byte, opts WriteOptions) error {
	if err := checkPath(path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if data == nil {
		data = []byte{}
	}
	_, err := t.Run(ctx, Command{
		Op: OpWriteFile,
		Args: []string{"sh", "-c", writeScript, "sh", path, opts.Mode, opts.Owner, opts.Backup,
			strconv.Itoa(len(data)), opts.AsUser, prepScript, emitScript, opts.OwnedBy},
		Stdin:  data,
		Become: opts.Become,
	})
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// removeScript deletes $path (rm -f -- never follows a link), after
// keeping it at $backup when that is set.
var removeScript = prelude(`path=$1 backup=$2 as=${3-} emit=${4-}`, keepFn) + `if [ -n "$backup" ]; then
  mkdir -p -- "${backup%/*}"
  raw=$backup.tmp
  trap 'rm -f -- "$raw" "$raw.rc" "$raw.c"' EXIT
  emit_to sh -c "$emit" sh "$path"
  keep
  trap - EXIT
  if [ "$kept" = 0 ]; then exit 0; fi
fi
run sh -c 'if [ -e "$1" ]; then rm -f -- "$1" && sync -- "$2"; fi' sh "$path" "$dir"
`

// RemoveFile deletes path, keeping a copy at backup when that is set.
// A missing file is not an error. In a directory that is not root's
// alone, as removes it, else its owner (see above).
func RemoveFile(ctx context.Context, t Transport, path, backup, as string, become bool) error {
	if err := checkPath(path); err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	_, err := t.Run(ctx, Command{Op: OpRemoveFile, Args: []string{"sh", "-c", removeScript, "sh", path, backup, as, emitScript}, Become: become})
	if err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// mkdirScript makes $path (and missing parents) for $owner: as the owner
// where its parent is not root's alone, else as root, handing the new
// directory over with chown -h (it sits in a directory only root can
// change, and -h follows no link).
var mkdirScript = prelude(`path=$1 owner=$2 as=$2`) + `if [ -d "$path" ]; then exit 0; fi
if [ -n "$user" ]; then run mkdir -p -m 0755 -- "$path"
else mkdir -p -m 0755 -- "$path"; chown -h -- "$owner:" "$path"; fi
`

// MakeDir creates directory p for owner (mode 0755) unless it exists.
func MakeDir(ctx context.Context, t Transport, p, owner string, become bool) error {
	if err := checkPath(p); err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	if _, err := t.Run(ctx, Command{Op: OpMakeDir, Args: []string{"sh", "-c", mkdirScript, "sh", p, owner}, Become: become}); err != nil {
		return fmt.Errorf("create %s: %w", p, err)
	}
	return nil
}

// checkPath accepts absolute, clean paths of a file (not /).
func checkPath(p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p || p == "/" || strings.ContainsRune(p, 0) {
		return errors.New("not an absolute, clean file path")
	}
	return nil
}
