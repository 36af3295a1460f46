package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/pgtune/pgtune/engine/transport"
)

// StateDir is where pgtune keeps per-run journals and backups on each host.
const StateDir = "/var/lib/pgtune/runs"

// Journal is the write-ahead record of one run on one host: every file
// replaced or created (with a copy of what it replaced) and every kernel
// value set (with the value before). It is saved on the host before each
// change, so a run killed half-way can still be rolled back.
type Journal struct {
	RunID   string         `json:"run_id"`
	Host    string         `json:"host"`
	Started time.Time      `json:"started"`
	Entries []JournalEntry `json:"entries"`

	mu        sync.Mutex
	transport transport.Transport
	become    bool
}

// JournalEntry is one recorded change.
type JournalEntry struct {
	Kind string `json:"kind"` // "file" or "sysctl"
	// Path is the file changed; Backup is where its previous content was
	// copied (absent on the host when the file did not exist before).
	Path   string `json:"path,omitempty"`
	Backup string `json:"backup,omitempty"`
	// Key and Before are the kernel value changed and its previous value.
	Key    string `json:"key,omitempty"`
	Before string `json:"before,omitempty"`
}

// NewJournal starts the journal of run id on a host.
func NewJournal(id, host string, t transport.Transport, become bool) *Journal {
	return &Journal{RunID: id, Host: host, Started: time.Now().UTC(), transport: t, become: become}
}

// Dir is the run's directory on the host.
func (j *Journal) Dir() string { return path.Join(StateDir, j.RunID) }

// recordFile notes that p is about to change and returns where its current
// content must be backed up. Only the first change of a file in a run is
// recorded: that is the state rollback returns to.
func (j *Journal) recordFile(ctx context.Context, p string) (string, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range j.Entries {
		if e.Kind == "file" && e.Path == p {
			return "", nil
		}
	}
	backup := path.Join(j.Dir(), "files", p)
	j.Entries = append(j.Entries, JournalEntry{Kind: "file", Path: p, Backup: backup})
	return backup, j.saveLocked(ctx)
}

func (j *Journal) recordSysctl(ctx context.Context, key, before string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, e := range j.Entries {
		if e.Kind == "sysctl" && e.Key == key {
			return nil
		}
	}
	j.Entries = append(j.Entries, JournalEntry{Kind: "sysctl", Key: key, Before: before})
	return j.saveLocked(ctx)
}

func (j *Journal) saveLocked(ctx context.Context) error {
	data, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	if err := transport.WriteFile(ctx, j.transport, path.Join(j.Dir(), "journal.json"), append(data, '\n'),
		transport.WriteOptions{Mode: "0600", Become: j.become}); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}
