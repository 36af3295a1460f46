//go:build benchfleet

package benchfleet

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cpuGroup is a cgroup holding the sshd endpoints: every process they
// start is in it and stays in it, so its CPU counter is the hosts' whole
// work, whoever reaps the processes.
type cpuGroup struct {
	dir   string
	v2    bool // cpu.stat usage_usec; else cpuacct.usage (ns)
	procs string
}

// newCPUGroup makes the bench's cgroup (v2 with the cpu controller, else
// v1 cpuacct); nil when neither can be made.
func newCPUGroup(b *testing.B) *cpuGroup {
	name := fmt.Sprintf("pgtune-bench-%d", os.Getpid())
	for _, c := range []struct {
		root string
		v2   bool
	}{{"/sys/fs/cgroup", true}, {"/sys/fs/cgroup/unified", true}, {"/sys/fs/cgroup/cpuacct", false}} {
		if c.v2 {
			ctl, err := os.ReadFile(filepath.Join(c.root, "cgroup.controllers"))
			if err != nil || !strings.Contains(" "+string(ctl)+" ", " cpu ") {
				continue
			}
		} else if _, err := os.Stat(filepath.Join(c.root, "cpuacct.usage")); err != nil {
			continue
		}
		dir := filepath.Join(c.root, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			continue
		}
		g := &cpuGroup{dir: dir, v2: c.v2, procs: filepath.Join(dir, "cgroup.procs")}
		b.Cleanup(func() { g.remove() })
		return g
	}
	b.Log("no cgroup for the endpoints: hosts CPU counts reaped children only (an undercount)")
	return nil
}

func (g *cpuGroup) add(b *testing.B, pid int) {
	if g == nil {
		return
	}
	if err := os.WriteFile(g.procs, []byte(strconv.Itoa(pid)), 0o644); err != nil {
		b.Fatalf("cgroup %s: %v", g.dir, err)
	}
}

func (g *cpuGroup) usage(b *testing.B) time.Duration {
	if g.v2 {
		data, err := os.ReadFile(filepath.Join(g.dir, "cpu.stat"))
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(l, "usage_usec "); ok {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return time.Duration(n) * time.Microsecond
			}
		}
		b.Fatal("cpu.stat: no usage_usec")
	}
	data, err := os.ReadFile(filepath.Join(g.dir, "cpuacct.usage"))
	if err != nil {
		b.Fatal(err)
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return time.Duration(n)
}

// remove deletes the group once its processes are gone (the sshd
// cleanups run first: registered later, they run earlier).
func (g *cpuGroup) remove() {
	for i := 0; i < 100; i++ {
		if err := os.Remove(g.dir); err == nil || os.IsNotExist(err) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
