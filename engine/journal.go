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
	RunID   string    `json:"run_id"`
	Host    string    `json:"host"`
	Started time.Time `json:"started"`
	// Kept, when set, says why rollback never undoes this run: its
	// changes stay as they are whatever is rolled back, and --run naming
	// it is refused. A replication cluster's role changes are such a run
	// (KeptRoleChanges): rolling a run's settings back must not move the
	// primary role back, nor leave a member that is a standby now without
	// its standby.signal.
	Kept    string         `json:"kept,omitempty"`
	Entries []JournalEntry `json:"entries"`
}

// KeptRoleChanges is why a run of cluster role changes (Target.
// ClusterPeers with a suffix: a switchover's standby.signal and
// primary_conninfo) is kept.
const KeptRoleChanges = "it holds replication role changes (a switchover): rolling back never moves the primary role back"

// JournalEntry is one recorded change. Its Kind says which fields it
// uses and how it is undone (see kindOf).
type JournalEntry struct {
	Kind string `json:"kind"` // "file", "sysctl", "sysfs", "service", "live" (live.go) or "created" (created.go)
	// Module is the module that made the change; rollback undoes modules
	// in the reverse of the order they ran.
	Module string `json:"module,omitempty"`
	// Path is the file changed (kind file) or the sysfs value written
	// (kind sysfs). Backup is where a file's previous content is copied
	// before it is replaced. Existed says whether there was a file
	// before: an existing file whose backup is absent was never replaced
	// (the copy is made before the rename), so rollback leaves it alone.
	Path    string `json:"path,omitempty"`
	Backup  string `json:"backup,omitempty"`
	Existed bool   `json:"existed,omitempty"`
	// Key is the kernel value changed (kind sysctl); Before is the
	// previous value of a kernel or sysfs value.
	Key    string `json:"key,omitempty"`
	Before string `json:"before,omitempty"`
	// Unit and Action are a service action run (kind service): undoing
	// it runs it again once what it acted on is back.
	Unit   string `json:"unit,omitempty"`
	Action string `json:"action,omitempty"`
	// Sensitive marks a file whose content must never be shown (it holds
	// secrets: Target.WriteSecretFile): rollback's change for it is
	// Sensitive, so no report shows its content or diff. Journals written
	// before the flag existed load with it unset.
	Sensitive bool `json:"sensitive,omitempty"`
	// Settled, on a "created" entry (created.go), says what became of the
	// thing made once the work that made it finished with it: rollback
	// leaves a settled entry alone. Unset, the run stopped in between.
	Settled string `json:"settled,omitempty"`
}

// JournalMark is a point in a run's journal: Target.UndoSince undoes
// what was recorded after it.
type JournalMark int

// NewJournal starts the journal of run id on a host, under stateDir.
func NewJournal(id, host, stateDir string, t transport.Transport, become bool) *Journal {
	return &Journal{JournalRecord: JournalRecord{RunID: id, Host: host, Started: time.Now().UTC()}, dir: stateDir, transport: t, become: become}
}

// NewKeptJournal starts the journal of run id, a run rollback never
// undoes, for the reason why (JournalRecord.Kept).
func NewKeptJournal(id, host, stateDir string, t transport.Transport, become bool, why string) *Journal {
	j := NewJournal(id, host, stateDir, t, become)
	j.Kept = why
	return j
}

// Dir is the run's directory on the host.
func (j *Journal) Dir() string { return path.Join(j.dir, j.RunID) }

// recordFile notes that p is about to change and returns where its current
// content must be backed up. Only the first change of a file in a run is
// recorded: that is the state rollback returns to. A sensitive write marks
// the file's entry sensitive, even when an earlier write recorded it.
func (j *Journal) recordFile(ctx context.Context, module, p string, sensitive bool) (string, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.hasLocked(JournalEntry{Kind: "file", Path: p}) {
		if !sensitive {
			return "", nil
		}
		for i := range j.Entries {
			if e := &j.Entries[i]; e.Kind == "file" && e.Path == p && !e.Sensitive {
				e.Sensitive = true
				return "", j.saveLocked(ctx)
			}
		}
		return "", nil
	}
	backup := path.Join(j.Dir(), "files", p)
	_, err := j.transport.Run(ctx, transport.Command{Op: OpRecordFile, Args: []string{"sh", "-c", recordFileScript, "sh", p, path.Dir(backup)}, Become: j.become})
	var exitErr *transport.ExitError
	existed := err == nil
	if err != nil && !(errors.As(err, &exitErr) && exitErr.ExitCode == 1) {
		return "", fmt.Errorf("journal: %w", err)
	}
	j.Entries = append(j.Entries, JournalEntry{Kind: "file", Module: module, Path: p, Backup: backup, Existed: existed, Sensitive: sensitive})
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

// record adds entries not recorded yet in this run (one record per file,
// key, value or service action: the first is the state undo returns to)
// and saves the journal when it added any.
func (j *Journal) record(ctx context.Context, entries ...JournalEntry) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	added := false
	for _, e := range entries {
		if j.hasLocked(e) {
			continue
		}
		j.Entries = append(j.Entries, e)
		added = true
	}
	if !added {
		return nil
	}
	return j.saveLocked(ctx)
}

func (j *Journal) hasLocked(e JournalEntry) bool {
	for _, o := range j.Entries {
		if o.identity() == e.identity() {
			return true
		}
	}
	return false
}

// mark is the point now reached in the journal.
func (j *Journal) mark() JournalMark {
	j.mu.Lock()
	defer j.mu.Unlock()
	return JournalMark(len(j.Entries))
}

// since returns the entries recorded after m, oldest first.
func (j *Journal) since(m JournalMark) []JournalEntry {
	j.mu.Lock()
	defer j.mu.Unlock()
	if int(m) < 0 || int(m) > len(j.Entries) {
		return nil
	}
	return append([]JournalEntry(nil), j.Entries[m:]...)
}

func (j *Journal) saveLocked(ctx context.Context) error {
	data, err := json.MarshalIndent(j.JournalRecord, "", "  ")
	if err != nil {
		return err
	}
	if !j.dirMade {
		if _, err := j.transport.Run(ctx, transport.Command{Op: OpRunDir, Args: []string{"sh", "-c", runDirScript, "sh", j.Dir()}, Become: j.become}); err != nil {
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
	k := kindOf(e.Kind)
	if k == nil {
		return errors.New("unknown kind")
	}
	if e.Settled != "" && e.Kind != "created" {
		return errors.New("only a created entry is settled")
	}
	return k.check(e, runDir)
}

// describeEntry names an entry for errors; its parts come from the host.
func describeEntry(e JournalEntry) string {
	target := printable(e.Key)
	if k := kindOf(e.Kind); k != nil {
		target = k.describe(e)
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
