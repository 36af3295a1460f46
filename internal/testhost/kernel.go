// Package testhost holds helpers for tests that touch this machine's real
// kernel. Several test packages run in parallel under `go test ./...`, and
// other engineers share the machine, so every kernel change goes through
// one machine-wide lock and is undone when the test ends.
package testhost

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// holders are the names of the tests that hold the kernel lock, in either
// mode, so that helpers which read the live kernel can insist on it.
var holders sync.Map

func hold(t testing.TB) {
	holders.Store(t.Name(), true)
	t.Cleanup(func() { holders.Delete(t.Name()) })
}

// HoldsKernel says whether t, or a test it is a subtest of, holds the
// kernel lock (LockKernel or WatchKernel).
func HoldsKernel(t testing.TB) bool {
	name := t.Name()
	for {
		if _, ok := holders.Load(name); ok {
			return true
		}
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			return false
		}
		name = name[:i]
	}
}

// LockFile is the machine-wide lock every kernel-changing test takes.
const LockFile = "/run/pgtune-kernel.lock"

// Keys are the kernel values pgtune manages, snapshotted and restored.
var Keys = []string{"vm.nr_hugepages", "vm.overcommit_memory", "vm.overcommit_kbytes", "vm.overcommit_ratio"}

// KernelState is the snapshot LockKernel took; tests may read it to plan
// relative to where the machine started.
type KernelState struct {
	Values map[string]string
	// Meminfo is /proc/meminfo (kB values, HugePages_* in pages) at lock
	// time.
	Meminfo map[string]int64
	// Pools is every huge page size's pool at lock time, by size in bytes
	// (see pools.go for what to plan from it).
	Pools map[int64]Pool
}

// LockKernel takes the machine-wide kernel lock (blocking until other
// test packages release it), snapshots the managed vm.* values and restores
// them, in a safe order, when the test ends. It skips the test when not
// root (only root can change these values) and under -short (unit tests
// never touch the kernel, whoever runs them).
func LockKernel(t testing.TB) *KernelState {
	t.Helper()
	if testing.Short() {
		t.Skip("changes or watches kernel settings (integration test; run without -short)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: changes kernel settings")
	}
	f, err := os.OpenFile(LockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("kernel lock: %v", err)
	}
	asked := time.Now()
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		t.Fatalf("kernel lock %s: %v", LockFile, err)
	}
	// What a killed test left running may hold huge pages and memory
	// this test's snapshot would count.
	if err := reapFor(t); err != nil {
		f.Close()
		t.Fatalf("kernel lock: %v", err)
	}
	// A holder that died without its cleanup (a test binary killed by
	// -timeout) left its snapshot behind: put the machine back first.
	if err := restoreLeftover(t); err != nil {
		f.Close()
		t.Fatalf("kernel lock: %v", err)
	}
	st := &KernelState{Values: map[string]string{}}
	for _, k := range Keys {
		v, err := ReadSysctl(k)
		if err != nil {
			f.Close()
			t.Fatalf("snapshot: %v", err)
		}
		st.Values[k] = v
	}
	if st.Meminfo, err = Meminfo(); err != nil {
		f.Close()
		t.Fatalf("snapshot: %v", err)
	}
	if st.Pools, err = ReadPools(); err != nil {
		f.Close()
		t.Fatalf("snapshot: %v", err)
	}
	if err := st.save(); err != nil {
		f.Close()
		t.Fatalf("kernel lock: %v", err)
	}
	taken := time.Now()
	t.Logf("kernel lock: waited %s; %s", taken.Sub(asked).Round(time.Millisecond), st.Machine())
	hold(t)
	t.Cleanup(func() {
		defer f.Close() // closing releases the flock
		defer func() { traceLock(t, "exclusive", taken.Sub(asked), time.Since(taken)) }()
		if err := st.Restore(); err != nil {
			t.Errorf("restore kernel settings: %v", err)
			return
		}
		os.Remove(SnapshotFile)
	})
	return st
}

// WatchKernel takes the kernel lock shared, for a test that reads the
// kernel's values and needs them to hold still but must change none of
// them (check, facts, explain, refusals): such tests run side by side,
// while a test that changes the kernel (LockKernel) waits for all of them
// and they for it. The values are snapshotted as LockKernel does; when the
// test ends they must be unchanged: a change fails the test and is undone.
// It skips the test as LockKernel does.
func WatchKernel(t testing.TB) *KernelState {
	t.Helper()
	if testing.Short() {
		t.Skip("watches kernel settings (integration test; run without -short)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: reads kernel settings under the lock")
	}
	asked := time.Now()
	f, err := lockShared(t)
	if err != nil {
		t.Fatalf("kernel lock: %v", err)
	}
	if err := reapFor(t); err != nil {
		f.Close()
		t.Fatalf("kernel lock: %v", err)
	}
	st := &KernelState{Values: map[string]string{}}
	for _, k := range Keys {
		if st.Values[k], err = ReadSysctl(k); err != nil {
			f.Close()
			t.Fatalf("snapshot: %v", err)
		}
	}
	if st.Meminfo, err = Meminfo(); err != nil {
		f.Close()
		t.Fatalf("snapshot: %v", err)
	}
	if st.Pools, err = ReadPools(); err != nil {
		f.Close()
		t.Fatalf("snapshot: %v", err)
	}
	taken := time.Now()
	t.Logf("kernel lock (shared): waited %s; %s", taken.Sub(asked).Round(time.Millisecond), st.Machine())
	hold(t)
	t.Cleanup(func() {
		defer f.Close()
		defer func() { traceLock(t, "shared", taken.Sub(asked), time.Since(taken)) }()
		var changed []string
		for _, k := range Keys {
			if v, err := ReadSysctl(k); err != nil || v != st.Values[k] {
				changed = append(changed, fmt.Sprintf("%s %s → %s", k, st.Values[k], v))
			}
		}
		if len(changed) == 0 {
			return
		}
		t.Errorf("the kernel changed under a test that holds the kernel lock only to watch it: %s", strings.Join(changed, ", "))
		// Undo it as the only holder, so no test snapshots the change.
		if err := flock(f, syscall.LOCK_UN); err == nil {
			err = flock(f, syscall.LOCK_EX)
		}
		if err := st.Restore(); err != nil {
			t.Errorf("restore kernel settings: %v", err)
		}
	})
	return st
}

// lockShared takes the kernel lock shared on a file of its own; a holder
// that died changing the kernel is put right first (which takes the lock
// exclusively for a moment). Closing the file lets go.
func lockShared(t testing.TB) (*os.File, error) {
	f, err := os.OpenFile(LockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		if err := flock(f, syscall.LOCK_SH); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: %w", LockFile, err)
		}
		if !leftover() {
			return f, nil
		}
		err := flock(f, syscall.LOCK_UN)
		if err == nil {
			err = flock(f, syscall.LOCK_EX)
		}
		if err == nil {
			err = restoreLeftover(t)
		}
		if err == nil {
			err = restoreSysfsLeftover(t)
		}
		if err == nil {
			err = flock(f, syscall.LOCK_UN)
		}
		if err != nil {
			f.Close()
			return nil, err
		}
	}
}

// PoolStill runs fn, which starts a PostgreSQL server that maps its shared
// memory with the stock huge_pages = try before a test can say otherwise
// (initdb's bootstrap and single-user servers: PostgreSQL 15's initdb
// passes them no settings, and its default 128MB of shared_buffers is 72
// pages of 2 MiB), with the kernel lock held shared: no other package's
// test can be growing the pool meanwhile, so fn takes none of the pages a
// test reserved for its own cluster (which then found them "held by other
// processes"). When t, or a test it is a subtest of, holds the lock
// already, fn just runs (taking it again would wait for ourselves).
func PoolStill(t testing.TB, fn func()) {
	t.Helper()
	if HoldsKernel(t) {
		fn()
		return
	}
	f, err := lockShared(t)
	if err != nil {
		t.Fatalf("kernel lock: %v", err)
	}
	defer f.Close()
	fn()
}

// leftover says whether a holder that died changing the kernel left its
// snapshot behind.
func leftover() bool {
	for _, p := range []string{SnapshotFile, SysfsSnapshotFile} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			return true
		}
	}
	return false
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// LockTraceEnv names a file to which every holder of the kernel lock
// appends a line "test mode waited held" (seconds) when it lets go: the lock
// serialises the integration tests of every package, so its holding times
// are what a whole run's length is made of.
const LockTraceEnv = "PGTUNE_KERNEL_LOCK_TRACE"

func traceLock(t testing.TB, mode string, waited, held time.Duration) {
	t.Logf("kernel lock (%s): held %s", mode, held.Round(time.Millisecond))
	path := os.Getenv(LockTraceEnv)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Logf("kernel lock trace: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s %.1f %.1f\n", t.Name(), mode, waited.Seconds(), held.Seconds())
}

// SnapshotFile holds the values the current lock holder must restore. It
// outlives a holder killed before its cleanup, so the next holder restores
// them.
const SnapshotFile = "/run/pgtune-kernel.snapshot"

func (s *KernelState) save() error {
	data, err := json.Marshal(s.Values)
	if err != nil {
		return err
	}
	tmp := SnapshotFile + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, SnapshotFile)
}

func restoreLeftover(t testing.TB) error {
	data, err := os.ReadFile(SnapshotFile)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	left := &KernelState{}
	if err := json.Unmarshal(data, &left.Values); err != nil {
		return fmt.Errorf("%s: %w", SnapshotFile, err)
	}
	t.Logf("a previous test died holding the kernel lock: restoring %v", left.Values)
	if err := left.Restore(); err != nil {
		return fmt.Errorf("restore the values a dead test left in %s: %w", SnapshotFile, err)
	}
	return os.Remove(SnapshotFile)
}

// Restore puts the snapshotted values back. Writing overcommit_kbytes
// zeroes overcommit_ratio and the reverse, so only the one that was
// non-zero is written (kbytes wins when both were, as the kernel uses it).
// When the machine was not in strict mode, strict mode is left first, so
// no moment runs strict with a test's limit; when it was strict, the limit
// is restored first, so no moment runs strict with a test's limit either.
func (s *KernelState) Restore() error {
	var errs []string
	set := func(k string) {
		if err := WriteSysctl(k, s.Values[k]); err != nil {
			errs = append(errs, err.Error())
		}
	}
	limit := func() {
		if s.Values["vm.overcommit_kbytes"] != "0" {
			set("vm.overcommit_kbytes")
		} else {
			set("vm.overcommit_ratio")
		}
	}
	if s.Values["vm.overcommit_memory"] == "2" {
		limit()
		set("vm.overcommit_memory")
	} else {
		set("vm.overcommit_memory")
		limit()
	}
	set("vm.nr_hugepages")
	// Verify: a value the kernel refused to take back must fail the test
	// loudly rather than leave the machine changed silently.
	for _, k := range Keys {
		if k == "vm.overcommit_ratio" && s.Values["vm.overcommit_kbytes"] != "0" {
			continue // zeroed by the kernel when kbytes is written
		}
		if k == "vm.overcommit_kbytes" && s.Values["vm.overcommit_kbytes"] == "0" {
			continue
		}
		got, err := ReadSysctl(k)
		if err == nil && got != s.Values[k] {
			err = fmt.Errorf("%s is %s after restore, want %s", k, got, s.Values[k])
		}
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func procPath(key string) string {
	return "/proc/sys/" + strings.ReplaceAll(key, ".", "/")
}

// ReadSysctl reads a live kernel value.
func ReadSysctl(key string) (string, error) {
	b, err := os.ReadFile(procPath(key))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// WriteSysctl sets a live kernel value.
func WriteSysctl(key, value string) error {
	f, err := os.OpenFile(procPath(key), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(value + "\n")
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("write %s=%s: %w", key, value, werr)
	}
	return cerr
}

// Meminfo parses /proc/meminfo: kB values as printed, HugePages_* counts.
func Meminfo() (map[string]int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		var n int64
		if _, err := fmt.Sscan(fields[1], &n); err == nil {
			m[strings.TrimSuffix(fields[0], ":")] = n
		}
	}
	return m, nil
}

// Steady is for a test that reads machine-wide state (this machine's
// facts, its processes) and runs as a unit test too: where tests that
// change the kernel can run beside it (as root, without -short) it holds
// the kernel lock shared (WatchKernel) and returns the snapshot; elsewhere
// no test changes the kernel, and it returns nil without skipping.
func Steady(t testing.TB) *KernelState {
	t.Helper()
	if testing.Short() || os.Geteuid() != 0 {
		return nil
	}
	return WatchKernel(t)
}
