package testhost

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// THPEnabled and THPDefrag are the transparent huge page settings.
const (
	THPEnabled = "/sys/kernel/mm/transparent_hugepage/enabled"
	THPDefrag  = "/sys/kernel/mm/transparent_hugepage/defrag"
)

// SysfsSnapshotFile holds the sysfs values the current kernel lock holder
// must restore, like SnapshotFile for kernel keys.
const SysfsSnapshotFile = "/run/pgtune-kernel.sysfs-snapshot"

// KeepSysfs snapshots sysfs settings (choice files read as their bracketed
// word) and writes them back when the test ends, before the kernel lock
// is released. Call it right after LockKernel. Values a holder killed
// before its cleanup left behind are put back first.
func (s *KernelState) KeepSysfs(t testing.TB, paths ...string) map[string]string {
	t.Helper()
	if err := restoreSysfsLeftover(t); err != nil {
		t.Fatalf("kernel lock: %v", err)
	}
	snap := map[string]string{}
	for _, p := range paths {
		v, err := ReadSysfs(p)
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		snap[p] = v
	}
	data, err := json.Marshal(snap)
	if err == nil {
		err = os.WriteFile(SysfsSnapshotFile, data, 0o600)
	}
	if err != nil {
		t.Fatalf("kernel lock: %v", err)
	}
	t.Cleanup(func() {
		if err := restoreSysfs(snap); err != nil {
			t.Errorf("restore sysfs settings: %v", err)
			return
		}
		os.Remove(SysfsSnapshotFile)
	})
	return snap
}

func restoreSysfsLeftover(t testing.TB) error {
	data, err := os.ReadFile(SysfsSnapshotFile)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var left map[string]string
	if err := json.Unmarshal(data, &left); err != nil {
		return fmt.Errorf("%s: %w", SysfsSnapshotFile, err)
	}
	t.Logf("a previous test died holding the kernel lock: restoring %v", left)
	if err := restoreSysfs(left); err != nil {
		return err
	}
	return os.Remove(SysfsSnapshotFile)
}

// restoreSysfs writes every value back and checks it took.
func restoreSysfs(snap map[string]string) error {
	var errs []string
	for p, want := range snap {
		err := WriteSysfs(p, want)
		if err == nil {
			var got string
			if got, err = ReadSysfs(p); err == nil && got != want {
				err = fmt.Errorf("%s is %s after restore, want %s", p, got, want)
			}
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

var selected = regexp.MustCompile(`\[([^\[\]\s]+)\]`)

// ReadSysfs reads a sysfs setting: the bracketed word of a choice file
// ("always [madvise] never" is madvise), else the trimmed content.
func ReadSysfs(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	if m := selected.FindSubmatch(b); m != nil {
		return string(m[1]), nil
	}
	return strings.TrimSpace(string(b)), nil
}

// WriteSysfs sets a sysfs setting.
func WriteSysfs(p, value string) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(value + "\n")
	cerr := f.Close()
	if werr != nil {
		return fmt.Errorf("write %s=%s: %w", p, value, werr)
	}
	return cerr
}
