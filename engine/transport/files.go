package transport

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// File operations are built on Run rather than SFTP so that they work the
// same on every transport and under become (sudo), where SFTP cannot follow.
// Paths travel as positional parameters of fixed scripts, never spliced into
// script text.

const missingExit = 44

const readScript = `if [ ! -e "$1" ]; then exit 44; fi; exec cat -- "$1"`

// ReadFile returns the content of path on the host. A missing file is
// reported as an error wrapping os.ErrNotExist.
func ReadFile(ctx context.Context, t Transport, path string, become bool) ([]byte, error) {
	res, err := t.Run(ctx, Command{Args: []string{"sh", "-c", readScript, "sh", path}, Become: become})
	var exitErr *ExitError
	if errors.As(err, &exitErr) && exitErr.ExitCode == missingExit {
		return nil, fmt.Errorf("read %s: %w", path, os.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return res.Stdout, nil
}

// writeScript replaces $1 atomically: the new content goes to a temporary
// file in the same directory, is fsynced, takes the mode and owner (given,
// or those of the file it replaces), and is renamed over the target; the
// directory is fsynced last. When $4 is set, the file being replaced is
// first copied there (mode and owner kept), so a run can be rolled back.
// A kill at any point leaves either the old file or the new one, plus at
// most a stray .pgtune-* temporary that the next write ignores.
const writeScript = `set -eu
path=$1 mode=$2 owner=$3 backup=$4 size=$5
dir=$(dirname -- "$path")
[ -d "$dir" ] || mkdir -p -- "$dir"
tmp=$(mktemp -- "$dir/.pgtune-XXXXXX")
trap 'rm -f -- "$tmp"' EXIT
cat > "$tmp"
# A connection that drops mid-transfer ends stdin early, and cat cannot
# tell: renaming a short file would be a half-written one.
got=$(wc -c < "$tmp")
if [ "$got" -ne "$size" ]; then echo "received $got of $size bytes; $path left unchanged" >&2; exit 1; fi
if [ -e "$path" ]; then
  chmod --reference="$path" -- "$tmp"
  chown --reference="$path" -- "$tmp"
  if [ -n "$backup" ]; then
    mkdir -p -- "$(dirname -- "$backup")"
    cp -p -- "$path" "$backup.tmp"
    sync -- "$backup.tmp"
    mv -f -- "$backup.tmp" "$backup"
  fi
elif [ -z "$mode" ]; then
  chmod 0644 -- "$tmp"
fi
if [ -n "$mode" ]; then chmod -- "$mode" "$tmp"; fi
if [ -n "$owner" ]; then chown -- "$owner" "$tmp"; fi
sync -- "$tmp"
mv -f -- "$tmp" "$path"
trap - EXIT
sync -- "$dir"
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
	Become bool
}

// WriteFile atomically replaces path on the host with data.
func WriteFile(ctx context.Context, t Transport, path string, data []byte, opts WriteOptions) error {
	if data == nil {
		data = []byte{}
	}
	_, err := t.Run(ctx, Command{
		Args:   []string{"sh", "-c", writeScript, "sh", path, opts.Mode, opts.Owner, opts.Backup, strconv.Itoa(len(data))},
		Stdin:  data,
		Become: opts.Become,
	})
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// RemoveFile deletes path, keeping a copy at backup when that is set.
// A missing file is not an error.
func RemoveFile(ctx context.Context, t Transport, path, backup string, become bool) error {
	const script = `set -eu
[ -e "$1" ] || exit 0
if [ -n "$2" ]; then mkdir -p -- "$(dirname -- "$2")"; cp -p -- "$1" "$2"; sync -- "$2"; fi
rm -f -- "$1"
sync -- "$(dirname -- "$1")"
`
	_, err := t.Run(ctx, Command{Args: []string{"sh", "-c", script, "sh", path, backup}, Become: become})
	if err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}
