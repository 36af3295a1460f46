package engine

// UndoEarly is implemented by modules whose changes must be undone before
// every other module's in a rollback, whatever order they ran in: a
// service unit's drop-in that ran early, while a later module's rollback
// hook restarts that service, which must then start under the restored
// unit. Undone in plain reverse order, the drop-in went after the restart,
// and the new process kept what the drop-in gave it (seen on a Debian box).
type UndoEarly interface {
	UndoEarly() bool
}

// undoEarlyFirst moves the entries of early modules to the front,
// keeping the order within each group.
func undoEarlyFirst(entries []JournalEntry, early map[string]bool) []JournalEntry {
	if len(early) == 0 {
		return entries
	}
	out := make([]JournalEntry, 0, len(entries))
	for _, e := range entries {
		if early[e.Module] {
			out = append(out, e)
		}
	}
	for _, e := range entries {
		if !early[e.Module] {
			out = append(out, e)
		}
	}
	return out
}
