//go:build benchfleet

// Package benchfleet times a fleet check (make bench-fleet): N real sshd
// endpoints on 127.0.0.1, all in front of this machine and one PostgreSQL
// 15 cluster, checked by the pgtune binary, and the same hosts checked by
// ansible-playbook --check --diff with an equivalent playbook. It is a
// benchmark, not a test: it asserts only that the runs worked, and prints
// the numbers.
package benchfleet

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/pgtune/pgtune/internal/testhost"
)

// benchUser is who both tools log in as, with passwordless sudo (become).
// Not root: root's shell here is bash, which sources root's ~/.bashrc for
// every command sshd runs, and on a developer machine that rc file may
// start a Python version manager or worse: a cost that has nothing to do
// with either tool. A plain account whose shell is sh runs nothing extra.
const benchUser = "pgtune-sudo" // the integration tests' sudo user

// portsPerSSHD is how many ports one sshd listens on.
const portsPerSSHD = 16

// fleet is N endpoints: sshd processes sharing the keys of base.
type fleet struct {
	cpu     *cpuGroup // the endpoints' CPU, every descendant included; nil: none
	base    *testhost.SSHServer
	ports   []int
	sshds   []*exec.Cmd
	logs    []string
	pids    []int
	known   string // known_hosts with every port
	workDir string
}

func startFleet(b *testing.B, n int) *fleet {
	b.Helper()
	base := testhost.SSHD(b, "MaxStartups 2000", "MaxSessions 200")
	f := &fleet{base: base, workDir: b.TempDir(), cpu: newCPUGroup(b)}
	conf, err := os.ReadFile(filepath.Join(base.Dir, "sshd_config"))
	if err != nil {
		b.Fatal(err)
	}
	var common []string
	for _, l := range strings.Split(string(conf), "\n") {
		k := strings.ToLower(strings.Fields(l + " x")[0])
		if k == "port" || k == "pidfile" || k == "loglevel" || k == "listenaddress" {
			continue
		}
		common = append(common, l)
	}
	hostKey := strings.SplitN(base.HostKeyLine, " ", 2)[1]
	var known strings.Builder
	ports := freePorts(b, n)
	for i := 0; i*portsPerSSHD < n; i++ {
		var cf []string
		for j := 0; j < portsPerSSHD && i*portsPerSSHD+j < n; j++ {
			p := ports[i*portsPerSSHD+j]
			f.ports = append(f.ports, p)
			cf = append(cf, "Port "+strconv.Itoa(p))
			fmt.Fprintf(&known, "[127.0.0.1]:%d %s\n", p, hostKey)
		}
		dir := filepath.Join(f.workDir, fmt.Sprintf("sshd%03d", i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		pid, logFile := filepath.Join(dir, "sshd.pid"), filepath.Join(dir, "sshd.log")
		// DEBUG1 logs each exec request: the round trips are counted from it.
		cf = append(cf, "ListenAddress 127.0.0.1", "PidFile "+pid, "LogLevel DEBUG1")
		cf = append(cf, common...)
		path := filepath.Join(dir, "sshd_config")
		if err := os.WriteFile(path, []byte(strings.Join(cf, "\n")+"\n"), 0o600); err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command("/usr/sbin/sshd", "-D", "-E", logFile, "-f", path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		f.cpu.add(b, cmd.Process.Pid)
		f.sshds = append(f.sshds, cmd)
		f.logs = append(f.logs, logFile)
		f.pids = append(f.pids, cmd.Process.Pid)
		b.Cleanup(func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			_ = cmd.Wait()
		})
	}
	for _, p := range f.ports {
		waitPort(b, p)
	}
	f.known = filepath.Join(f.workDir, "known_hosts")
	if err := os.WriteFile(f.known, []byte(known.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	return f
}

// freePorts returns n distinct free ports: each is held open until all
// are chosen, so the kernel cannot hand out one twice, as it may when
// ports are picked (and let go) one at a time.
func freePorts(b *testing.B, n int) []int {
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatalf("port %d of %d: %v", i+1, n, err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// waitPort waits for sshd to accept on p: a listener that is not up yet
// refuses at once, so this is a short bounded retry, not a sleep.
func waitPort(b *testing.B, p int) {
	for i := 0; i < 200; i++ {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err == nil {
			c.Close()
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	b.Fatalf("sshd on port %d did not come up", p)
}

// hostCPU is the CPU time of everything the sshd endpoints ran
// (sessions, shells, sudo, postgres -C, ...): from their cgroup when there
// is one, else from each sshd's finished children (/proc/PID/stat), which
// misses every process that is not waited for by its parent up to sshd
// (measured: most of a session's work).
func (f *fleet) hostCPU(b *testing.B) time.Duration {
	if f.cpu != nil {
		return f.cpu.usage(b)
	}
	var total time.Duration
	for _, pid := range f.pids {
		total += childrenCPU(b, pid)
	}
	return total
}

func childrenCPU(b *testing.B, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (which may hold spaces) start at state.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	var ticks int64
	for _, i := range []int{13, 14} { // cutime, cstime (fields 16, 17)
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// awaitSessionsReaped waits (bounded) until no sshd has a session child
// left: a session's CPU reaches its sshd's counters when it is reaped.
func (f *fleet) awaitSessionsReaped(b *testing.B) {
	for i := 0; i < 400; i++ {
		busy := false
		for _, pid := range f.pids {
			c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
			busy = busy || len(strings.TrimSpace(string(c))) > 0
		}
		if !busy {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	b.Log("sshd sessions still open after 10 s: their CPU is not counted")
}

// endControlMasters ends the ssh ControlPersist masters Ansible left, by
// pid: those whose command line names the bench's control path directory.
func endControlMasters(b *testing.B, dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		c, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(c, []byte(dir)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
	}
}

// execs counts exec requests in the sshd logs since mark (byte offsets).
func (f *fleet) execs(b *testing.B, mark []int64) int {
	n := 0
	for i, p := range f.logs {
		fh, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = fh.Seek(mark[i], 0)
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "request exec") || strings.Contains(sc.Text(), "request subsystem") {
				n++
			}
		}
		fh.Close()
	}
	return n
}

func (f *fleet) logMark() []int64 {
	out := make([]int64, len(f.logs))
	for i, p := range f.logs {
		if st, err := os.Stat(p); err == nil {
			out[i] = st.Size()
		}
	}
	return out
}

// machineCPU is the busy time of the whole machine so far (/proc/stat),
// which includes whatever else runs on it.
func machineCPU(b *testing.B) time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])[1:]
	var busy int64
	for i, v := range f {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * time.Second / 100
}

type result struct {
	tool          string
	hosts         int
	wall          time.Duration
	execs         int
	controllerCPU time.Duration
	hostCPU       time.Duration
	machineCPU    time.Duration
	peakFDs       int
	peakRSSKB     int64
	outcome       string
	load          string // load averages (1 min) at the start and the end
}

// measure runs cmd and samples its open descriptors while it runs.
func (f *fleet) measure(b *testing.B, tool string, hosts int, cmd *exec.Cmd, settle func()) (result, []byte) {
	b.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	mark, h0, m0, l0 := f.logMark(), f.hostCPU(b), machineCPU(b), loadAvg()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	peak := 0
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", cmd.Process.Pid)); err == nil {
					mu.Lock()
					peak = max(peak, len(ents))
					mu.Unlock()
				}
			}
		}
	}()
	err := cmd.Wait()
	wall := time.Since(start)
	close(done)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		b.Fatal(err)
	}
	if settle != nil {
		settle()
	}
	f.awaitSessionsReaped(b)
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	mu.Lock()
	defer mu.Unlock()
	r := result{tool: tool, hosts: hosts, wall: wall, execs: f.execs(b, mark), controllerCPU: cpu,
		hostCPU: f.hostCPU(b) - h0, machineCPU: machineCPU(b) - m0, peakFDs: peak, peakRSSKB: ru.Maxrss,
		outcome: fmt.Sprintf("exit %d", code), load: l0 + "→" + loadAvg()}
	if code != 0 && code != 2 {
		b.Logf("%s exit %d; stderr (end):\n%s", tool, code, tail(stderr.String(), 1500))
	}
	return r, stdout.Bytes()
}

// loadAvg is the machine's 1-minute load average: other work on the
// machine shows in the wall times, not in the CPU columns.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(data))[0]
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func writeInventory(b *testing.B, f *fleet, n int, pg *testhost.Cluster) string {
	return writeInventoryFor(b, f, "inventory", f.ports[:n], f.known, pg)
}

// writeInventoryFor writes an inventory of one host per port, all logging
// in as benchUser with the bench's key, checked against known. The hosts'
// ssh_config is an empty file: the binary under test (make build's) would
// otherwise read this machine's /etc/ssh/ssh_config (Ansible's ssh is
// given -F none).
func writeInventoryFor(b *testing.B, f *fleet, name string, ports []int, known string, pg *testhost.Cluster) string {
	sshConfig := filepath.Join(f.workDir, "ssh_config")
	if err := os.WriteFile(sshConfig, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	var inv strings.Builder
	inv.WriteString("all:\n  vars:\n")
	fmt.Fprintf(&inv, "    ssh_host: 127.0.0.1\n    ssh_user: %s\n    become: true\n", benchUser)
	fmt.Fprintf(&inv, "    ssh_private_key_file: %s\n    ssh_known_hosts_file: %s\n", f.base.KeyFile, known)
	fmt.Fprintf(&inv, "    ssh_config_file: %s\n", sshConfig)
	fmt.Fprintf(&inv, "    pg_data: %s\n    pg_bin: %s\n", pg.DataDir, pg.BinDir)
	inv.WriteString("  hosts:\n")
	for i, p := range ports {
		fmt.Fprintf(&inv, "    h%04d:\n      ssh_port: %d\n", i, p)
	}
	path := filepath.Join(f.workDir, fmt.Sprintf("%s-%d.yml", name, len(ports)))
	if err := os.WriteFile(path, []byte(inv.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// writePlaybook is the default policy with pgconf's pool 1 GiB short of
// the hugepages pool: other clusters on this machine (other tests) may
// hold huge pages, and pgconf would then fail every host before the
// modules after it (overcommit, thp) ran their checks, a cheaper check
// than a real host's.
func writePlaybook(b *testing.B, f *fleet) string {
	data, err := os.ReadFile(filepath.Join("..", "..", "playbooks", "memory.yml"))
	if err != nil {
		b.Fatal(err)
	}
	const anchor = "    pgconf:\n      restart: true\n"
	if !bytes.Contains(data, []byte(anchor)) {
		b.Fatalf("playbooks/memory.yml: no %q to add pgconf's pool to", anchor)
	}
	data = bytes.Replace(data, []byte(anchor), []byte(anchor+"      pool: \"${hugepages.pool - 1 * GiB}\"\n"), 1)
	p := filepath.Join(f.workDir, "memory.yml")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		b.Fatal(err)
	}
	return p
}

func writeAnsible(b *testing.B, f *fleet, n int, pg *testhost.Cluster) (cfg, inv, book string) {
	dir := filepath.Join(f.workDir, "ansible")
	sysctl := filepath.Join(dir, "sysctl.d")
	if err := os.MkdirAll(sysctl, 0o755); err != nil {
		b.Fatal(err)
	}
	var in strings.Builder
	in.WriteString("[db]\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, "h%04d ansible_host=127.0.0.1 ansible_port=%d\n", i, f.ports[i])
	}
	fmt.Fprintf(&in, "[db:vars]\nansible_user=%s\nansible_become=true\nansible_ssh_private_key_file=%s\nansible_python_interpreter=/usr/bin/python3\npg_data=%s\npg_bin=%s\nbench_sysctl_dir=%s\n",
		benchUser, f.base.KeyFile, pg.DataDir, pg.BinDir, sysctl)
	inv = filepath.Join(dir, "hosts.ini")
	cfg = filepath.Join(dir, "ansible.cfg")
	files := map[string]string{
		inv: in.String(),
		cfg: fmt.Sprintf(`[defaults]
forks = 50
host_key_checking = True
gathering = explicit
retry_files_enabled = False
remote_tmp = /tmp/.ansible-bench
stdout_callback = default
[ssh_connection]
pipelining = True
control_path_dir = %s
ssh_args = -F none -o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes
`, filepath.Join(dir, "cp"), f.known),
	}
	for p, c := range files {
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	book, err := filepath.Abs("testdata/ansible-memory.yml")
	if err != nil {
		b.Fatal(err)
	}
	return cfg, inv, book
}

func sizes(b *testing.B) []int {
	spec := os.Getenv("BENCH_FLEET_SIZES")
	if spec == "" {
		spec = "10,50,200"
	}
	var out []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("BENCH_FLEET_SIZES=%q: want a list of host counts", spec)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkFleetCheck is make bench-fleet. PGTUNE_BIN is the binary under
// test; BENCH_FLEET_SIZES the fleet sizes (default 10,50,200);
// BENCH_FLEET_FORKS pgtune's --forks (default: pgtune's own default);
// BENCH_FLEET_ANSIBLE the Ansible fleet size (default 50, 0: skip);
// BENCH_FLEET_REPLAY the replayed fleet sizes (default 1000, 0: none);
// PGTUNE_BIN_BEFORE another binary (the one before a change) timed on the
// same fleet just before PGTUNE_BIN at each size (rows "before").
func BenchmarkFleetCheck(b *testing.B) {
	bin := os.Getenv("PGTUNE_BIN")
	if bin == "" {
		b.Fatal("PGTUNE_BIN: the pgtune binary to time (make bench-fleet sets it)")
	}
	ns := sizes(b)
	largest := 0
	for _, n := range ns {
		largest = max(largest, n)
	}
	ansibleN := 50
	if v := os.Getenv("BENCH_FLEET_ANSIBLE"); v != "" {
		ansibleN, _ = strconv.Atoi(v)
	}
	largest = max(largest, ansibleN)
	testhost.EnsureUser(b, benchUser, true)
	pg := testhost.Postgres(b)
	f := startFleet(b, largest)
	book := writePlaybook(b, f)
	b.ResetTimer()
	var results []result
	before := os.Getenv("PGTUNE_BIN_BEFORE")
	for _, n := range ns {
		args := []string{"check", "-i", writeInventory(b, f, n, pg), "--format", "json", book}
		if forks := os.Getenv("BENCH_FLEET_FORKS"); forks != "" {
			args = append(args, "--forks", forks)
		}
		if before != "" {
			// The binary before a change, on the same fleet just before:
			// the pair shares the machine's state of the moment.
			r, out := f.measure(b, "before", n, exec.Command(before, args...), nil)
			r.outcome += summaryOutcome(b, n, out)
			results = append(results, r)
		}
		r, out := f.measure(b, "pgtune", n, exec.Command(bin, args...), nil)
		r.outcome += summaryOutcome(b, n, out)
		results = append(results, r)
	}
	if ansibleN > 0 {
		if _, err := exec.LookPath("ansible-playbook"); err != nil {
			b.Fatal("ansible-playbook not installed: run ./scripts/deps.sh")
		}
		cfg, inv, book := writeAnsible(b, f, ansibleN, pg)
		cmd := exec.Command("ansible-playbook", "-i", inv, "--check", "--diff", book)
		cmd.Env = append(os.Environ(), "ANSIBLE_CONFIG="+cfg, "ANSIBLE_NOCOLOR=1")
		// ControlPersist keeps a master ssh (and its sshd session) per host
		// after the run: end them, so the sessions' CPU is counted.
		r, out := f.measure(b, "ansible", ansibleN, cmd, func() { endControlMasters(b, filepath.Join(f.workDir, "ansible", "cp")) })
		if !bytes.Contains(out, []byte("failed=0")) || bytes.Contains(out, []byte("unreachable=1")) {
			b.Errorf("ansible-playbook over %d hosts:\n%s", ansibleN, tail(string(out), 3000))
		}
		results = append(results, r)
	}
	results = append(results, replayRuns(b, f, pg, book)...)
	b.StopTimer()
	print(b, results)
}

// replaySizes is BENCH_FLEET_REPLAY: the fleet sizes checked against
// replayed hosts (replay_test.go); default 1000, "0" none.
func replaySizes(b *testing.B) []int {
	spec := os.Getenv("BENCH_FLEET_REPLAY")
	switch spec {
	case "":
		return []int{1000}
	case "0":
		return nil
	}
	var out []int
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("BENCH_FLEET_REPLAY=%q: want a list of host counts, or 0", spec)
		}
		out = append(out, n)
	}
	return out
}

// replayRuns records one real host's check through a proxy, then times
// pgtune check over replayed fleets of each replay size: the controller's
// time, CPU, descriptors and peak RSS at sizes the real hosts cannot reach
// here in reasonable time.
func replayRuns(b *testing.B, f *fleet, pg *testhost.Cluster, book string) []result {
	ns := replaySizes(b)
	if len(ns) == 0 {
		return nil
	}
	bin := os.Getenv("PGTUNE_BIN")
	rf := newReplayFleet(b, f)
	proxy := rf.proxy(b, f, f.ports[0])
	hostLine := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(rf.hostKey.PublicKey())))
	known := filepath.Join(f.workDir, "proxy_known_hosts")
	if err := os.WriteFile(known, []byte(fmt.Sprintf("[127.0.0.1]:%d %s\n", proxy, hostLine)), 0o600); err != nil {
		b.Fatal(err)
	}
	inv := writeInventoryFor(b, f, "record", []int{proxy}, known, pg)
	out, err := exec.Command(bin, "check", "-i", inv, "--format", "json", book).Output()
	if code := exitCode(err); code != 0 && code != 2 {
		b.Fatalf("recording a host check through the proxy: exit %d (%v):\n%s", code, err, tail(string(out), 2000))
	}
	b.Logf("recorded one host's check: %d sessions", rf.tape.count())
	largest := 0
	for _, n := range ns {
		largest = max(largest, n)
	}
	rf.start(b, f.workDir, largest)
	var results []result
	for _, n := range ns {
		execs, misses := rf.execs.Load(), rf.misses.Load()
		// A session the tape cannot answer leaves its host waiting: the
		// host fails after --timeout instead of holding the bench.
		args := []string{"check", "-i", writeInventoryFor(b, f, "replay", rf.ports[:n], rf.known, pg), "--format", "json", "--timeout", "2m", book}
		if forks := os.Getenv("BENCH_FLEET_FORKS"); forks != "" {
			args = append(args, "--forks", forks)
		}
		r, out := f.measure(b, "replay", n, exec.Command(bin, args...), nil)
		r.execs, r.hostCPU = int(rf.execs.Load()-execs), 0
		if m := rf.misses.Load() - misses; m > 0 {
			var cmds []string
			rf.missed.Range(func(k, _ any) bool { cmds = append(cmds, tail(k.(string), 200)); return true })
			b.Errorf("replay over %d hosts: %d sessions had no recording: %s", n, m, strings.Join(cmds, "; "))
		}
		r.outcome += summaryOutcome(b, n, out)
		results = append(results, r)
	}
	return results
}

func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// summaryOutcome checks a JSON report's summary (every host reached) and
// says it in the outcome column.
func summaryOutcome(b *testing.B, n int, out []byte) string {
	var rep struct {
		Summary map[string]int `json:"summary"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		b.Fatalf("pgtune check over %d hosts: no JSON report: %v", n, err)
	}
	// A failed host is a verdict on this machine's state (other
	// clusters holding huge pages, say), reached after the host's
	// checks ran; an unreachable one is a fault of the run.
	if rep.Summary["hosts"] != n || rep.Summary["unreachable"] > 0 {
		b.Errorf("pgtune check over %d hosts: %v", n, rep.Summary)
	}
	return fmt.Sprintf(" drift=%d in_policy=%d failed=%d unreachable=%d",
		rep.Summary["drift"], rep.Summary["in_policy"], rep.Summary["failed"], rep.Summary["unreachable"])
}

func print(b *testing.B, rs []result) {
	var w strings.Builder
	fmt.Fprintf(&w, "\n%-8s %6s %9s %8s %11s %10s %10s %14s %13s %7s %9s %11s  %s\n",
		"tool", "hosts", "seconds", "hosts/s", "trips/host", "ctl CPU s", "hosts CPU", "host CPU/host", "machine CPU s", "fds", "RSS MB", "load", "outcome")
	for _, r := range rs {
		fmt.Fprintf(&w, "%-8s %6d %9.2f %8.1f %11.1f %10.2f %10.2f %14.3f %13.2f %7d %9.1f %11s  %s\n",
			r.tool, r.hosts, r.wall.Seconds(), float64(r.hosts)/r.wall.Seconds(), float64(r.execs)/float64(r.hosts),
			r.controllerCPU.Seconds(), r.hostCPU.Seconds(), r.hostCPU.Seconds()/float64(r.hosts), r.machineCPU.Seconds(),
			r.peakFDs, float64(r.peakRSSKB)/1024, r.load, r.outcome)
	}
	var pg, an *result
	for i := range rs {
		if rs[i].tool == "ansible" {
			an = &rs[i]
		}
	}
	for i := range rs {
		if an != nil && rs[i].tool == "pgtune" && rs[i].hosts == an.hosts {
			pg = &rs[i]
		}
	}
	if pg != nil && an != nil {
		fmt.Fprintf(&w, "\nansible / pgtune on %d hosts: wall %.1fx, controller CPU %.1fx, hosts CPU %.1fx\n", pg.hosts,
			an.wall.Seconds()/pg.wall.Seconds(), an.controllerCPU.Seconds()/pg.controllerCPU.Seconds(), an.hostCPU.Seconds()/pg.hostCPU.Seconds())
	}
	w.WriteString("hosts CPU: CPU of everything the sshd endpoints ran (sessions, shells, sudo, postgres -C; their cgroup); " +
		"machine CPU: /proc/stat busy time over the run, other load on this machine included; " +
		"load: 1-minute load average at the start and the end of the run; " +
		"replay: pgtune (the same binary) against in-process SSH endpoints that play back one real host's recorded check " +
		"(the controller's whole work, the hosts' none: their CPU is not measured and shows 0).\n")
	fmt.Fprint(os.Stdout, w.String())
	writeResults(b, w.String())
}

// writeResults keeps the run in bench/results/fleet.md (BENCH_FLEET_OUT
// names another file; "-": none).
func writeResults(b *testing.B, table string) {
	out := os.Getenv("BENCH_FLEET_OUT")
	if out == "-" {
		return
	}
	if out == "" {
		out = filepath.Join("..", "..", "bench", "results", "fleet.md")
	}
	host, _ := os.Hostname()
	doc := fmt.Sprintf("# make bench-fleet\n\n%s, %d CPUs, %s (`BENCH_FLEET_SIZES=%s`).\n\n```%s```\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), host, os.Getenv("BENCH_FLEET_SIZES"), table)
	if err := os.WriteFile(out, []byte(doc), 0o644); err != nil {
		b.Errorf("write %s: %v", out, err)
	}
}
