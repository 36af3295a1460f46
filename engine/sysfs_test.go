package engine

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

func TestSysfsValue(t *testing.T) {
	tests := []struct{ content, want string }{
		{"always [madvise] never\n", "madvise"},
		{"always defer defer+madvise [madvise] never\n", "madvise"},
		{"[always] madvise never", "always"},
		{"always madvise [never]\n", "never"},
		{"512\n", "512"},
		{"  1 \n", "1"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := SysfsValue(tc.content); got != tc.want {
			t.Errorf("SysfsValue(%q) = %q, want %q", tc.content, got, tc.want)
		}
	}
}

func TestValidSysfsEntry(t *testing.T) {
	const run = "20261130T190000Z-a1b2c3"
	const thp = "/sys/kernel/mm/transparent_hugepage/enabled"
	sysfs := func(p, before string) JournalEntry {
		return JournalEntry{Kind: "sysfs", Module: "m", Path: p, Before: before}
	}
	tests := []struct {
		name  string
		entry JournalEntry
		want  string // "" = valid
	}{
		{"as pgtune writes it", sysfs(thp, "madvise"), ""},
		{"empty previous value", sysfs(thp, ""), ""},
		{"outside /sys", sysfs("/etc/passwd", "x"), `/etc/passwd is not a clean path under /sys/`},
		{"/sys itself", sysfs("/sys", "x"), `is not a clean path under /sys/`},
		{"escapes /sys", sysfs("/sys/../etc/shadow", "x"), `is not a clean path under /sys/`},
		{"relative", sysfs("sys/kernel/mm/x", "x"), `is not a clean path under /sys/`},
		{"control character", sysfs("/sys/kernel/mm/x\n", "x"), `is not a clean path under /sys/`},
		{"multi-line value", sysfs(thp, "never\nalways"), "the previous value is not a kernel value"},
		{"long value", sysfs(thp, strings.Repeat("x", 257)), "the previous value is not a kernel value"},
		{"with a key", JournalEntry{Kind: "sysfs", Path: thp, Key: "vm.nr_hugepages"}, "a sysfs entry with a kernel key or a file backup"},
		{"with a backup", JournalEntry{Kind: "sysfs", Path: thp, Backup: "/var/lib/pgtune/runs/" + run + "/files" + thp}, "a sysfs entry with a kernel key or a file backup"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := validEntry(tc.entry, "/var/lib/pgtune/runs/"+run)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted; want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q\nwant it to contain %q", err, tc.want)
			}
		})
	}
	t.Run("described by its path", func(t *testing.T) {
		if got, want := describeEntry(sysfs(thp, "madvise")), "sysfs "+thp+" = madvise by module m"; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
}

// sysfsManager manages one sysfs file, as a module's Manages would.
type sysfsManager struct{ path string }

func (m sysfsManager) Manages(_ *Target, kind, target string) bool {
	return kind == "sysfs" && target == m.path
}

// TestSetSysfsRollback sets a real sysfs value through SetSysfs with a
// journal, then lets rollback plan, apply and verify putting it back.
func TestSetSysfsRollback(t *testing.T) {
	k := testhost.LockKernel(t)
	path := testhost.THPDefrag
	if _, err := os.Stat(path); err != nil {
		t.Skipf("a kernel without transparent huge pages: no %s to change", path)
	}
	start := k.KeepSysfs(t, path)[path]
	want := "never"
	if start == "never" {
		want = "madvise"
	}
	ctx := context.Background()
	dir := stateDirFor(t)
	tr := transport.NewLocal()
	j := NewJournal("20261130T190000Z-sysfs1", "local", dir, tr, false)
	tg := &Target{Name: "local", Transport: tr, Journal: j, StateDir: dir, Module: "thp"}

	if err := tg.SetSysfs(ctx, path, want); err != nil {
		t.Fatal(err)
	}
	if got, _ := testhost.ReadSysfs(path); got != want {
		t.Fatalf("after SetSysfs %s is %s, want %s", path, got, want)
	}
	// A second change of the same file keeps the first value before.
	if err := tg.SetSysfs(ctx, path, want); err != nil {
		t.Fatal(err)
	}
	if len(j.Entries) != 1 || j.Entries[0] != (JournalEntry{Kind: "sysfs", Module: "thp", Path: path, Before: start}) {
		t.Fatalf("journal %+v, want one sysfs entry with before %q", j.Entries, start)
	}

	rb := rollback{hooks: map[string]RollbackHook{}, managers: map[string]TargetManager{"thp": sysfsManager{path}}}
	rt := &Target{Name: "local", Transport: tr, StateDir: dir,
		Journal: NewJournal("20261130T190001Z-sysfs2", "local", dir, tr, false)}
	p, err := rb.Check(ctx, rt, &rollbackParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Changes) != 1 || p.Changes[0].Target != path || p.Changes[0].Before != want || p.Changes[0].After != start {
		t.Fatalf("rollback plan %+v, want %s: %s -> %s", p.Changes, path, want, start)
	}
	if err := rb.Apply(ctx, rt, p); err != nil {
		t.Fatal(err)
	}
	if err := rb.Verify(ctx, rt, p); err != nil {
		t.Fatal(err)
	}
	if got, _ := testhost.ReadSysfs(path); got != start {
		t.Fatalf("after rollback %s is %s, want %s", path, got, start)
	}

	t.Run("a file it does not manage is refused", func(t *testing.T) {
		other := rollback{hooks: map[string]RollbackHook{}, managers: map[string]TargetManager{"thp": sysfsManager{testhost.THPEnabled}}}
		_, err := other.Check(ctx, rt, &rollbackParams{})
		if err == nil || !strings.Contains(err.Error(), "module thp does not manage it on this host") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestSetSysfsRefusesBadInput(t *testing.T) {
	tg := &Target{Name: "local", Transport: transport.NewLocal()}
	for _, tc := range []struct{ path, value, want string }{
		{"/etc/passwd", "x", "not a clean path under /sys/"},
		{"/sys/kernel/../../etc/passwd", "x", "not a clean path under /sys/"},
		{testhost.THPEnabled, "never\nalways", "not a kernel value"},
	} {
		err := tg.SetSysfs(context.Background(), tc.path, tc.value)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("SetSysfs(%q, %q) = %v, want %q", tc.path, tc.value, err, tc.want)
		}
	}
}
