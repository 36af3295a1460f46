package overcommit

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
	"github.com/pgtune/pgtune/modules/hugepages"
	"github.com/pgtune/pgtune/modules/internal/moduletest"
)

// These tests switch this machine to strict overcommit for a moment,
// through the local transport, under the machine-wide kernel lock, with a
// limit far above what is committed; the lock's cleanup restores the
// previous mode and limit right after.

func TestIntegrationStrictOvercommit(t *testing.T) {
	if testing.Short() {
		t.Skip("changes the kernel")
	}
	st := testhost.LockKernel(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	tg := moduletest.LocalTarget(t, transport.NewLocal(), New())
	f := tg.Facts
	// Plan the limit from what hugepages would plan (check only), as the
	// runner does.
	hp := hugepages.New()
	hprm := hugepages.DefaultParams()
	hprm.SysctlFile = val(t, filepath.Join(t.TempDir(), "10-hugepages.conf"))
	hprm.MinAvailable = val(t, "0") // check only: the floor is hugepages' business
	// The default pool, unless other processes hold more than that (the
	// module refuses to plan below them).
	if held := st.ReservedPages() * f.HugePageSize; held > f.MemTotal/4 {
		hprm.Pool = val(t, strconv.FormatInt(held, 10))
	}
	hplan, err := hp.Check(ctx, tg, hprm)
	if err != nil {
		t.Fatal(err)
	}
	tg.SetOutputs(hugepages.Name, hplan.Outputs)
	// Pools of other page sizes (someone's 1 GiB pages) are outside the
	// commit budget too.
	pool := hplan.Outputs["pool"].(int64) + hplan.Outputs["other_pools"].(int64)
	// (Equal to what the machine holds, unless hugepages plans to give back
	// a pool an earlier page_size of pgtune's left.)
	t.Logf("other page sizes' pools: %v bytes planned, %d held now", hplan.Outputs["other_pools"], st.OtherPools())
	wantKb := Limit(f.MemTotal, pool, 0.8, min(2*GiB, f.MemTotal/16))

	file := filepath.Join(t.TempDir(), "99-overcommit.conf")
	prm := DefaultParams()
	prm.SysctlFile = val(t, file)
	m := New()
	p, err := m.Check(ctx, tg, prm)
	if err != nil {
		t.Fatal(err)
	}
	if p.Outputs["kbytes"] != wantKb {
		t.Fatalf("kbytes %v, want %d", p.Outputs["kbytes"], wantKb)
	}
	// The verdict on this machine's own facts: the relation, computed
	// here from the facts, not asserted. On most machines the default
	// policy protects (0.6 × MemTotal + at most MemTotal / 16 against 0.75
	// × MemTotal less the kernel's reserve), but min_free_kbytes, the
	// unreclaimable slab and others' pools are this machine's.
	backing := f.MemTotal - pool - f.MinFree - f.SUnreclaim + f.SwapTotal
	limit := wantKb<<10 + f.SwapTotal
	if f.MinFree <= 0 || f.SUnreclaim <= 0 || p.Outputs["commit_limit"] != limit || p.Outputs["backing"] != backing {
		t.Fatalf("outputs %v: want commit_limit %d = kbytes + swap, backing %d = MemTotal − pool − min_free %d − SUnreclaim %d + swap",
			p.Outputs, limit, backing, f.MinFree, f.SUnreclaim)
	}
	protective := limit <= backing
	flagged := len(p.Changes) > 0 && p.Changes[0].Target == "commit limit"
	if p.Outputs["protective"] != protective || flagged == protective {
		t.Errorf("verdict %v (flagged %v), want protective %v (limit %d, backing %d): %v; notes %q",
			p.Outputs["protective"], flagged, protective, limit, backing, moduletest.Changes(p), p.Notes)
	}
	for _, n := range p.Notes {
		if strings.HasPrefix(n, "commit limit ") {
			t.Logf("verdict: %s", n)
		}
	}
	policyLimit := true
	if !protective {
		// Not a defect of this test: apply the same limit, accepted.
		t.Logf("the default policy's limit is not protective on this machine; accepting it to test the code path")
		prm.AcceptUnprotective = val(t, "true")
		policyLimit = false
		if p, err = m.Check(ctx, tg, prm); err != nil {
			t.Fatal(err)
		}
	}
	// Safety: the limit switched on must dwarf what is committed now
	// (other engineers' VMs and builds run here), or strict mode could
	// fail someone's fork. When the policy's own limit is too tight for
	// that, apply an explicit, larger kbytes: the code path is the same.
	if safe := 4 * f.CommittedAS >> 10; wantKb < safe {
		t.Logf("policy limit %d kB is under 4 × Committed_AS here; applying kbytes = %d instead", wantKb, safe)
		wantKb = safe
		prm.Kbytes = val(t, strconv.FormatInt(safe, 10))
		// Such a limit may well not be protective: accept it, the point
		// here is the code path, not the verdict.
		prm.AcceptUnprotective = val(t, "true")
		policyLimit = false
		if p, err = m.Check(ctx, tg, prm); err != nil {
			t.Fatal(err)
		}
	}
	got := moduletest.Changes(p)
	if len(got) == 0 || got[len(got)-1] != "file "+file {
		t.Fatalf("plan: %q", got)
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
	if v, _ := testhost.ReadSysctl("vm.overcommit_memory"); v != "2" {
		t.Errorf("overcommit_memory %s", v)
	}
	if d := wantKb + mi["SwapTotal"] - mi["CommitLimit"]; d < 0 || d >= 64 { // the kernel counts in pages
		t.Errorf("CommitLimit %d kB, want %d + swap %d", mi["CommitLimit"], wantKb, mi["SwapTotal"])
	}
	// What the kernel now enforces stays within what can back it (the
	// slab snapshot is re-read: the relation must hold on live numbers).
	if policyLimit {
		if live := mi["MemTotal"] - pool>>10 - f.MinFree>>10 - mi["SUnreclaim"] + mi["SwapTotal"]; mi["CommitLimit"] > live {
			t.Errorf("live CommitLimit %d kB is above the %d kB that can back it", mi["CommitLimit"], live)
		}
	}
	data, _ := os.ReadFile(file)
	if !strings.Contains(string(data), "vm.overcommit_kbytes = "+strconv.FormatInt(wantKb, 10)+"\nvm.overcommit_memory = 2\n") {
		t.Errorf("file: %q", data)
	}
	again := moduletest.LocalTarget(t, transport.NewLocal(), New())
	again.SetOutputs(hugepages.Name, hplan.Outputs)
	p2, err := m.Check(ctx, again, prm)
	if err != nil {
		t.Fatal(err)
	}
	if p2.HasChanges() {
		t.Errorf("re-check: %q", moduletest.Changes(p2))
	}
}

// A limit below what is already committed is refused in check, naming the
// biggest committers of this machine, and nothing changes.
func TestIntegrationPreflightRefuses(t *testing.T) {
	if testing.Short() {
		t.Skip("reads every process")
	}
	st := testhost.LockKernel(t)
	tg := moduletest.LocalTarget(t, transport.NewLocal(), New())
	prm := DefaultParams()
	prm.SysctlFile = val(t, filepath.Join(t.TempDir(), "99-overcommit.conf"))
	// The smallest limit, and a max_committed below what is committed
	// against it: CommitLimit counts all of swap, which may be larger than
	// anything committed here, so no kbytes alone is sure to be refused.
	prm.Kbytes = val(t, "1")
	prm.MaxCommitted = val(t, "${min(1, facts.committed_as / (KiB + facts.swap_total) / 2)}")
	_, err := New().Check(context.Background(), tg, prm)
	if err == nil || !strings.Contains(err.Error(), "refusing strict overcommit. Top committers (VmData+VmStk): ") ||
		!strings.Contains(err.Error(), "(pid ") {
		t.Fatalf("check: %v", err)
	}
	t.Log(err)
	for k, v := range st.Values {
		if now, _ := testhost.ReadSysctl(k); now != v {
			t.Errorf("%s changed to %s", k, now)
		}
	}
}
