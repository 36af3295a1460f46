package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
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
	Kind string `json:"kind"` // "file" or "sysctl"
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
	// Key and Before are the kernel value changed and its previous value.
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
	_, err := j.transport.Run(ctx, transport.Command{Args: []string{"test", "-e", p}, Become: j.become})
	var exitErr *transport.ExitError
	existed := err == nil
	if err != nil && !errors.As(err, &exitErr) {
		return "", fmt.Errorf("journal: %w", err)
	}
	backup := path.Join(j.Dir(), "files", p)
	j.Entries = append(j.Entries, JournalEntry{Kind: "file", Module: module, Path: p, Backup: backup, Existed: existed})
	return backup, j.saveLocked(ctx)
}

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
	if err := transport.WriteFile(ctx, j.transport, path.Join(j.Dir(), "journal.json"), append(data, '\n'),
		transport.WriteOptions{Mode: "0600", Become: j.become}); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	return nil
}
