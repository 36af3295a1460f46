package rollout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/report"
)

// Host states in the run state file.
const (
	Verified       = "verified"        // applied (or nothing to apply) and verified
	PendingRestart = "pending_restart" // verified, a restart left for later by policy
	Failed         = "failed"          // failed or unreachable: resume re-checks it
	NotReached     = "not_reached"     // never touched: the rollout stopped first
	InProgress     = "in_progress"     // its batch was being applied when the state was written
)

// Run statuses.
const (
	Running     = "running"
	Interrupted = "interrupted" // Ctrl-C (or killed: the status stays running)
	Stopped     = "stopped"     // the failure budget or an all-failed batch
	// Partial: the attempt ran to its end over part of the run's hosts
	// (a resume with a narrower --limit, hosts gone from the inventory);
	// hosts of the run are left to do, and --resume picks it again.
	Partial  = "partial"
	Finished = "finished" // every host of the run reached: verified, or failed (--resume RUN retries those)
)

// State is one rollout as the controller remembers it, so that an
// interrupted run can be resumed. Changes in it went through the report's
// masking: no secret reaches the file.
type State struct {
	Version int       `json:"version"`
	ID      string    `json:"id"` // the first attempt's run id
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	Status  string    `json:"status"`
	Reason  string    `json:"reason,omitempty"`
	// What the run was started with; --resume uses it when the command
	// line does not say otherwise.
	Inventory      string `json:"inventory,omitempty"`
	Playbook       string `json:"playbook,omitempty"`
	PlaybookSHA256 string `json:"playbook_sha256"`
	Limit          string `json:"limit,omitempty"`
	Shard          string `json:"shard,omitempty"`
	// ExtraVarsFingerprint fingerprints the run's -e vars ("" without -e;
	// argon2id, see extraVarsSum): a resume with other vars is refused.
	// Never the vars themselves: they may hold secrets.
	ExtraVarsFingerprint string `json:"extra_vars_fingerprint,omitempty"`
	// InventoryFingerprint fingerprints the inventory as the run loaded
	// it (hosts, groups, vars, connection settings; argon2id like the -e
	// vars, as the vars may hold passwords): a resume that takes the
	// inventory from the run notices it was edited since ("" in a run
	// started before pgtune kept it).
	InventoryFingerprint string `json:"inventory_fingerprint,omitempty"`
	// Flags are the rollout flags the run was started with (serial,
	// max_fail_percentage, any_errors_fatal, pause_between_batches):
	// a resume keeps the same batches and budget.
	Flags map[string]string `json:"flags,omitempty"`
	// Attempts are the first run and every resume: each has its own run
	// id, the name of its journals on the hosts (what rollback --run takes).
	Attempts []Attempt   `json:"attempts"`
	Hosts    []HostState `json:"hosts"`

	path string
	// unkept: the state directory is unsafe (Prepare); the state lives in
	// memory only, and Save and Lock do nothing.
	unkept bool
}

// Attempt is one apply of the rollout.
type Attempt struct {
	RunID   string    `json:"run_id"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	Status  string    `json:"status"`
}

// HostState is one host's place in the rollout.
type HostState struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// RunID is the attempt that last acted on the host.
	RunID       string `json:"run_id,omitempty"`
	Batch       int    `json:"batch,omitempty"`
	Error       string `json:"error,omitempty"`
	Unreachable bool   `json:"unreachable,omitempty"`
	// Cluster is the system identifier of the host's replication cluster
	// when it was last planned in one: a resume keeps its cluster held for
	// a member that failed even when that member cannot be reached now.
	Cluster string `json:"cluster,omitempty"`
	// Planned is the plan the host was applied from; Applied what was
	// changed.
	Planned []report.Change `json:"planned,omitempty"`
	Applied []report.Change `json:"applied,omitempty"`
}

// Done reports whether a resume leaves the host alone.
func (h HostState) Done() bool { return h.State == Verified || h.State == PendingRestart }

// Dir is where run state files live: $XDG_STATE_HOME/pgtune/runs, else
// ~/.local/state/pgtune/runs.
func Dir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "pgtune", "runs"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("run state: %w", err)
	}
	return filepath.Join(home, ".local", "state", "pgtune", "runs"), nil
}

// NewState starts the state of a new rollout in dir.
func NewState(dir, id string, now time.Time) *State {
	return &State{Version: 1, ID: id, Created: now.UTC(), Status: Running, path: filepath.Join(dir, id+".json")}
}

// Path is the state file.
func (s *State) Path() string { return s.path }

// Kept reports whether the state is written to its file (see Prepare).
func (s *State) Kept() bool { return !s.unkept }

// Lock takes the run for this process until release: a second pgtune
// continuing the same run at once (a --resume while the first still
// runs) is refused, not let loose on the same hosts. The lock is the
// kernel's (flock), so it goes with a killed process. The caller takes
// it before it reads the state it acts on (Resume again under it).
//
// release removes the lock file, so that runs leave none behind. That is
// safe only with both halves of the protocol: the file is removed while
// it is still locked, and a locker counts its lock only when the file it
// locked is still the one at the path. Another pgtune that opened the
// file just before the removal locks a file no longer there once it is
// unlocked; it sees that and opens the path again, rather than hold a
// lock that a third, creating a new file there, would also get.
func (s *State) Lock() (release func(), err error) {
	if s.unkept {
		// No file, so no resume that could run alongside.
		return func() {}, nil
	}
	dir, err := secureDir(filepath.Dir(s.path), true)
	if err != nil {
		return nil, err
	}
	p := filepath.Join(dir, "."+s.ID+".lock")
	// Each retry follows a release by another pgtune between our open
	// and our flock: a few in a row are already unlikely.
	const tries = 10
	for try := 1; ; try++ {
		f, err := openState(p, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, err
		}
		lockOpened()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			_ = f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				return nil, fmt.Errorf("run %s is being applied by another pgtune right now (it holds %s): let it finish or stop it, then resume", s.ID, p)
			}
			return nil, fmt.Errorf("run state: lock %s: %w", p, err)
		}
		if stillAt(f, p) {
			return func() {
				// Removed before it is unlocked (see above); and only
				// while it is still ours: one removed by hand and made
				// again by another pgtune is that pgtune's.
				if stillAt(f, p) {
					_ = os.Remove(p)
				}
				_ = f.Close()
			}, nil
		}
		_ = f.Close()
		if try == tries {
			return nil, fmt.Errorf("run state: lock %s: removed and made again %d times while being taken", p, tries)
		}
	}
}

// lockOpened runs between Lock's open and its flock: tests release
// another holder there.
var lockOpened = func() {}

// stillAt reports whether f is the file at p now.
func stillAt(f *os.File, p string) bool {
	held, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(p)
	return err == nil && os.SameFile(held, now)
}

// Host returns the host's entry, added as not reached when absent.
func (s *State) Host(name string) *HostState {
	for i := range s.Hosts {
		if s.Hosts[i].Name == name {
			return &s.Hosts[i]
		}
	}
	s.Hosts = append(s.Hosts, HostState{Name: name, State: NotReached})
	return &s.Hosts[len(s.Hosts)-1]
}

// Save writes the state atomically (a temporary file renamed over the
// old one), 0600 in a 0700 directory: it names hosts and holds plans.
func (s *State) Save() error {
	s.Updated = time.Now().UTC()
	if s.unkept {
		return nil
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	dir, err := secureDir(filepath.Dir(s.path), true)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+s.ID+".*.tmp")
	if err != nil {
		return fmt.Errorf("run state: %w", err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename; left only on failure
	if _, err = tmp.Write(append(data, '\n')); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, filepath.Base(s.path)))
	}
	if err != nil {
		return fmt.Errorf("run state: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// Discard removes the state file of a run that changed nothing (see
// Outcome.Discarded); a file never written is no error.
func (s *State) Discard() error {
	if s.unkept {
		return nil
	}
	dir, err := secureDir(filepath.Dir(s.path), false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, filepath.Base(s.path))); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("run state: %w", err)
	}
	return nil
}

// Load reads the state of run id from dir; id "" is the latest run,
// whatever its status (Resume is what --resume picks).
func Load(dir, id string) (*State, error) {
	if id == "" {
		latest, err := Latest(dir)
		if err != nil {
			return nil, err
		}
		id = latest
	}
	if !engine.ValidRunID(id) {
		return nil, fmt.Errorf("--resume %q: not a run id", id)
	}
	p := filepath.Join(dir, id+".json")
	data, err := readState(dir, id+".json")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("--resume: no run %s in %s", id, dir)
	}
	if err != nil {
		return nil, err
	}
	s := &State{}
	if err := json.Unmarshal(data, s); err != nil {
		return nil, fmt.Errorf("run state %s: %w", p, err)
	}
	if s.Version != 1 || s.ID != id {
		return nil, fmt.Errorf("run state %s: not a pgtune run state (version %d, id %q)", p, s.Version, s.ID)
	}
	if err := s.check(data); err != nil {
		return nil, fmt.Errorf("run state %s: %w: not resumed", p, err)
	}
	s.path = p
	return s, nil
}

var (
	runStatuses = []string{Running, Interrupted, Stopped, Partial, Finished}
	hostStates  = []string{Verified, PendingRestart, Failed, NotReached, InProgress}
)

// check refuses a state pgtune would not have written: a resume acts on
// each host by its state, so a state it does not know (a hand edit, a
// newer pgtune's file) or a host listed twice (which entry would count?)
// must stop it rather than be guessed at. data is the file, to name the
// line of the host entry at fault.
func (s *State) check(data []byte) error {
	if !slices.Contains(runStatuses, s.Status) {
		return fmt.Errorf("unknown run status %q (pgtune writes %s)", s.Status, strings.Join(runStatuses, ", "))
	}
	lines := hostLines(data)
	at := func(i int) string {
		if i < len(lines) {
			return fmt.Sprintf("line %d: ", lines[i])
		}
		return ""
	}
	first := map[string]int{}
	for i, h := range s.Hosts {
		switch {
		case h.Name == "":
			return fmt.Errorf("%shost entry %d has no name", at(i), i+1)
		case !slices.Contains(hostStates, h.State):
			return fmt.Errorf("%shost %q: unknown state %q (pgtune writes %s)", at(i), h.Name, h.State, strings.Join(hostStates, ", "))
		}
		if j, dup := first[h.Name]; dup {
			where := ""
			if j < len(lines) {
				where = fmt.Sprintf(" (first at line %d)", lines[j])
			}
			return fmt.Errorf("%shost %q is listed twice%s", at(i), h.Name, where)
		}
		first[h.Name] = i
	}
	return nil
}

// hostLines is the line on which each entry of the file's "hosts" array
// starts; nil (no line named) when the file cannot be walked so.
func hostLines(data []byte) []int {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil
		}
		if key != "hosts" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return nil
		}
		var lines []int
		for dec.More() {
			// The offset is where the previous token ended: the entry
			// starts at the next byte that is not a separator.
			off := int(dec.InputOffset())
			for off < len(data) && strings.IndexByte(" \t\r\n,", data[off]) >= 0 {
				off++
			}
			lines = append(lines, 1+bytes.Count(data[:off], []byte("\n")))
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
		}
		return lines
	}
	return nil
}

// Match is what the command line says of the run --resume continues:
// each field given ("" when not) must be the run's.
type Match struct {
	Inventory string // as the state keeps it: an absolute path, or a host list
	Shard     string
	Limit     string // compared only when --resume picks the run
}

// Resume is the state of the run --resume continues: run id, or with id
// "" the newest run that did not finish (interrupted, stopped by its
// failure budget, partial, or still "running": killed) and matches want.
// A finished run is never picked by itself, whatever its age: --resume
// alone must not land on a completed run when an older one was cut
// short. Named by its id, a finished run is resumed only when some host
// is left to retry (one that failed); with every host verified there is
// nothing to resume. A run named by its id is refused when want's
// inventory or shard is not the run's: a resume continues the run over
// the hosts it started with, never another fleet's or shard's (--limit
// may narrow it: the run is then left partial).
func Resume(dir, id string, want Match) (*State, error) {
	if id == "" {
		return latestUnfinished(dir, want)
	}
	s, err := Load(dir, id)
	if err != nil {
		return nil, err
	}
	if d := (Match{Inventory: want.Inventory, Shard: want.Shard}).differs(s); d != "" {
		return nil, fmt.Errorf("--resume %s: the run was started with %s: a resume continues the run over its own hosts; leave out what differs (-i and --shard default to the run's), or resume the run that was started with it: pgtune apply --resume %s", id, d, want.flags())
	}
	if s.Status == Finished && s.left() == 0 {
		return nil, fmt.Errorf("--resume %s: nothing to resume: the run finished and verified every host (%d); start a new apply to check them again", id, len(s.Hosts))
	}
	return s, nil
}

// differs says how run s was started other than m asks, as flags of the
// run and of m ("" when it was not).
func (m Match) differs(s *State) string {
	var d []string
	if m.Inventory != "" && m.Inventory != s.Inventory {
		d = append(d, fmt.Sprintf("%s, not %s", flagOf("-i", s.Inventory), flagOf("-i", m.Inventory)))
	}
	if m.Shard != "" && normShard(m.Shard) != normShard(s.Shard) {
		d = append(d, fmt.Sprintf("%s, not %s", flagOf("--shard", s.Shard), flagOf("--shard", m.Shard)))
	}
	if m.Limit != "" && m.Limit != s.Limit {
		d = append(d, fmt.Sprintf("%s, not %s", flagOf("--limit", s.Limit), flagOf("--limit", m.Limit)))
	}
	return strings.Join(d, " and ")
}

// flags are m's fields as the flags that gave them.
func (m Match) flags() string {
	var f []string
	for _, kv := range [][2]string{{"-i", m.Inventory}, {"--shard", m.Shard}, {"--limit", m.Limit}} {
		if kv[1] != "" {
			f = append(f, flagOf(kv[0], kv[1]))
		}
	}
	return strings.Join(f, " ")
}

// summary is the run as a candidate of --resume: its status and what it
// was started with.
func (s *State) summary() string {
	if f := (Match{Inventory: s.Inventory, Shard: s.Shard, Limit: s.Limit}).flags(); f != "" {
		return fmt.Sprintf("%s (%s, %s)", s.ID, s.Status, f)
	}
	return fmt.Sprintf("%s (%s)", s.ID, s.Status)
}

func flagOf(flag, v string) string {
	if v == "" {
		return "no " + flag
	}
	return flag + " " + v
}

// normShard is a --shard value as i/n ("1/2" for " 1/2").
func normShard(v string) string {
	if sh, err := ParseShard(v); err == nil {
		return sh.String()
	}
	return v
}

// left counts the hosts a resume would work on again.
func (s *State) left() int {
	n := 0
	for _, h := range s.Hosts {
		if !h.Done() {
			n++
		}
	}
	return n
}

// latestUnfinished is the newest run in dir whose status is not finished
// and that matches want. Unfinished runs that do not match are no error
// while an older one does; when none does, the error names them.
func latestUnfinished(dir string, want Match) (*State, error) {
	ids, err := runIDs(dir)
	if err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("--resume: no run to resume in %s", dir)
	}
	var newest *State
	var others []string // unfinished runs that do not match, newest first
	for i := len(ids) - 1; i >= 0; i-- {
		s, err := Load(dir, ids[i])
		if err != nil {
			// Not skipped: an unreadable newer run could be the one meant.
			return nil, fmt.Errorf("%w; name the run to resume: --resume ID", err)
		}
		if s.Status != Finished {
			if want.differs(s) == "" {
				return s, nil
			}
			others = append(others, s.summary())
			continue
		}
		if newest == nil {
			newest = s
		}
	}
	if len(others) > 0 {
		const most = 10
		list := strings.Join(others[:min(len(others), most)], ", ")
		if len(others) > most {
			list += fmt.Sprintf(" and %d older", len(others)-most)
		}
		return nil, fmt.Errorf("--resume: no unfinished run was started with %s in %s; the unfinished runs there: %s; resume one by its id (pgtune apply --resume RUN, leaving out what differs), or start a new apply", want.flags(), dir, list)
	}
	if newest == nil {
		return nil, fmt.Errorf("--resume: no run to resume in %s", dir)
	}
	if n := newest.left(); n > 0 {
		return nil, fmt.Errorf("--resume: no interrupted or stopped run in %s: every run there finished; the newest, %s, left %s not verified: --resume %s retries them", dir, newest.ID, hostsWord(n), newest.ID)
	}
	return nil, fmt.Errorf("--resume: nothing to resume in %s: every run there finished (the newest, %s, verified every host)", dir, newest.ID)
}

// Exists reports whether dir holds the state of run id.
func Exists(dir, id string) bool {
	if !engine.ValidRunID(id) {
		return false
	}
	real, err := secureDir(dir, false)
	if err != nil {
		return false
	}
	_, err = os.Lstat(filepath.Join(real, id+".json"))
	return err == nil
}

// Latest is the id of the newest run in dir, whatever its status.
func Latest(dir string) (string, error) {
	ids, err := runIDs(dir)
	if err != nil {
		return "", err
	}
	if len(ids) == 0 {
		return "", fmt.Errorf("--resume: no run to resume in %s", dir)
	}
	return ids[len(ids)-1], nil
}

// runIDs are the ids of the runs in dir, oldest first (run ids sort by
// time).
func runIDs(dir string) ([]string, error) {
	real, err := secureDir(dir, false)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(real)
	if err != nil {
		return nil, fmt.Errorf("run state: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && e.Type().IsRegular() && engine.ValidRunID(id) {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}
