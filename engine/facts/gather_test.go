package facts

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine/expr"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

func itoa(n int) string { return strconv.Itoa(n) }

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseGather(t *testing.T) {
	tests := []struct {
		file  string
		check func(t *testing.T, f *Facts)
	}{
		{"gather-numa.txt", func(t *testing.T, f *Facts) {
			want := Facts{
				Hostname: "db-17.example.net", Kernel: "6.1.0-28-amd64", User: "deploy", IsRoot: true,
				MemTotal: 263921832 << 10, MemAvailable: 250000000 << 10, HugePageSize: 2 << 20,
				HugePagesTotal: 1024, HugePagesFree: 512, HugePagesRsvd: 100, SwapTotal: 8388604 << 10,
				CommitLimit: 140155520 << 10, CommittedAS: 12345678 << 10, PageTables: 98304 << 10,
				SysctlWritable: true, NUMANodes: 2,
			}
			if f.Hostname != want.Hostname || f.Kernel != want.Kernel || f.User != want.User || f.IsRoot != want.IsRoot {
				t.Errorf("identity: %+v", f)
			}
			if f.MemTotal != want.MemTotal || f.MemAvailable != want.MemAvailable || f.HugePageSize != want.HugePageSize ||
				f.HugePagesTotal != want.HugePagesTotal || f.HugePagesFree != want.HugePagesFree ||
				f.HugePagesRsvd != want.HugePagesRsvd || f.SwapTotal != want.SwapTotal ||
				f.CommitLimit != want.CommitLimit || f.CommittedAS != want.CommittedAS || f.PageTables != want.PageTables {
				t.Errorf("meminfo: got %+v", f)
			}
			if f.MinFree != 90112<<10 || f.SUnreclaim != 1843200<<10 {
				t.Errorf("kernel reserve: min_free %d sunreclaim %d", f.MinFree, f.SUnreclaim)
			}
			if !f.SysctlWritable || f.NUMANodes != 2 || f.NodeHugePages[0] != 512 || f.NodeHugePages[1] != 512 {
				t.Errorf("writable/numa: %v %d %v", f.SysctlWritable, f.NUMANodes, f.NodeHugePages)
			}
			if f.NodeList() != "node0=512 node1=512" {
				t.Errorf("NodeList = %q", f.NodeList())
			}
			if f.Sysctl["vm.overcommit_ratio"] != "50" || len(f.Sysctl) != 4 {
				t.Errorf("sysctl: %v", f.Sysctl)
			}
			var got []string
			for _, s := range f.SysctlFiles {
				got = append(got, s.File+":"+itoa(s.Line)+" "+s.Key+"="+s.Value)
			}
			wantFiles := []string{
				"/usr/lib/sysctl.d/05-first.conf:1 vm.*=3",
				"/etc/sysctl.d/10-hugepages.conf:2 vm.nr_hugepages=1024",
				"/usr/lib/sysctl.d/50-default.conf:1 vm.overcommit_memory=0",
				"/etc/sysctl.d/99-sysctl.conf:2 vm.overcommit_memory=1",
				"/etc/sysctl.d/99-sysctl.conf:3 vm.nr_hugepages=7",
				"/etc/sysctl.d/zz-db.conf:1 vm.overcommit_ratio=90",
				"/etc/sysctl.conf:1 vm.nr_hugepages=2048",
			}
			if strings.Join(got, "\n") != strings.Join(wantFiles, "\n") {
				t.Errorf("sysctl files:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(wantFiles, "\n     "))
			}
		}},
		{"gather-debian-vm.txt", func(t *testing.T, f *Facts) {
			if f.NUMANodes != 1 || f.NodeHugePages != nil {
				t.Errorf("single node: %d %v", f.NUMANodes, f.NodeHugePages)
			}
			if f.HugePageSize != 2<<20 || f.MemTotal <= 0 || f.CommitLimit <= 0 {
				t.Errorf("meminfo: %+v", f)
			}
			if f.MinFree != 67584<<10 || f.SUnreclaim != 28088<<10 {
				t.Errorf("kernel reserve: min_free %d sunreclaim %d", f.MinFree, f.SUnreclaim)
			}
			// Debian's stock files set none of the managed keys.
			if len(f.SysctlFiles) != 0 {
				t.Errorf("sysctl files: %+v", f.SysctlFiles)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			f, err := ParseGather(readTestdata(t, tt.file), testSets...)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, f)
		})
	}
}

func TestParseGatherErrors(t *testing.T) {
	for _, in := range []string{"", "H x\n", "M Foo: 1 kB\n"} {
		if _, err := ParseGather([]byte(in), testSets...); err == nil {
			t.Errorf("ParseGather(%q): no error", in)
		}
	}
}

// The kernel reserve comes from the host: out-of-range values are errors,
// an absent min_free_kbytes stays 0.
func TestParseGatherKernelReserve(t *testing.T) {
	const mem = "M MemTotal: 1048576 kB\n"
	for _, in := range []string{
		mem + "R -1\n",
		mem + "R 12abc\n",
		mem + "R 1048577\n",
		mem + "R 99999999999999999999\n",
		mem + "M SUnreclaim: 1048577 kB\n",
		mem + "M SUnreclaim: -4 kB\n",
	} {
		if _, err := ParseGather([]byte(in), testSets...); err == nil {
			t.Errorf("ParseGather(%q): no error", in)
		}
	}
	f, err := ParseGather([]byte(mem+"M SUnreclaim: 2048 kB\nR  4096 \n"), testSets...)
	if err != nil || f.MinFree != 4096<<10 || f.SUnreclaim != 2048<<10 {
		t.Errorf("got %+v, %v", f, err)
	}
	if f, err := ParseGather([]byte(mem), testSets...); err != nil || f.MinFree != 0 || f.SUnreclaim != 0 {
		t.Errorf("absent: %+v, %v", f, err)
	}
}

// A file line that looks like a tag stays a file line.
func TestParseGatherNoInjection(t *testing.T) {
	out := "M MemTotal: 1000 kB\nF /etc/sysctl.d/x.conf\nL S vm.nr_hugepages 5\nL W 0\nL vm.nr_hugepages = 3\n"
	f, err := ParseGather([]byte(out), testSets...)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Sysctl["vm.nr_hugepages"]; ok || f.SysctlWritable {
		t.Errorf("file content leaked into facts: %+v", f)
	}
	if len(f.SysctlFiles) != 1 || f.SysctlFiles[0].Line != 3 {
		t.Errorf("files: %+v", f.SysctlFiles)
	}
}

func TestScopeVars(t *testing.T) {
	f := numaFacts(t)
	m, err := f.ScopeVars()
	if err != nil {
		t.Fatal(err)
	}
	s := expr.NewScope("policy.yml")
	if err := s.Set("facts", m); err != nil {
		t.Fatal(err)
	}
	v, err := expr.Parse("${floor(facts.mem_total / 4) + facts.hugepage_size}", "policy.yml", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Int64(v)
	if err != nil {
		t.Fatal(err)
	}
	if want := f.MemTotal/4 + f.HugePageSize; got != want {
		t.Errorf("got %d, want %d", got, want)
	}
}

// TestGatherLocal runs the real script on this machine and compares with
// what the kernel says directly. It reads only what any user may read, and
// expects nothing of the machine: a kernel without hugetlb or a container
// with parts of /proc/sys hidden must come out as absent values, never as
// made-up ones.
func TestGatherLocal(t *testing.T) {
	// The facts and the kernel's own files are read apart: where another
	// package's test could change the kernel in between, hold it still.
	held := testhost.Steady(t) != nil
	// A hang guard, not a speed check.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f, err := Gather(ctx, transport.NewLocal(), Options{Sets: testSets})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	var memTotal, hpSize int64
	for _, line := range strings.Split(string(raw), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "MemTotal:":
			memTotal = n << 10
		case "Hugepagesize:":
			hpSize = n << 10
		}
	}
	if f.MemTotal != memTotal || f.HugePageSize != hpSize {
		t.Errorf("MemTotal %d HugePageSize %d, want %d %d", f.MemTotal, f.HugePageSize, memTotal, hpSize)
	}
	host, _ := os.Hostname()
	if f.Hostname != host {
		t.Errorf("Hostname %q, want %q", f.Hostname, host)
	}
	if f.IsRoot != (os.Geteuid() == 0) {
		t.Errorf("IsRoot %v", f.IsRoot)
	}
	for _, k := range testKeys {
		b, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(k, ".", "/"))
		got, gathered := f.Sysctl[k]
		if err != nil {
			// Not there or not readable here (no hugetlb, a container).
			if gathered {
				t.Errorf("sysctl %s = %q, but the kernel has none to read (%v)", k, got, err)
			}
			continue
		}
		// Without the lock another package may change values meanwhile:
		// then only presence and shape are compared.
		if _, err := strconv.ParseInt(got, 10, 64); err != nil || held && got != strings.TrimSpace(string(b)) {
			t.Errorf("sysctl %s = %q (kernel: %q)", k, got, strings.TrimSpace(string(b)))
		}
	}
	if f.NUMANodes < 1 {
		t.Errorf("NUMANodes %d", f.NUMANodes)
	}
	checkPoolsAgainstSysfs(t, f)
	b, err := os.ReadFile("/proc/sys/vm/min_free_kbytes")
	if err != nil {
		t.Fatal(err)
	}
	if kb, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); f.MinFree != kb<<10 || kb <= 0 {
		t.Errorf("MinFree %d, kernel says %d kB", f.MinFree, kb)
	}
	if f.SUnreclaim <= 0 || f.SUnreclaim >= f.MemTotal {
		t.Errorf("SUnreclaim %d", f.SUnreclaim)
	}
	if os.Geteuid() == 0 && !f.SysctlWritable {
		t.Logf("/proc/sys is read-only here")
	}
}

// TestGatherLocalSysctlFiles plants a file in /run/sysctl.d (tmpfs, gone
// at reboot and never applied by anything during the test) and checks that
// Gather finds it and ranks it by name.
func TestGatherLocalSysctlFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("writes /run/sysctl.d under the machine-wide kernel lock")
	}
	// The kernel lock also serializes planted sysctl files: a module
	// test running meanwhile would see this one as an override.
	testhost.LockKernel(t)
	dir := "/run/sysctl.d"
	created := false
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		created = true
	}
	name := "zzzz-pgtune-facts-test-" + strconv.Itoa(os.Getpid()) + ".conf"
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("# test\n  vm/overcommit_ratio =  77\n-vm.nr_hugepages=0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Remove(p)
		if created {
			os.Remove(dir)
		}
	})
	f, err := Gather(context.Background(), transport.NewLocal(), Options{Sets: testSets})
	if err != nil {
		t.Fatal(err)
	}
	// Its name sorts after every other sysctl.d file, so it wins, unless
	// this machine's /etc/sysctl.conf, applied after all of them, sets the
	// key too: then that line wins, and the planted one comes right
	// before it.
	for _, want := range []SysctlSetting{
		{File: p, Line: 2, Key: "vm.overcommit_ratio", Value: "77"},
		{File: p, Line: 3, Key: "vm.nr_hugepages", Value: "0"},
	} {
		all := f.SysctlAssignments(want.Key)
		i := slices.IndexFunc(all, func(s SysctlSetting) bool { return s.File == p })
		if i < 0 || all[i].Line != want.Line || all[i].Value != want.Value {
			t.Errorf("%s: assignments %+v; want %s:%d = %s among them", want.Key, all, p, want.Line, want.Value)
			continue
		}
		after := all[i+1:]
		for _, s := range after {
			if s.File != SysctlConf {
				t.Errorf("%s: %s:%d applied after %s", want.Key, s.File, s.Line, p)
			}
		}
		w, ok := f.SysctlWinner(want.Key)
		if len(after) == 0 && (!ok || w != all[i]) || len(after) > 0 && w != after[len(after)-1] {
			t.Errorf("winner %s = %+v, %v; assignments %+v", want.Key, w, ok, all)
		}
	}
}

// TestGatherReadsMeminfoOnce: the shell reads /proc/meminfo a byte at a
// time, so the gather reads it once, and takes the default huge page size
// from that pass: each NUMA node's line (N) is its pool of that size, as
// sysfs has it.
func TestGatherReadsMeminfoOnce(t *testing.T) {
	script := GatherScript(testSets)
	if n := strings.Count(script, "/proc/meminfo"); n != 1 {
		t.Errorf("the gather reads /proc/meminfo %d times; want once", n)
	}
	res, err := transport.NewLocal().Run(context.Background(), transport.Command{Args: []string{"sh", "-c", script, "sh"}})
	if err != nil {
		t.Fatal(err)
	}
	hp := ""
	for _, l := range strings.Split(string(res.Stdout), "\n") {
		if f := strings.Fields(strings.TrimPrefix(l, "M ")); strings.HasPrefix(l, "M ") && len(f) >= 2 && f[0] == "Hugepagesize:" {
			hp = f[1]
		}
	}
	nodes := 0
	for _, l := range strings.Split(string(res.Stdout), "\n") {
		id, v, ok := strings.Cut(strings.TrimPrefix(l, "N "), " ")
		if !strings.HasPrefix(l, "N ") || !ok {
			continue
		}
		nodes++
		want := ""
		if b, err := os.ReadFile("/sys/devices/system/node/node" + id + "/hugepages/hugepages-" + hp + "kB/nr_hugepages"); err == nil {
			want = strings.TrimSpace(string(b))
		}
		// Another package's test may change the pool meanwhile: the shape
		// is compared, a number where sysfs has one.
		if (v == "") != (want == "") {
			t.Errorf("node %s: %q, sysfs (hugepages-%skB) %q", id, v, hp, want)
		}
	}
	if _, err := os.Stat("/sys/devices/system/node/node0"); err == nil && nodes == 0 {
		t.Errorf("no N line: %s", res.Stdout)
	}
}
