package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pgtune/pgtune/engine/transport"
)

// The state directory holds journals, backups and the host lock. Only root
// may write it: whoever can write there can make rollback restore chosen
// content, or read the backups of root-only files. So it is root-owned,
// mode 0700 at every level pgtune creates, never a symbolic link itself,
// and every level above it is root-owned and not writable by group or
// others (sticky directories such as /tmp excepted: others cannot rename
// root's entries there). It is checked before every use.
//
// A symbolic link above it is accepted only when root owns it (a link
// someone else owns in a sticky directory is theirs to swap for another
// mid-run). The path is then resolved once on the host, every level of
// the resolved path is checked again without following links (none may
// be one), and only the resolved path is used from there on: nothing a
// link later points at is ever written through. The path as given is then
// walked again, every level now there: a level missing at the first walk
// (unchecked) could have been made a link by someone else before the
// resolve.

// stateDirScript checks the state directory $2 as described above; with
// $1 = 1 it creates what is missing (umask 077; a level another session
// made meanwhile is checked as found) and tightens the state directory
// itself to 0700. It prints "ok" and the resolved path on a second line,
// "absent" (without create), or a reason on stdout and exits 3.
const stateDirScript = `set -u
# stat's %F (file type) is translated in other locales: "Verzeichnis"
# would refuse a good directory.
export LC_ALL=C
create=$1 dir=$2
# walk PATH RESOLVED checks PATH level by level, outermost first, without
# following links. On the path as given (RESOLVED=0) it stops at the first
# missing level and accepts root's links above the last level; on the
# resolved path (RESOLVED=1) it makes what is missing and accepts no link.
walk() {
  rest=${1#/} p= resolved=$2
  while [ -n "$rest" ]; do
    p=$p/${rest%%/*}
    case $rest in */*) rest=${rest#*/} last=0;; *) rest= last=1;; esac
    if [ ! -e "$p" ] && [ ! -L "$p" ]; then
      if [ "$resolved" != 1 ]; then missing=1; return 0; fi
      if [ "$create" != 1 ]; then echo absent; exit 0; fi
      if (umask 077 && mkdir -- "$p" 2>/dev/null); then continue; fi
      # Another session to this machine may have made it meanwhile (two
      # inventory names for one host): then it is checked as found.
      if [ ! -e "$p" ] && [ ! -L "$p" ]; then (umask 077 && mkdir -- "$p") || exit 1; continue; fi
    fi
    s=$(stat -c '%u %U %a %F' -- "$p") || exit 1
    uid=${s%% *}; s=${s#* }; user=${s%% *}; s=${s#* }; mode=${s%% *}; kind=${s#* }
    if [ "$kind" = "symbolic link" ]; then
      if [ "$resolved" = 1 ] || [ "$last" = 1 ]; then echo "$p is a symbolic link"; exit 3; fi
      if [ "$uid" != 0 ]; then echo "$p is a symbolic link owned by $user (uid $uid), not root"; exit 3; fi
      continue
    fi
    if [ "$kind" != directory ]; then echo "$p is not a directory ($kind)"; exit 3; fi
    if [ "$uid" != 0 ]; then echo "$p is owned by $user (uid $uid), not root"; exit 3; fi
    m=$((0$mode))
    if [ $((m & 18)) -ne 0 ] && { [ "$last" = 1 ] || [ $((m & 512)) -eq 0 ]; }; then
      echo "$p is writable by group or others (mode $mode)"; exit 3
    fi
    if [ "$resolved" = 1 ] && [ "$last" = 1 ] && [ "$create" = 1 ] && [ $((m & 63)) -ne 0 ]; then chmod 0700 -- "$p" || exit 1; fi
  done
}
walk "$dir" 0
real=$(realpath -m -- "$dir") || exit 1
case $real in
/?*) ;;
*) echo "$dir resolves to $real"; exit 3;;
esac
walk "$real" 1
# A level missing on the first walk was not checked on the path as given:
# someone else may have made it meanwhile (a link in a sticky directory,
# to a place of their choosing). Now that the resolved path exists, the
# given one must reach it through checked levels only.
missing=0
walk "$dir" 0
again=$(realpath -m -- "$dir") || exit 1
if [ "$missing" = 1 ] || [ "$again" != "$real" ]; then echo "$dir changed while it was checked (now $again)"; exit 3; fi
printf 'ok\n%s\n' "$real"
`

// errStateDirAbsent says the state directory does not exist (read-only
// check): pgtune has never changed the host.
var errStateDirAbsent = errors.New("state directory absent")

// checkStateDir checks dir (and, with create, makes it) as described above
// and returns its resolved path, the only one to use afterwards. A refusal
// names the offending path.
func checkStateDir(ctx context.Context, t transport.Transport, dir string, become, create bool) (string, error) {
	if !cleanStateDir(dir) {
		return "", fmt.Errorf("state directory %q: must be a clean absolute path other than /", dir)
	}
	flag := "0"
	if create {
		flag = "1"
	}
	res, err := t.Run(ctx, transport.Command{Op: OpStateDir, Args: []string{"sh", "-c", stateDirScript, "sh", flag, dir}, Become: become})
	out := strings.TrimSpace(string(res.Stdout))
	var exitErr *transport.ExitError
	switch {
	case err == nil && strings.HasPrefix(out, "ok\n"):
		real := strings.TrimPrefix(strings.TrimSuffix(string(res.Stdout), "\n"), "ok\n")
		if !cleanStateDir(real) {
			return "", fmt.Errorf("state directory %s: resolves to %s: refusing to use it", dir, strconv.Quote(transport.Clip(real)))
		}
		return real, nil
	case err == nil && out == "absent" && !create:
		return "", errStateDirAbsent
	case errors.As(err, &exitErr) && exitErr.ExitCode == 3 && out != "":
		return "", fmt.Errorf("state directory %s: %s: refusing to use it", dir, transport.ClipOutput(out))
	case err != nil:
		return "", fmt.Errorf("state directory %s: %w", dir, err)
	}
	return "", fmt.Errorf("state directory %s: unexpected answer %q", dir, transport.Clip(out))
}

// cleanStateDir says whether dir may name a state directory.
func cleanStateDir(dir string) bool {
	return path.IsAbs(dir) && path.Clean(dir) == dir && dir != "/" && !strings.ContainsAny(dir, "\n\x00")
}

// The host lock.
//
// It is an flock(2) on <state dir>/lock held by a remote shell started for
// the whole apply or rollback. The kernel grants an flock to one process
// at a time and drops it when that process dies, so taking over a stale
// lock needs no cleverness: there is nothing to break, the next run's
// flock simply succeeds, and two runs can never both get it. The lock file
// is never removed or replaced (a new inode would be a second lock); the
// holder writes who it is into it once it holds the lock.
//
// Liveness: the holder writes one byte to its stdout every second. Its
// stdout is the SSH session (or, for the local transport, a pipe to the
// controller). When the controller dies or the connection drops, sshd
// closes the session, the next write fails (SIGPIPE/EPIPE), the holder
// exits and the kernel frees the lock; a second run waits lockWait for
// exactly this before it gives up. The controller PID and host name in
// the lock are for people, never used to decide liveness: the controller
// may be another machine. A connection that vanishes without a FIN
// (network partition) holds the lock until sshd gives up on it
// (ClientAliveInterval, TCP keepalive); the message names the holder's
// PID on the host for that case.
//
// A lock whose holder goes away during the run (killed on the host,
// connection lost) cancels the host's work: nothing more is changed
// without the lock.

// lockHeartbeat and lockWait are the holder's write interval and how long
// a second run waits for a lock; lockWait outlasts a few heartbeats, so a
// holder whose controller just died is noticed before a new run gives up.
var (
	lockHeartbeat = "1"
	lockWait      = "3"
)

// lockHolderScript takes the lock ($1) for the run described by $3 and
// answers through the FIFO $2 ("locked", or "busy" and the lock's content,
// or "error: …"), and prints it too, so that the answer of a holder that
// ends is in its output; once it holds the lock it beats until its output
// is gone. fd 9 (the lock) is closed for the sleeps, so only this shell holds
// the lock.
const lockHolderScript = `umask 077
lock=$1 fifo=$2 info=$3 wait=$4 beat=$5
answer() { printf '%s\n' "$1"; printf '%s\n' "$1" > "$fifo"; }
if [ -L "$lock" ]; then answer "error: $lock is a symbolic link"; exit 1; fi
command -v flock >/dev/null 2>&1 || { answer "error: flock(1) is not installed on the host (util-linux)"; exit 1; }
exec 9<>"$lock" || { answer "error: cannot open $lock"; exit 1; }
flock -E 75 -w "$wait" 9; rc=$?
if [ "$rc" = 75 ]; then
  busy=$(cat -- "$lock"); printf 'busy\n%s\n' "$busy"; printf 'busy\n%s\n' "$busy" > "$fifo"; exit 75
fi
if [ "$rc" != 0 ]; then answer "error: flock $lock failed (exit $rc)"; exit 1; fi
printf '%s\nholder=%s\n' "$info" "$$" > "$lock"
answer locked
while printf .; do sleep "$beat" 9>&- >/dev/null 2>&1; done
`

// lockAnswerScript makes the FIFO the holder answers through ($2 = 1), or
// reads the answer and removes it.
const lockAnswerScript = `umask 077
if [ "$2" = 1 ]; then rm -f -- "$1"; exec mkfifo -m 0600 -- "$1"; fi
cat -- "$1"; rm -f -- "$1"
`

// lockInfo is who holds a lock, as written in the lock file.
type lockInfo struct {
	RunID      string    `json:"run_id"`
	PID        int       `json:"pid"`
	Controller string    `json:"controller"`
	Since      time.Time `json:"since"`
}

// LockedError is a host held by another run.
type LockedError struct {
	Info   lockInfo
	Holder string // PID of the holding shell on the host, when known
	Known  bool   // the lock file said who holds it
}

func (e *LockedError) Error() string {
	if !e.Known {
		return "locked by another pgtune run (it has not recorded who it is yet); nothing was changed"
	}
	msg := fmt.Sprintf("locked by run %s (pid %d on controller %s) since %s; nothing was changed",
		e.Info.RunID, e.Info.PID, e.Info.Controller, e.Info.Since.UTC().Format(time.RFC3339))
	if e.Holder != "" {
		msg += fmt.Sprintf(" (if that run is gone, its lock holder is pid %s on the host)", e.Holder)
	}
	return msg
}

// parseLocked reads a lock file's content (after the "busy" line).
func parseLocked(content string) *LockedError {
	first, rest, _ := strings.Cut(content, "\n")
	e := &LockedError{}
	if json.Unmarshal([]byte(first), &e.Info) != nil || e.Info.RunID == "" {
		return e
	}
	e.Info.RunID = printable(e.Info.RunID)
	e.Info.Controller = printable(e.Info.Controller)
	e.Known = true
	if h, ok := strings.CutPrefix(strings.TrimSpace(rest), "holder="); ok {
		if _, err := strconv.Atoi(h); err == nil {
			e.Holder = h
		}
	}
	return e
}

// printable quotes s when it holds anything but plain printable ASCII:
// the lock file is read from the host.
func printable(s string) string {
	for _, r := range s {
		if r < 0x21 || r > 0x7e {
			return strconv.QuoteToASCII(s)
		}
	}
	return s
}

// hostLock is a held lock.
type hostLock struct {
	stop func()           // ends the holder
	done chan struct{}    // closed when the holder's command returned
	res  transport.Result // its output and error, once done
	err  error

	mu       sync.Mutex
	released bool
}

// acquireHostLock takes the lock in dir (which checkStateDir made) for run
// id. It returns a *LockedError when another run holds it past lockWait.
func acquireHostLock(ctx context.Context, t transport.Transport, dir, runID string, become bool) (*hostLock, error) {
	lockFile := path.Join(dir, "lock")
	fifo := path.Join(dir, "lock-"+runID+".fifo")
	if _, err := t.Run(ctx, transport.Command{Op: OpLockFifo, Args: []string{"sh", "-c", lockAnswerScript, "sh", fifo, "1"}, Become: become}); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	host, _ := os.Hostname()
	info, _ := json.Marshal(lockInfo{RunID: runID, PID: os.Getpid(), Controller: host, Since: time.Now().UTC().Truncate(time.Second)})

	hctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	l := &hostLock{stop: stop, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.res, l.err = t.Run(hctx, transport.Command{
			Op:     OpLockHold,
			Args:   []string{"sh", "-c", lockHolderScript, "sh", lockFile, fifo, string(info), lockWait, lockHeartbeat},
			Become: become,
		})
	}()

	// The answer comes through the FIFO; a holder that ends first (busy,
	// or failed) printed it on its output too.
	type answered struct {
		res transport.Result
		err error
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan answered, 1)
	go func() {
		res, err := t.Run(actx, transport.Command{Op: OpLockAnswer, Args: []string{"sh", "-c", lockAnswerScript, "sh", fifo, "0"}, Become: become})
		got <- answered{res, err}
	}()
	var a answered
	ended := false
	select {
	case a = <-got:
	case <-l.done:
		a, ended = answered{l.res, l.err}, true
		cancel()
		<-got
		_, _ = t.Run(ctx, transport.Command{Op: OpLockCleanup, Args: []string{"rm", "-f", "--", fifo}, Become: become})
	}
	answer, rest, _ := strings.Cut(string(a.res.Stdout), "\n")
	switch {
	case answer == "locked" && a.err == nil && !ended:
		return l, nil
	case answer == "busy":
		l.release()
		return nil, parseLocked(rest)
	case strings.HasPrefix(answer, "error: "):
		l.release()
		return nil, fmt.Errorf("lock: %s", strings.TrimPrefix(answer, "error: "))
	}
	l.release()
	err := a.err
	if err == nil {
		err = fmt.Errorf("unexpected answer %q", answer)
	}
	return nil, fmt.Errorf("lock %s: %w", lockFile, err)
}

// release ends the holder and waits until it is gone, so the lock is free
// when release returns.
func (l *hostLock) release() {
	l.mu.Lock()
	l.released = true
	l.mu.Unlock()
	l.stop()
	<-l.done
}

// lost reports the holder's end when it ended before release.
func (l *hostLock) lost() error {
	select {
	case <-l.done:
	default:
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.released {
		return nil
	}
	if l.err == nil {
		return errors.New("the lock holder on the host exited")
	}
	return l.err
}

// lockHost prepares the host's state directory and takes its lock for the
// apply or rollback about to run. The returned context ends if the lock is
// lost; unlock frees it and, if it was lost, says so in the host's error.
func (s *Session) lockHost(ctx context.Context, hr *hostRun) (context.Context, func(), error) {
	dir, become := stateDir(hr.host), hr.host.Conn.Become
	dir, err := checkStateDir(ctx, hr.tr, dir, become, true)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", hr.host.Name, err)
	}
	hr.stateDir = dir
	l, err := acquireHostLock(ctx, hr.tr, dir, s.runner.RunID, become)
	var locked *LockedError
	if errors.As(err, &locked) && locked.Info.RunID == s.runner.RunID {
		// The same run: two inventory hosts are one machine sharing one
		// state directory (and would overwrite each other's journal).
		return nil, nil, fmt.Errorf("%s: %w: another host of this inventory is the same machine with the same state directory %s; give each its own %s",
			hr.host.Name, err, dir, StateDirVar)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", hr.host.Name, err)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	// A lost connection is left to the work's own commands, which fail
	// with it (the host is then unreachable, not failed).
	go func() {
		<-l.done
		if err := l.lost(); err != nil && !errors.Is(err, transport.ErrConnectionLost) {
			cancel(fmt.Errorf("lost the host lock: %w", err))
		}
	}()
	unlock := func() {
		lost := l.lost()
		l.release()
		cancel(nil)
		if lost != nil && hr.err != nil && ctx.Err() == nil && !errors.Is(lost, transport.ErrConnectionLost) {
			hr.err = fmt.Errorf("%w (the host lock was lost: %v; stopped)", hr.err, lost)
		}
	}
	return wctx, unlock, nil
}
