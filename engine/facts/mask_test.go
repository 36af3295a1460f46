package facts

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testenv"
	"github.com/pgtune/pgtune/internal/testhost"
)

// TestSysctlConfigListMasked: testenv hides from the test binaries what the
// gather reads, all of it.
func TestSysctlConfigListMasked(t *testing.T) {
	want := append(slices.Clone(SysctlDirs), SysctlConf)
	if !slices.Equal(testenv.SysctlConfig, want) {
		t.Errorf("testenv.SysctlConfig = %v, the gather reads %v", testenv.SysctlConfig, want)
	}
}

// plantedEnv names, for TestGatherMaskedHelper, the machine's file its
// gather must not see.
const plantedEnv = "PGTUNE_TEST_PLANTED_SYSCTL"

// TestIntegrationGatherSeesNoMachineSysctl plants an override of both
// managed keys in the machine's /run/sysctl.d, as a DB or Redis host's
// own configuration would be, and starts this test binary in the
// machine's mount namespace, as go test does: its gather must not see the
// file (testenv.MaskSysctlConfig). The file exists only under the
// exclusive kernel lock, which every test that reads the sysctl
// configuration of a binary started without the masks takes.
func TestIntegrationGatherSeesNoMachineSysctl(t *testing.T) {
	testhost.LockKernel(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The machine's mount namespace is the one go test runs in, this
	// binary's parent's (testenv's, or go test itself): through its root,
	// as this binary's own /run/sysctl.d may be a mask.
	root := "/proc/" + strconv.Itoa(os.Getppid()) + "/root"
	dir := root + "/run/sysctl.d"
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(dir) }) // after the file's (LIFO)
	}
	name := "zzzz-pgtune-mask-test-" + strconv.Itoa(os.Getpid()) + ".conf"
	p := filepath.Join(dir, name)
	t.Cleanup(func() { os.Remove(p) })
	if err := os.WriteFile(p, []byte("vm.nr_hugepages = 0\nvm.overcommit_memory = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nsenter", "-t", strconv.Itoa(os.Getppid()), "-m", "--", exe, "-test.run=^TestGatherMaskedHelper$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), plantedEnv+"=/run/sysctl.d/"+name, plantedEnv+"_ROOT="+root)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the test binary, started in the machine's mount namespace: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// TestGatherMaskedHelper is TestIntegrationGatherSeesNoMachineSysctl's
// binary: it gathers this host and fails when it sees the planted file.
func TestGatherMaskedHelper(t *testing.T) {
	p := os.Getenv(plantedEnv)
	if p == "" {
		t.Skip("run by TestIntegrationGatherSeesNoMachineSysctl")
	}
	f, err := Gather(context.Background(), transport.NewLocal(), Options{Sets: testSets})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range f.SysctlFiles {
		if s.File == p {
			t.Errorf("the gather saw the machine's %s: %+v", p, s)
		}
	}
	if _, err := os.Stat(os.Getenv(plantedEnv+"_ROOT") + p); err != nil {
		t.Errorf("the planted file is not there: %v", err)
	}
}
