package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

// SysctlConfig is the machine's sysctl configuration as pgtune's gather
// reads it: engine/facts.SysctlDirs, then facts.SysctlConf (a facts test
// keeps the two lists equal; testenv cannot import facts, whose own tests
// use testenv).
var SysctlConfig = []string{
	"/etc/sysctl.d",
	"/run/sysctl.d",
	"/usr/local/lib/sysctl.d",
	"/usr/lib/sysctl.d",
	"/lib/sysctl.d",
	"/etc/sysctl.conf",
}

// MaskSource names the tmpfs whose empty directories and file hide
// SysctlConfig: a mount of it in /proc/self/mountinfo says this process
// already runs with the masks.
const MaskSource = "pgtune-test-sysctl-mask"

// maskEnv tells the copy MaskSysctlConfig starts that it is that copy: the
// one to mount the masks, in the namespace made for it.
const maskEnv = "PGTUNE_TESTENV_MASK_SYSCTL"

// MaskSysctlConfig keeps the machine's sysctl configuration away from the
// test binary and everything it starts (the gather through the local
// transport, sshd and its sessions, PostgreSQL, Patroni, pgtune binaries).
// A DB machine that reserves its pool in /etc/sysctl.d, or a Redis host's
// vm.overcommit_memory = 1, is an override of pgtune's drop-in: a test
// expecting a plan without one would fail there and pass elsewhere.
//
// Run as root outside the masks, it runs this binary again, with the same
// arguments, standard streams and environment, in a mount namespace of its
// own, and exits with that copy's status (it does not return). The copy
// makes its mounts private, so nothing reaches the machine, and mounts an
// empty directory, or an empty file, over each of SysctlConfig that exists
// (writable: the tests' own drop-ins land there and vanish with the
// namespace). A directory missing when the binary starts is not masked: a
// file planted there later is seen, as before (tests that plant one hold
// the kernel lock). Everything else (/run/pgtune-kernel.lock, the
// /run/pgtune-test registry, /tmp) stays the machine's.
//
// Not root, or no such path, or already masked (a descendant of a masked
// binary, in its namespace), it does nothing. Where no namespace can be
// made (a container without CAP_SYS_ADMIN) it warns and returns: the
// tests run against the machine's configuration as before. Each TestMain
// calls it, through Isolate, after its binary's helper roles were
// dispatched and before anything else that leaves files behind.
func MaskSysctlConfig() error {
	if os.Geteuid() != 0 {
		return nil
	}
	masked, err := sysctlMasked()
	if err != nil || masked {
		return err
	}
	if os.Getenv(maskEnv) != "" {
		// The copy, in its new namespace. Its own children must not
		// take themselves for it.
		_ = os.Unsetenv(maskEnv)
		return mountMasks()
	}
	paths, err := sysctlPaths()
	if err != nil || len(paths) == 0 {
		return err
	}
	code, err := runMasked()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: warning: %v: the tests see this machine's sysctl configuration\n", err)
		return nil
	}
	os.Exit(code)
	return nil
}

// sysctlMasked says whether this process runs with the masks mounted.
func sysctlMasked() (bool, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false, fmt.Errorf("mask sysctl configuration: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ... - fstype source options
		_, after, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		if f := strings.Fields(after); len(f) >= 2 && f[0] == "tmpfs" && f[1] == MaskSource {
			return true, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("mask sysctl configuration: %w", err)
	}
	return false, nil
}

// sysctlPaths are the SysctlConfig entries that exist, resolved (/lib is
// often a link to /usr/lib), each once.
func sysctlPaths() ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, p := range SysctlConfig {
		r, err := filepath.EvalSymlinks(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("mask sysctl configuration: %w", err)
		}
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out, nil
}

// runMasked runs this binary's copy in a new mount namespace and returns
// its exit status; err is for a copy that could not start.
func runMasked() (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, fmt.Errorf("mask sysctl configuration: %w", err)
	}
	cmd := exec.Command(exe, os.Args[1:]...)
	cmd.Args[0] = os.Args[0]
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), maskEnv+"=1")
	// Pdeathsig: when this process dies, killed by go test after a
	// timeout's SIGQUIT went unanswered, the copy dies with it instead of
	// running on unwatched. It follows the thread that started the copy,
	// so that thread is kept until the copy ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	// go test's -timeout, ^C and kill reach this process: the copy is
	// the test binary, which must get them (a timed-out one prints its
	// goroutines on SIGQUIT and exits).
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("mask sysctl configuration: new mount namespace: %w", err)
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	st := cmd.ProcessState
	if st == nil {
		return 0, fmt.Errorf("mask sysctl configuration: %w", err)
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		fmt.Fprintf(os.Stderr, "testenv: test binary (in its mount namespace) %s\n", st)
		return 128 + int(ws.Signal()), nil
	}
	return st.ExitCode(), nil
}

// mountMasks mounts the masks in this process's new mount namespace: a
// tmpfs (MaskSource) on a scratch directory, an empty directory or file of
// it bound over each existing SysctlConfig entry, the scratch mount and
// directory then removed (the binds keep the tmpfs).
func mountMasks() error {
	fail := func(err error) error { return fmt.Errorf("mask sysctl configuration: %w", err) }
	// Go made the namespace's mounts private (Unshareflags); again,
	// because a mount that propagated would hide the machine's files
	// from the machine.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fail(fmt.Errorf("make / private: %w", err))
	}
	paths, err := sysctlPaths()
	if err != nil || len(paths) == 0 {
		return err
	}
	stage, err := os.MkdirTemp("", "pgtune-sysctl-mask-")
	if err != nil {
		return fail(err)
	}
	defer os.Remove(stage)
	if err := syscall.Mount(MaskSource, stage, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "mode=0755,size=16m"); err != nil {
		return fail(fmt.Errorf("tmpfs: %w", err))
	}
	defer func() { _ = syscall.Unmount(stage, syscall.MNT_DETACH) }()
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return fail(err)
		}
		src := filepath.Join(stage, strconv.Itoa(i))
		if fi.IsDir() {
			err = os.Mkdir(src, 0o755)
		} else {
			err = os.WriteFile(src, nil, 0o644)
		}
		if err == nil {
			err = os.Chmod(src, fi.Mode().Perm())
		}
		if err != nil {
			return fail(err)
		}
		if err := syscall.Mount(src, p, "", syscall.MS_BIND, ""); err != nil {
			return fail(fmt.Errorf("bind over %s: %w", p, err))
		}
	}
	return nil
}
