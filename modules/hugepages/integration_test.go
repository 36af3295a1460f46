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

func integrationParams(t *testing.T, pool string) (*Params, string) {
	prm := DefaultParams()
	prm.Pool = val(t, pool)
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
	before, _ := strconv.ParseInt(st.Values["vm.nr_hugepages"], 10, 64)
	// Grow by 256 MiB: small enough never to squeeze the machine, a real
	// allocation all the same.
	m := New()
	tg := moduletest.LocalTarget(t, tr, New())
	want := before + 256*MiB/tg.Facts.HugePageSize
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

	// And back down through the module: shrinking free pages works.
	prm.Pool = val(t, strconv.FormatInt(before*tg.Facts.HugePageSize, 10))
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
// passes a smaller vm.nr_hugepages than asked, so the kernel really holds
// fewer pages than planned, as on a fragmented host. (Really exhausting
// memory to provoke a shortfall would squeeze everything else running on
// this shared machine toward the OOM killer.)
type shortKernel struct {
	transport.Transport
	by     int64
	writes []string
}

func (s *shortKernel) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	a := cmd.Args
	if cmd.Op == engine.OpSetSysctl && len(a) == 6 && a[4] == "vm.nr_hugepages" {
		s.writes = append(s.writes, a[5])
		if n, err := strconv.ParseInt(a[5], 10, 64); err == nil && s.by > 0 && len(s.writes) <= 2 {
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
	tr := &shortKernel{Transport: transport.NewLocal(), by: 7}
	prm, file := integrationParams(t, "${facts.hugepages_total * facts.hugepage_size + 128 * MiB}")
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
	want := tg.Facts.HugePagesTotal - tg.Facts.HugePagesSurp + 128*MiB/tg.Facts.HugePageSize
	err = m.Apply(ctx, tg, p)
	wantErr := "allocated " + strconv.FormatInt(want-7, 10) + " of " + strconv.FormatInt(want, 10) + " huge pages"
	if err == nil || !strings.Contains(err.Error(), wantErr) || !strings.Contains(err.Error(), "the pool is back at "+st.Values["vm.nr_hugepages"]+" pages") {
		t.Fatalf("apply: %v, want %q", err, wantErr)
	}
	if len(tr.writes) != 3 {
		t.Errorf("writes %v: want ask, retry, back out", tr.writes)
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
	other := filepath.Join(dir, "50-pgtune-test-"+strconv.Itoa(os.Getpid())+".conf")
	content := "# test\nvm.nr_hugepages = 3\n"
	if err := os.WriteFile(other, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(other) })

	m := New()
	tr := transport.NewLocal()
	tg := moduletest.LocalTarget(t, tr, New())
	before, _ := strconv.ParseInt(st.Values["vm.nr_hugepages"], 10, 64)
	prm, _ := integrationParams(t, strconv.FormatInt((before*tg.Facts.HugePageSize)+64*MiB, 10))
	p, err := m.Check(ctx, tg, prm)
	if err != nil {
		t.Fatal(err)
	}
	if c := moduletest.Changes(p); len(c) != 3 || !strings.HasPrefix(c[2], other+":2 vm.nr_hugepages = 3→(overrides") {
		t.Fatalf("plan: %q", c)
	}
	if err := m.Apply(ctx, tg, p); err == nil || !strings.Contains(err.Error(), other+":2 sets vm.nr_hugepages = 3") {
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
	if !strings.Contains(string(data), "# vm.nr_hugepages = 3  # commented out by pgtune") {
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
