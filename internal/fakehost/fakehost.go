// Package fakehost is an in-memory host for unit tests of the engine and
// the modules: a transport.Transport that answers pgtune's typed
// operations (transport.Command.Op: read, write, remove a file, record a
// journal entry, set a kernel or sysfs value, run a service action) on
// state it keeps (files, links, kernel values, sysfs values), never by
// matching script text. Commands without an Op it knows go to Other.
//
// It depends on transport only, so the engine's own tests can use it.
package fakehost

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/pgtune/pgtune/engine/transport"
)

// The operations of package engine, by the names engine.Op* give them
// (engine's tests check that the two lists agree).
const (
	OpRecordFile   transport.Op = "journal-record-file"
	OpRunDir       transport.Op = "journal-run-dir"
	OpReadJournals transport.Op = "read-journals"
	OpSetSysctl    transport.Op = "set-sysctl"
	OpWriteSysfs   transport.Op = "write-sysfs"
	OpStat         transport.Op = "stat"
	OpService      transport.Op = "service"
	OpStateDir     transport.Op = "state-dir"
	OpLockFifo     transport.Op = "lock-fifo"
	OpLockHold     transport.Op = "lock-hold"
	OpLockAnswer   transport.Op = "lock-answer"
	OpLockCleanup  transport.Op = "lock-cleanup"
)

// missingExit is how transport.ReadFile's script says a file is absent.
const missingExit = 44

// Host is the fake. The zero value is not usable: call New.
type Host struct {
	mu sync.Mutex

	// Files maps a path to its content; Modes to "mode user:group" as
	// stat -c '%a %U:%G' prints it (default "644 root:root").
	Files map[string]string
	Modes map[string]string
	// Links maps a symlink to its target (relative to the link's
	// directory when not absolute).
	Links map[string]string
	// Sysctl is the kernel's /proc/sys values, by key.
	Sysctl map[string]string
	// Sysfs is values under /sys, by path.
	Sysfs map[string]string
	// Services is every service action run, in order ("daemon-reload",
	// "restart x.service").
	Services []string

	// OnSysctl, when set, models the kernel's rules for a write: it
	// returns the value the kernel keeps (and may change other keys in
	// Sysctl, which the host hands it locked) or an error. Unset, the
	// value is kept as written.
	OnSysctl func(sysctl map[string]string, key, value string) (string, error)
	// OnSysfs, when set, models a sysfs write the host computes (files
	// Generated answers reads of): handled says it took the write, err is
	// the kernel's refusal. Not handled, the write goes to Sysfs (or
	// Files). It runs with the host locked and is handed Sysfs.
	OnSysfs func(sysfs map[string]string, p, value string) (handled bool, err error)
	// OnService, when set, models what a service action does on the host
	// (a restart that starts a server, or fails to): it runs with the
	// host locked, after the action is logged, and its error fails the
	// action with status 1.
	OnService func(unit, action string) error
	// Fail makes an operation fail with exit status 1: it is given the
	// operation and its arguments (after sh -c SCRIPT NAME, or after the
	// command's name) and returns the message, "" to let it run.
	Fail func(op transport.Op, args []string) string
	// Generated answers reads of files the host computes (/proc/meminfo)
	// before Files is looked at; it runs with the host locked.
	Generated func(p string) (string, bool)
	// Other answers commands without a known Op (a module's own
	// scripts, the facts gather); nil fails them with status 127.
	Other func(ctx context.Context, cmd transport.Command) (transport.Result, error)

	// StateDirAnswer is what the state directory check prints: "ok"
	// (the default), "absent", or a reason it is refused.
	StateDirAnswer string
	// LockedBy, when set, is the content of a lock another run holds:
	// taking the lock answers busy. Unset, the lock is free and held
	// until the run releases it (its context ends).
	LockedBy string

	// StateDir is where journals live: file operations under it are
	// logged with "journal " in front, so tests of a module's commands
	// can leave them out.
	StateDir string

	// Log has one line per operation, in order: "read P", "write P",
	// "remove P", "mkdir P", "sysctl K=V", "sysfs P=V", "service ACTION
	// [UNIT]", "journal record P", "journal rundir P", "stat P", "journals D". Commands
	// for Other are logged by Other.
	Log []string
}

// New returns an empty host.
func New() *Host {
	return &Host{Files: map[string]string{}, Modes: map[string]string{}, Links: map[string]string{},
		Sysctl: map[string]string{}, Sysfs: map[string]string{}}
}

// Close does nothing.
func (h *Host) Close() error { return nil }

// Lock and Unlock let models and tests read or change the host's state
// while commands may run.
func (h *Host) Lock()   { h.mu.Lock() }
func (h *Host) Unlock() { h.mu.Unlock() }

// Resolve follows links from p, as the kernel would (at most 10).
func (h *Host) Resolve(p string) string {
	for i := 0; i < 10; i++ {
		t, ok := h.Links[p]
		if !ok {
			return p
		}
		if !path.IsAbs(t) {
			t = path.Join(path.Dir(p), t)
		}
		p = t
	}
	return p
}

// Commands returns the log lines that start with prefix.
func (h *Host) Commands(prefix string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range h.Log {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// Run answers one command.
func (h *Host) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	if err := ctx.Err(); err != nil {
		return transport.Result{}, err
	}
	if cmd.Op == OpLockHold {
		return h.holdLock(ctx, cmd)
	}
	h.mu.Lock()
	op, ok := ops[cmd.Op]
	if !ok {
		other := h.Other
		h.mu.Unlock()
		if other == nil {
			return fail(cmd, 127, "fakehost: unknown command "+cmd.String())
		}
		return other(ctx, cmd)
	}
	defer h.mu.Unlock()
	args := scriptArgs(cmd)
	if h.Fail != nil {
		if msg := h.Fail(cmd.Op, args); msg != "" {
			return fail(cmd, 1, msg)
		}
	}
	return op(h, cmd, args)
}

// scriptArgs are a script's arguments: what follows sh -c SCRIPT NAME; a
// plain command's arguments after its name.
func scriptArgs(cmd transport.Command) []string {
	a := cmd.Args
	if len(a) >= 4 && a[0] == "sh" && a[1] == "-c" {
		return a[4:]
	}
	if len(a) > 0 {
		return a[1:]
	}
	return nil
}

func first(a []string) string {
	if len(a) == 0 {
		return ""
	}
	return a[0]
}

type opFunc func(h *Host, cmd transport.Command, args []string) (transport.Result, error)

var ops = map[transport.Op]opFunc{
	transport.OpReadFile:   (*Host).readFile,
	transport.OpWriteFile:  (*Host).writeFile,
	transport.OpRemoveFile: (*Host).removeFile,
	transport.OpMakeDir: func(h *Host, _ transport.Command, a []string) (transport.Result, error) {
		return h.logOK("mkdir " + a[0])
	},
	OpRecordFile: (*Host).recordFile,
	OpRunDir: func(h *Host, _ transport.Command, a []string) (transport.Result, error) {
		return h.logOK("journal rundir " + a[0])
	},
	OpReadJournals: (*Host).readJournals,
	OpSetSysctl:    (*Host).setSysctl,
	OpWriteSysfs:   (*Host).writeSysfs,
	OpStat:         (*Host).stat,
	OpService:      (*Host).service,
	OpStateDir:     (*Host).stateDir,
	OpLockFifo:     func(h *Host, _ transport.Command, _ []string) (transport.Result, error) { return h.logOK("lock fifo") },
	OpLockAnswer:   (*Host).lockAnswer,
	OpLockCleanup: func(h *Host, _ transport.Command, _ []string) (transport.Result, error) {
		return h.logOK("lock cleanup")
	},
}

func (h *Host) logPath(verb, p string) {
	if h.StateDir != "" && strings.HasPrefix(p, h.StateDir+"/") {
		verb = "journal " + verb
	}
	h.Log = append(h.Log, verb+" "+p)
}

func (h *Host) logOK(line string) (transport.Result, error) {
	h.Log = append(h.Log, line)
	return transport.Result{}, nil
}

func ok(out string) (transport.Result, error) { return transport.Result{Stdout: []byte(out)}, nil }

func fail(cmd transport.Command, code int, msg string) (transport.Result, error) {
	res := transport.Result{ExitCode: code, Stderr: []byte(msg)}
	return res, &transport.ExitError{Command: cmd.String(), Result: res}
}

func (h *Host) readFile(cmd transport.Command, a []string) (transport.Result, error) {
	p := a[0]
	h.logPath("read", p)
	if h.Generated != nil {
		if v, found := h.Generated(p); found {
			return ok(v)
		}
	}
	if strings.HasPrefix(p, "/proc/sys/") {
		if v, found := h.Sysctl[strings.ReplaceAll(strings.TrimPrefix(p, "/proc/sys/"), "/", ".")]; found {
			return ok(v + "\n")
		}
	}
	if v, found := h.Sysfs[p]; found {
		return ok(v + "\n")
	}
	data, found := h.Files[h.Resolve(p)]
	if !found {
		return fail(cmd, missingExit, "")
	}
	return ok(data)
}

// writeFile replaces a file (a link at the path is replaced, as rename
// does), copying the old content to the backup when one is named.
func (h *Host) writeFile(cmd transport.Command, a []string) (transport.Result, error) {
	p, mode, owner, backup := a[0], a[1], a[2], a[3]
	h.logPath("write", p)
	real := h.Resolve(p)
	if old, found := h.Files[real]; found && backup != "" {
		h.Files[backup] = old
		h.Modes[backup] = h.mode(real)
	}
	h.Files[p] = string(cmd.Stdin)
	delete(h.Links, p)
	if mode != "" || owner != "" {
		m, o, _ := strings.Cut(h.mode(p), " ")
		if mode != "" {
			m = strings.TrimLeft(mode, "0")
		}
		if owner != "" {
			o = owner
		}
		h.Modes[p] = m + " " + o
	}
	return ok("")
}

func (h *Host) removeFile(_ transport.Command, a []string) (transport.Result, error) {
	p, backup := a[0], a[1]
	h.logPath("remove", p)
	if old, found := h.Files[p]; found && backup != "" {
		h.Files[backup] = old
		h.Modes[backup] = h.mode(p)
	}
	delete(h.Files, p)
	delete(h.Modes, p)
	delete(h.Links, p)
	return ok("")
}

func (h *Host) mode(p string) string {
	if m, found := h.Modes[p]; found {
		return m
	}
	return "644 root:root"
}

// recordFile answers the journal's question: does the file exist (exit 0)
// or not (exit 1)?
func (h *Host) recordFile(cmd transport.Command, a []string) (transport.Result, error) {
	p := a[0]
	h.Log = append(h.Log, "journal record "+p)
	_, file := h.Files[h.Resolve(p)]
	_, link := h.Links[p]
	if !file && !link {
		return fail(cmd, 1, "")
	}
	return ok("")
}

// readJournals prints every DIR/*/journal.json as the engine's script
// does: "\n### PATH\n" then the content.
func (h *Host) readJournals(_ transport.Command, a []string) (transport.Result, error) {
	dir := a[0]
	h.Log = append(h.Log, "journals "+dir)
	var names []string
	for p := range h.Files {
		rest, found := strings.CutPrefix(p, dir+"/")
		if found && strings.Count(rest, "/") == 1 && strings.HasSuffix(rest, "/journal.json") {
			names = append(names, p)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, p := range names {
		fmt.Fprintf(&b, "\n### %s\n%s", p, h.Files[p])
	}
	return ok(b.String())
}

func (h *Host) setSysctl(cmd transport.Command, a []string) (transport.Result, error) {
	key, value := a[0], a[1]
	h.Log = append(h.Log, "sysctl "+key+"="+value)
	if _, found := h.Sysctl[key]; !found {
		return fail(cmd, 1, fmt.Sprintf("sysctl: cannot stat /proc/sys/%s: No such file or directory", strings.ReplaceAll(key, ".", "/")))
	}
	if h.OnSysctl != nil {
		v, err := h.OnSysctl(h.Sysctl, key, value)
		if err != nil {
			return fail(cmd, 1, err.Error())
		}
		value = v
	}
	h.Sysctl[key] = value
	return ok("")
}

func (h *Host) writeSysfs(cmd transport.Command, a []string) (transport.Result, error) {
	p, value := a[0], a[1]
	h.Log = append(h.Log, "sysfs "+p+"="+value)
	if h.OnSysfs != nil {
		handled, err := h.OnSysfs(h.Sysfs, p, value)
		if err != nil {
			return fail(cmd, 1, err.Error())
		}
		if handled {
			return ok("")
		}
	}
	values := h.Sysfs
	if _, found := values[p]; !found {
		values = h.Files // a test may keep a sysfs file's content among the files
	}
	cur, found := values[p]
	if !found {
		return fail(cmd, 1, p+": No such file or directory")
	}
	next, err := selectChoice(cur, value)
	if err != nil {
		return fail(cmd, 1, p+": "+err.Error())
	}
	values[p] = next
	return ok("")
}

// selectChoice is a sysfs file's content after value is written: in a
// choice file ("always [madvise] never") the kernel brackets the chosen
// word and refuses one it does not offer; any other file takes the value.
func selectChoice(cur, value string) (string, error) {
	if !strings.Contains(cur, "[") {
		return value, nil
	}
	words := strings.Fields(cur)
	offered := false
	for i, w := range words {
		w = strings.Trim(w, "[]")
		if w == value {
			offered = true
			w = "[" + w + "]"
		}
		words[i] = w
	}
	if !offered {
		return "", errors.New("Invalid argument")
	}
	return strings.Join(words, " ") + "\n", nil
}

func (h *Host) stat(cmd transport.Command, a []string) (transport.Result, error) {
	p := a[len(a)-1]
	h.logPath("stat", p)
	if _, found := h.Files[p]; !found {
		return fail(cmd, 1, "stat: cannot statx '"+p+"': No such file or directory")
	}
	return ok(h.mode(p) + "\n")
}

func (h *Host) service(cmd transport.Command, a []string) (transport.Result, error) {
	line := strings.Join(a, " ")
	h.Log = append(h.Log, "service "+line)
	h.Services = append(h.Services, line)
	if h.OnService != nil {
		unit := ""
		if len(a) > 1 {
			unit = a[1]
		}
		if err := h.OnService(unit, first(a)); err != nil {
			return fail(cmd, 1, err.Error())
		}
	}
	return ok("")
}

// stateDir answers the state directory check (exit 3 with a reason).
func (h *Host) stateDir(cmd transport.Command, _ []string) (transport.Result, error) {
	h.Log = append(h.Log, "state dir")
	switch h.StateDirAnswer {
	case "", "ok":
		// The path is taken as resolved: the fake has no links.
		return ok("ok\n" + cmd.Args[len(cmd.Args)-1] + "\n")
	case "absent":
		return ok("absent\n")
	}
	res := transport.Result{ExitCode: 3, Stdout: []byte(h.StateDirAnswer + "\n")}
	return res, &transport.ExitError{Command: cmd.String(), Result: res}
}

// lockAnswer is the holder's answer: locked, or busy and the lock's
// content.
func (h *Host) lockAnswer(_ transport.Command, _ []string) (transport.Result, error) {
	if h.LockedBy != "" {
		h.Log = append(h.Log, "lock busy")
		return ok("busy\n" + h.LockedBy + "\n")
	}
	h.Log = append(h.Log, "lock taken")
	return ok("locked\n")
}

// holdLock is the lock holder: it ends at once when another run holds
// the lock (exit 75), else when the run releases it.
func (h *Host) holdLock(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	h.mu.Lock()
	busy := h.LockedBy
	h.mu.Unlock()
	if busy != "" {
		res := transport.Result{ExitCode: 75, Stdout: []byte("busy\n" + busy + "\n")}
		return res, &transport.ExitError{Command: cmd.String(), Result: res}
	}
	<-ctx.Done()
	h.mu.Lock()
	h.Log = append(h.Log, "lock released")
	h.mu.Unlock()
	return transport.Result{}, ctx.Err()
}
