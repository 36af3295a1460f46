package hugepages

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
	"github.com/pgtune/pgtune/modules/internal/moduletest"
)

// These tests change this machine's real vm.nr_hugepages through the
// local transport, under the machine-wide kernel lock, with the sysctl
// file in a temporary directory; the lock's cleanup puts the pool back.

// integrationParams grows no more than a few pages of the default size:
// min_available is off, as the preflight's verdict depends on this
// machine's MemAvailable (the preflight has its unit tests).
func integrationParams(t *testing.T, pool string) (*Params, string) {
	prm := DefaultParams()
	prm.Pool = val(t, pool)
	prm.MinAvailable = val(t, "0")
	file := filepath.Join(t.TempDir(), "10-hugepages.conf")
	prm.SysctlFile = val(t, file)
	return prm, file
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestIntegrationGrowVerifyRecheck(t *testing.T) {
	if testing.Short() {
		t.Skip("changes the kernel")
	}
	st := testhost.LockKernel(t)
	ctx := ctxT(t)
	tr := transport.NewLocal()
	before := st.Pages()
	// Grow by 256 MiB (one page where the default size is larger): small
	// enough never to squeeze the machine, a real allocation all the same.
	m := New()
	tg := moduletest.LocalTarget(t, tr, New())
	want, _ := st.GrowBy(256 * MiB)
	prm, file := integrationParams(t, strconv.FormatInt(want*tg.Facts.HugePageSize, 10))

	p, err := m.Check(ctx, tg, prm)
	if err != nil {
		t.Fatal(err)
	}
	got := moduletest.Changes(p)
	if len(got) != 2 || got[0] != "vm.nr_hugepages "+strconv.FormatInt(before, 10)+"→"+strconv.FormatInt(want, 10) || got[1] != "file "+file {
		t.Fatalf("plan: %q", got)
	}
	if n, _ := testhost.ReadSysctl("vm.nr_hugepages"); n != st.Values["vm.nr_hugepages"] {
		t.Fatalf("check changed the kernel: %s", n)
	}
	if err := m.Apply(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	mi, err := testhost.Meminfo()
	if err != nil {
		t.Fatal(err)
	}
	if mi["HugePages_Total"]-mi["HugePages_Surp"] != want {
		t.Errorf("HugePages_Total %d, want %d", mi["HugePages_Total"], want)
	}
	data, err := os.ReadFile(file)
	if err != nil || !strings.Contains(string(data), "vm.nr_hugepages = "+strconv.FormatInt(want, 10)+"\n") {
		t.Errorf("file: %q %v", data, err)
	}
	again, err := m.Check(ctx, moduletest.LocalTarget(t, tr, New()), prm)
	if err != nil {
		t.Fatal(err)
	}
	if again.HasChanges() {
		t.Errorf("re-check after apply: %q", moduletest.Changes(again))
	}

	// And back down through the module: shrinking free pages works (never
	// below the pages others hold, which the module refuses).
	prm.Pool = val(t, strconv.FormatInt(max(before, st.ShrinkFloor())*tg.Facts.HugePageSize, 10))
	tg = moduletest.LocalTarget(t, tr, New())
	p, err = m.Check(ctx, tg, prm)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
}

// shortKernel injects a fault between the module and the real kernel: it
// passes a smaller vm.nr_hugepages than asked whenever the pool is to grow
// above from, so the kernel really holds fewer pages than planned, as on a
// fragmented host; a write back to from or below passes as it is. (Really
// exhausting memory to provoke a shortfall would squeeze everything else
// running on this shared machine toward the OOM killer.)
type shortKernel struct {
	transport.Transport
	from, by int64
	writes   []string
}

func (s *shortKernel) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	a := cmd.Args
	if cmd.Op == engine.OpSetSysctl && len(a) == 6 && a[4] == "vm.nr_hugepages" {
		s.writes = append(s.writes, a[5])
		if n, err := strconv.ParseInt(a[5], 10, 64); err == nil && s.by > 0 && n > s.from {
			cmd.Args = append(append([]string(nil), a[:5]...), strconv.FormatInt(n-s.by, 10))
		}
	}
	return s.Transport.Run(ctx, cmd)
}

func TestIntegrationShortfallBacksOut(t *testing.T) {
	if testing.Short() {
		t.Skip("changes the kernel")
	}
	st := testhost.LockKernel(t)
	ctx := ctxT(t)
	// Grow by 128 MiB (one page of a larger default size); the kernel is
	// given up to 7 pages fewer, never fewer than it had.
	want, added := st.GrowBy(128 * MiB)
	by := min(7, added)
	tr := &shortKernel{Transport: transport.NewLocal(), from: st.Pages(), by: by}
	size := st.PageSize()
	prm, file := integrationParams(t, strconv.FormatInt(want*size, 10))
	// The retries' pauses (gigantic default pages back off for 30 s)
	// change nothing here: every retry falls short the same way.
	retries := len((&State{PageSize: size}).retryWaits())
	pauseWas := pause
	pause = func(context.Context, time.Duration) error { return nil }
	t.Cleanup(func() { pause = pauseWas })
	// An older file of ours must come back as it was.
	old := "vm.nr_hugepages = " + st.Values["vm.nr_hugepages"] + "\n"
	if err := os.WriteFile(file, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	m := New()
	tg := moduletest.LocalTarget(t, tr, New())
	p, err := m.Check(ctx, tg, prm)
	if err != nil {
		t.Fatal(err)
	}
	err = m.Apply(ctx, tg, p)
	wantErr := "allocated " + strconv.FormatInt(want-by, 10) + " of " + strconv.FormatInt(want, 10) + " huge pages"
	if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.Contains(err.Error(), "the pool is back at "+st.Values["vm.nr_hugepages"]+" pages") {
		t.Fatalf("apply: %v, want %q", err, wantErr)
	}
	if len(tr.writes) != 1+retries+1 {
		t.Errorf("writes %v: want ask, %d retries, back out", tr.writes, retries)
	}
	if n, _ := testhost.ReadSysctl("vm.nr_hugepages"); n != st.Values["vm.nr_hugepages"] {
		t.Errorf("pool left at %s, was %s", n, st.Values["vm.nr_hugepages"])
	}
	if data, _ := os.ReadFile(file); string(data) != old {
		t.Errorf("file left as %q, was %q", data, old)
	}
}

func TestIntegrationOverrideOnThisHost(t *testing.T) {
	if testing.Short() {
		t.Skip("changes the kernel")
	}
	st := testhost.LockKernel(t)
	ctx := ctxT(t)
	// /run/sysctl.d is tmpfs and read only by `sysctl --system` or a boot:
	// nothing applies this file while the test runs.
	dir := "/run/sysctl.d"
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(dir) })
	}
	// The other file's value differs from the pool planned, whatever the
	// machine: an equal value is no conflict (a pool of 2 pages of a 1 GiB
	// default size grows to 3, so no fixed number will do).
	grown, _ := st.GrowBy(64 * MiB)
	otherValue := strconv.FormatInt(grown+1, 10)
	other := filepath.Join(dir, "50-pgtune-test-"+strconv.Itoa(os.Getpid())+".conf")
	content := "# test\nvm.nr_hugepages = " + otherValue + "\n"
	if err := os.WriteFile(other, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(other) })

	m := New()
	tr := transport.NewLocal()
	tg := moduletest.LocalTarget(t, tr, New())
	prm, _ := integrationParams(t, strconv.FormatInt(grown*tg.Facts.HugePageSize, 10))
	p, err := m.Check(ctx, tg, prm)
	if err != nil {
		t.Fatal(err)
	}
	if c := moduletest.Changes(p); len(c) != 3 || !strings.HasPrefix(c[2], other+":2 vm.nr_hugepages = "+otherValue+"→(overrides") {
		t.Fatalf("plan: %q", c)
	}
	if err := m.Apply(ctx, tg, p); err == nil || !strings.Contains(err.Error(), other+":2 sets vm.nr_hugepages = "+otherValue) {
		t.Fatalf("apply: %v", err)
	}
	if n, _ := testhost.ReadSysctl("vm.nr_hugepages"); n != st.Values["vm.nr_hugepages"] {
		t.Errorf("refused apply changed the pool: %s", n)
	}

	prm.OnConflict = val(t, "comment")
	tg = moduletest.LocalTarget(t, tr, New())
	p, err = m.Check(ctx, tg, prm)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(ctx, tg, p); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(other)
	if !strings.Contains(string(data), "# vm.nr_hugepages = "+otherValue+"  # commented out by pgtune") {
		t.Errorf("other file: %q", data)
	}
	// The run's journal keeps the file as it was.
	if b, _ := os.ReadFile(filepath.Join(tg.Journal.Dir(), "files", other)); string(b) != content {
		t.Errorf("backup: %q", b)
	}
	again, err := m.Check(ctx, moduletest.LocalTarget(t, tr, New()), prm)
	if err != nil {
		t.Fatal(err)
	}
	if again.HasChanges() {
		t.Errorf("re-check: %q", moduletest.Changes(again))
	}
}
