package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/pgtune/pgtune/engine/transport"
)

// StateDir is where pgtune keeps per-run journals and backups on each
// host, unless the inventory sets pgtune_state_dir for it.
const StateDir = "/var/lib/pgtune/runs"

// StateDirVar is the inventory var that moves StateDir.
const StateDirVar = "pgtune_state_dir"

// Journal is the write-ahead record of one run on one host: every file
// replaced or created (with a copy of what it replaced) and every kernel
// value set (with the value before). It is saved on the host before each
// change, so a run killed half-way can still be rolled back.
type Journal struct {
	JournalRecord

	dir       string
	mu        sync.Mutex
	transport transport.Transport
	become    bool
	dirMade   bool // the run's directory exists
}

// JournalRecord is a journal as saved on the host.
type JournalRecord struct {
	RunID   string         `json:"run_id"`
	Host    string         `json:"host"`
	Started time.Time      `json:"started"`
	Entries []JournalEntry `json:"entries"`
}

// JournalEntry is one recorded change.
type JournalEntry struct {
	Kind string `json:"kind"` // "file", "sysctl" or "sysfs"
	// Module is the module that made the change; rollback undoes modules
	// in reverse order (overcommit, then pgconf with a restart, then
	// hugepages) so postgres never sits on a pool being taken away.
	Module string `json:"module,omitempty"`
	// Path is the file changed; Backup is where its previous content is
	// copied before it is replaced. Existed says whether there was a file
	// before: an existing file whose backup is absent was never replaced
	// (the copy is made before the rename), so rollback leaves it alone.
	Path    string `json:"path,omitempty"`
	Backup  string `json:"backup,omitempty"`
	Existed bool   `json:"existed,omitempty"`
	// Key and Before are the kernel value changed and its previous value
	// (for kind "sysfs", Path is the file under /sys/ and Before its value).
	Key    string `json:"key,omitempty"`
	Before string `json:"before,omitempty"`
}

// NewJournal starts the journal of run id on a host, under stateDir.
func NewJournal(id, host, stateDir string, t transport.Transport, become bool) *Journal {
	return &Journal{JournalRecord: JournalRecord{RunID: id, Host: host, Started: time.Now().UTC()}, dir: stateDir, transport: t, become: become}
}

// Dir is the run's directory on the host.
func (j *Journal) Dir() string { return path.Join(j.dir, j.RunID) }

// recordFile notes that p is about to change and returns where its current
// content must be backed up. Only the first change of a file in a run is
// recorded: that is the state rollback returns to.
func (j *Journal) recordFile(ctx context.Context, module, p string) (string, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range j.Entries {
		if e.Kind == "file" && e.Path == p {
			return "", nil
		}
	}
	backup := path.Join(j.Dir(), "files", p)
	_, err := j.transport.Run(ctx, transport.Command{Args: []string{"sh", "-c", recordFileScript, "sh", p, path.Dir(backup)}, Become: j.become})
	var exitErr *transport.ExitError
	existed := err == nil
	if err != nil && !(errors.As(err, &exitErr) && exitErr.ExitCode == 1) {
		return "", fmt.Errorf("journal: %w", err)
	}
	j.Entries = append(j.Entries, JournalEntry{Kind: "file", Module: module, Path: p, Backup: backup, Existed: existed})
	return backup, j.saveLocked(ctx)
}

// recordFileScript makes the directory the backup of $1 goes to (every
// level pgtune creates is 0700: backups keep their own mode, and nobody
// but root reaches them) and exits 0 if $1 exists, 1 if not.
const recordFileScript = `umask 077
mkdir -p -- "$2" || exit 2
[ -e "$1" ] || exit 1
`

// runDirScript makes the run's directory, 0700, in the state directory
// that the host lock checked.
const runDirScript = `umask 077; [ -d "$1" ] || mkdir -- "$1"`

func (j *Journal) recordSysctl(ctx context.Context, module string, before map[string]string, keys ...string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	added := false
	for _, key := range keys {
		if j.hasSysctlLocked(key) {
			continue
		}
		j.Entries = append(j.Entries, JournalEntry{Kind: "sysctl", Module: module, Key: key, Before: before[key]})
		added = true
	}
	if !added {
		return nil
	}
	return j.saveLocked(ctx)
}

func (j *Journal) hasSysctlLocked(key string) bool {
	for _, e := range j.Entries {
		if e.Kind == "sysctl" && e.Key == key {
			return true
		}
	}
	return false
}

func (j *Journal) saveLocked(ctx context.Context) error {
	data, err := json.MarshalIndent(j.JournalRecord, "", "  ")
	if err != nil {
		return err
	}
	if !j.dirMade {
		if _, err := j.transport.Run(ctx, transport.Command{Args: []string{"sh", "-c", runDirScript, "sh", j.Dir()}, Become: j.become}); err != nil {
			return fmt.Errorf("journal: %w", err)
		}
		j.dirMade = true
	}
	if err := transport.WriteFile(ctx, j.transport, path.Join(j.Dir(), "journal.json"), append(data, '\n'),
		transport.WriteOptions{Mode: "0600", Become: j.become}); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}

// runIDPattern is what a run id looks like (20261130T190000Z-a1b2c3, or
// any such word): it names a directory, so no slash and no leading dot.
var runIDPattern = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z._-]{0,99}$`)

// ValidRunID reports whether id can name a run (rollback --run).
func ValidRunID(id string) bool { return runIDPattern.MatchString(id) }

// sysctlKeyPattern is a kernel key as sysctl(8) names it.
var sysctlKeyPattern = regexp.MustCompile(`^[a-z0-9_]+(\.[a-z0-9_-]+)+$`)

// validateJournal checks a journal read from the host before rollback acts
// on any of it: its run id is the name of its directory (dirName), every
// entry is well formed (a file's backup is where pgtune keeps it, under
// stateDir), and manages accepts every entry's target. The first problem
// is returned, naming the entry.
func validateJournal(j JournalRecord, dirName, stateDir string, manages func(JournalEntry) error) error {
	if !runIDPattern.MatchString(j.RunID) {
		return fmt.Errorf("run id %s is not a run id", strconv.Quote(j.RunID))
	}
	if j.RunID != dirName {
		return fmt.Errorf("run id %s does not match its directory %s", j.RunID, strconv.Quote(dirName))
	}
	for i, e := range j.Entries {
		err := validEntry(e, path.Join(stateDir, j.RunID))
		if err == nil {
			err = manages(e)
		}
		if err != nil {
			return fmt.Errorf("entry %d (%s): %w", i+1, describeEntry(e), err)
		}
	}
	return nil
}

// validEntry checks one entry's shape; runDir is its run's directory.
func validEntry(e JournalEntry, runDir string) error {
	switch e.Kind {
	case "file":
		if !path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path || hasControl(e.Path) {
			return errors.New("the path is not a clean absolute path")
		}
		if e.Backup != path.Join(runDir, "files", e.Path) {
			return fmt.Errorf("its backup %s is not where pgtune keeps it (%s)", strconv.Quote(e.Backup), path.Join(runDir, "files", e.Path))
		}
		if e.Key != "" || e.Before != "" {
			return errors.New("a file entry with a kernel key or value")
		}
	case "sysctl":
		if !sysctlKeyPattern.MatchString(e.Key) {
			return errors.New("not a kernel key")
		}
		if len(e.Before) > 256 || hasControl(e.Before) {
			return errors.New("the previous value is not a kernel value")
		}
		if e.Path != "" || e.Backup != "" || e.Existed {
			return errors.New("a kernel entry with a file")
		}
	case "sysfs":
		return validSysfsEntry(e)
	default:
		return errors.New("unknown kind")
	}
	return nil
}

// describeEntry names an entry for errors; its parts come from the host.
func describeEntry(e JournalEntry) string {
	target := printable(e.Path)
	if e.Kind != "file" && e.Kind != "sysfs" {
		target = printable(e.Key)
	}
	if e.Kind != "file" && e.Before != "" {
		target += " = " + printable(e.Before)
	}
	return fmt.Sprintf("%s %s by module %s", printable(e.Kind), target, printable(e.Module))
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}
