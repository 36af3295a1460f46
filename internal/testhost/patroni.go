package testhost

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// PatroniCluster is one etcd and Patroni members on loopback, each member
// running PostgreSQL 15 from Debian's packages as `postgres`, with its
// REST API on its own port. Everything lives in one temporary directory.
type PatroniCluster struct {
	Root    string
	Scope   string // Patroni's cluster name
	EtcdURL string
	Members []*PatroniMember
	// TLS is set when the REST APIs serve HTTPS (PatroniOptions.TLS).
	TLS    *PatroniTLSFiles
	client *http.Client
	procs  []*exec.Cmd // etcd, then each member's patroni
	forget []func()    // their registry records, and the members' clusters'
	// stopped: stop ran (StopOnCleanup, then the clean-up's own): a
	// second one must not signal process groups whose IDs may be reused.
	stopped bool
}

// PatroniMember is one Patroni process and the PostgreSQL it manages.
type PatroniMember struct {
	Name       string
	Dir        string // the member's directory: config, log, data, socket
	ConfigFile string // patroni.yml
	LogFile    string // Patroni's own log (PostgreSQL logs to its stderr too)
	APIPort    int
	// PG is the PostgreSQL cluster Patroni runs (DataDir, SocketDir, Port,
	// BinDir, Owner as in Postgres): Query and TryQuery work on it.
	PG  *Cluster
	cmd *exec.Cmd
	tls bool
}

// PatroniPassword is the superuser and replication password in every
// member's patroni.yml (loopback is trusted, so it is never checked):
// tests assert that no output ever shows it.
const PatroniPassword = "patroni-s3cret-never-shown"

// Patroni starts one etcd and n Patroni members of cluster scope
// "pgtune-test", waits until one is the leader and the others stream from
// it, and stops everything in t.Cleanup. Needs root and Debian's patroni
// and etcd-server packages (scripts/deps.sh installs them).
func Patroni(t testing.TB, n int) *PatroniCluster {
	t.Helper()
	return PatroniWith(t, n, PatroniOptions{})
}

// PatroniWith is Patroni with options.
func PatroniWith(t testing.TB, n int, opt PatroniOptions) *PatroniCluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs Patroni and PostgreSQL as the postgres OS user")
	}
	for _, bin := range []string{"/usr/bin/patroni", "/usr/bin/etcd", filepath.Join(DefaultPGBin, "postgres")} {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("testhost: %s missing (run scripts/deps.sh): %v", bin, err)
		}
	}
	ensurePostgresUser(t)
	Reap(t)
	root, err := os.MkdirTemp("/tmp", "pgtune-patroni-")
	if err != nil {
		t.Fatal(err)
	}
	pc := &PatroniCluster{Root: root, Scope: "pgtune-test", client: httpClient}
	forgetDir := register(t, record{Kind: "dir", Path: root})
	t.Cleanup(func() {
		pc.stop(t)
		_ = os.RemoveAll(root)
		for _, f := range pc.forget {
			f()
		}
		forgetDir()
	})
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if opt.TLS {
		pc.TLS = makePatroniTLS(t, filepath.Join(root, "tls"))
		pc.client = pc.TLS.client(t)
	}
	// The leader's bootstrap runs initdb, whose servers map shared memory
	// on huge pages if they can (see PoolStill).
	PoolStill(t, func() {
		pc.startEtcd(t)
		for i := 0; i < n; i++ {
			pc.Members = append(pc.Members, pc.startMember(t, fmt.Sprintf("member%d", i)))
		}
		pc.WaitHealthy(t)
	})
	return pc
}

func (pc *PatroniCluster) startEtcd(t testing.TB) {
	t.Helper()
	client, peer := freePort(t), freePort(t)
	pc.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	dir := filepath.Join(pc.Root, "etcd")
	cmd := exec.Command("/usr/bin/etcd", "--name", "etcd0", "--data-dir", dir,
		"--listen-client-urls", pc.EtcdURL, "--advertise-client-urls", pc.EtcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "etcd0="+peerURL, "--initial-cluster-state", "new")
	pc.start(t, cmd, filepath.Join(pc.Root, "etcd.log"), false)
	ok := AwaitFiles(t, "etcd to serve", []string{pc.Root}, nil, func() bool {
		_, err := httpGet(pc.EtcdURL + "/health")
		return err == nil
	})
	if !ok {
		t.Fatal("testhost: etcd did not start")
	}
}

// start runs cmd in its own process group with output to log, as
// postgres when asOwner, and remembers it for stop.
func (pc *PatroniCluster) start(t testing.TB, cmd *exec.Cmd, log string, asOwner bool) {
	t.Helper()
	f, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if asOwner {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		cmd.Env = append(os.Environ(), "HOME="+filepath.Dir(log), "USER=postgres", "LOGNAME=postgres")
		chown(t, "postgres", log)
	}
	if err := startDying(cmd); err != nil {
		t.Fatalf("testhost: start %s: %v", cmd.Path, err)
	}
	pc.procs = append(pc.procs, cmd)
	pc.forget = append(pc.forget, registerProcess(t, cmd))
}

func (pc *PatroniCluster) startMember(t testing.TB, name string) *PatroniMember {
	t.Helper()
	dir := filepath.Join(pc.Root, name)
	m := &PatroniMember{
		Name:       name,
		Dir:        dir,
		ConfigFile: filepath.Join(dir, "patroni.yml"),
		LogFile:    filepath.Join(dir, "patroni.log"),
		APIPort:    freePort(t),
		tls:        pc.TLS != nil,
		PG: &Cluster{
			Root:      dir,
			DataDir:   filepath.Join(dir, "data"),
			BinDir:    DefaultPGBin,
			SocketDir: filepath.Join(dir, "sock"),
			LogFile:   filepath.Join(dir, "patroni.log"),
			Owner:     "postgres",
			Port:      freePort(t),
		},
	}
	for _, d := range []string{dir, m.PG.SocketDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		chown(t, "postgres", d)
	}
	WriteOwned(t, "postgres", m.ConfigFile, pc.memberConfig(m), 0o600)
	// Patroni killed, its postmaster runs on: the next Reap stops it.
	pc.forget = append(pc.forget, register(t, record{Kind: "postgres", DataDir: m.PG.DataDir, BinDir: m.PG.BinDir}))
	m.cmd = exec.Command("/usr/bin/patroni", m.ConfigFile)
	pc.start(t, m.cmd, m.LogFile, true)
	return m
}

// memberConfig is a member's patroni.yml: short loop and TTL so that the
// cluster forms in seconds, small shared memory (every member shares this
// machine's kernel), loopback trusted.
func (pc *PatroniCluster) memberConfig(m *PatroniMember) string {
	return fmt.Sprintf(`scope: %[1]s
name: %[2]s
restapi:
  listen: 127.0.0.1:%[3]d
  connect_address: %[11]s:%[3]d
%[12]setcd3:
  hosts: %[4]s
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 1
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    postgresql:
      use_pg_rewind: false
      parameters:
        max_connections: 20
        max_wal_senders: 8
        wal_keep_size: 64MB
  initdb:
  - encoding: UTF8
  - locale: C
  - no-sync
  pg_hba:
  - local all all trust
  - host replication all 127.0.0.1/32 trust
  - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:%[5]d
  connect_address: 127.0.0.1:%[5]d
  data_dir: %[6]s
  bin_dir: %[7]s
  pgpass: %[8]s/pgpass
  authentication:
    replication:
      username: replicator
      password: %[9]s
    superuser:
      username: postgres
      password: %[9]s
  parameters:
    unix_socket_directories: '%[10]s'
    shared_buffers: 16MB
    huge_pages: 'off'
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
`, pc.Scope, m.Name, m.APIPort, strings.TrimPrefix(pc.EtcdURL, "http://"), m.PG.Port,
		m.PG.DataDir, m.PG.BinDir, m.Dir, PatroniPassword, m.PG.SocketDir, m.apiHost(), pc.TLS.restAPIConfig())
}

// apiHost is the REST API's host name: localhost over HTTPS (the name its
// certificate carries), else 127.0.0.1.
func (m *PatroniMember) apiHost() string {
	if m.tls {
		return "localhost"
	}
	return "127.0.0.1"
}

// APIURL is the member's REST API.
func (m *PatroniMember) APIURL() string {
	if m.tls {
		return fmt.Sprintf("https://%s:%d", m.apiHost(), m.APIPort)
	}
	return fmt.Sprintf("http://%s:%d", m.apiHost(), m.APIPort)
}

// PatroniClusterState is Patroni's GET /cluster, the part tests read.
type PatroniClusterState struct {
	Members []struct {
		Name     string `json:"name"`
		Role     string `json:"role"`
		State    string `json:"state"`
		APIURL   string `json:"api_url"`
		Timeline int    `json:"timeline"`
	} `json:"members"`
}

// ClusterState reads GET /cluster from the first member that answers.
func (pc *PatroniCluster) ClusterState() (*PatroniClusterState, error) {
	var last error
	for _, m := range pc.Members {
		b, err := pc.get(m.APIURL() + "/cluster")
		if err != nil {
			last = err
			continue
		}
		var st PatroniClusterState
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("GET /cluster: %w", err)
		}
		return &st, nil
	}
	return nil, last
}

// Leader is the member Patroni says holds the leader lock, or nil.
func (pc *PatroniCluster) Leader() *PatroniMember {
	st, err := pc.ClusterState()
	if err != nil {
		return nil
	}
	for _, sm := range st.Members {
		if sm.Role == "leader" {
			for _, m := range pc.Members {
				if m.Name == sm.Name {
					return m
				}
			}
		}
	}
	return nil
}

// WaitHealthy waits until Patroni lists every member running with one
// leader, and the leader's PostgreSQL sees every replica streaming. It
// re-checks whenever a member logs (Patroni logs every loop).
func (pc *PatroniCluster) WaitHealthy(t testing.TB) {
	t.Helper()
	var dirs []string
	for _, m := range pc.Members {
		dirs = append(dirs, m.Dir)
	}
	want := strconv.Itoa(len(pc.Members) - 1)
	AwaitFiles(t, "the Patroni cluster to form", dirs, nil, func() bool {
		st, err := pc.ClusterState()
		if err != nil || len(st.Members) != len(pc.Members) {
			return false
		}
		for _, m := range st.Members {
			if m.State != "running" && m.State != "streaming" {
				return false
			}
		}
		leader := pc.Leader()
		if leader == nil || !leader.PG.Ready() {
			return false
		}
		out, err := leader.PG.TryQuery("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
		return err == nil && strings.TrimSpace(out) == want
	})
}

// History is Patroni's GET /history: one entry per timeline switch
// (failover or switchover).
func (pc *PatroniCluster) History(t testing.TB) []json.RawMessage {
	t.Helper()
	l := pc.Leader()
	if l == nil {
		t.Fatal("testhost: no Patroni leader")
	}
	b, err := pc.get(l.APIURL() + "/history")
	if err != nil {
		t.Fatal(err)
	}
	var h []json.RawMessage
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatalf("testhost: GET /history: %v: %s", err, b)
	}
	return h
}

// StopOnCleanup stops the cluster in a cleanup of t, as the package's
// StopOnCleanup does for plain clusters: a test that builds it before
// taking the kernel lock and calls this after LockKernel has every member
// stopped, and its huge pages given back, while it still holds the lock.
// The clean-up PatroniWith registered then only removes the files.
func (pc *PatroniCluster) StopOnCleanup(t testing.TB) {
	t.Helper()
	t.Cleanup(func() { pc.stop(t) })
}

// stop ends every Patroni member (SIGTERM: Patroni stops its PostgreSQL),
// then etcd; anything still running after a grace period is killed. Only
// the first call does anything.
func (pc *PatroniCluster) stop(t testing.TB) {
	if pc.stopped {
		return
	}
	pc.stopped = true
	for i := len(pc.procs) - 1; i >= 0; i-- {
		cmd := pc.procs[i]
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Logf("testhost: %s did not stop; killing it", cmd.Path)
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	// A postmaster Patroni left behind (it runs in Patroni's group, but
	// may have been restarted by hand in a test) is stopped as well.
	for _, m := range pc.Members {
		m.PG.stopForCleanup(t)
	}
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

func httpGet(url string) ([]byte, error) { return get(httpClient, url) }

// get is a GET with the cluster's client (its certificates over HTTPS).
func (pc *PatroniCluster) get(url string) ([]byte, error) { return get(pc.client, url) }

func get(client *http.Client, url string) ([]byte, error) {
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return b, nil
}

// PatchConfig PATCHes Patroni's cluster-wide configuration (the DCS's
// /config) with patch, a JSON object, through the leader.
func (pc *PatroniCluster) PatchConfig(t testing.TB, patch string) {
	t.Helper()
	l := pc.Leader()
	if l == nil {
		t.Fatal("testhost: no Patroni leader")
	}
	req, err := http.NewRequest(http.MethodPatch, l.APIURL()+"/config", strings.NewReader(patch))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := pc.client.Do(req)
	if err != nil {
		t.Fatalf("testhost: PATCH /config: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("testhost: PATCH /config %s: %s: %s", patch, resp.Status, b)
	}
}

// SetPaused pauses or resumes the cluster (Patroni's maintenance mode) and
// waits until every member's GET /patroni says so and its cache of the
// DCS configuration (data/patroni.dynamic.json) holds it (each sees it
// at its next loop, which logs).
func (pc *PatroniCluster) SetPaused(t testing.TB, paused bool) {
	t.Helper()
	pc.PatchConfig(t, fmt.Sprintf(`{"pause": %v}`, paused))
	var dirs []string
	for _, m := range pc.Members {
		dirs = append(dirs, m.Dir)
	}
	AwaitFiles(t, "every Patroni member to see pause", dirs, nil, func() bool {
		for _, m := range pc.Members {
			b, err := pc.get(m.APIURL() + "/patroni")
			if err != nil {
				return false
			}
			var st struct {
				Pause bool `json:"pause"`
			}
			if json.Unmarshal(b, &st) != nil || st.Pause != paused {
				return false
			}
			cache, err := os.ReadFile(filepath.Join(m.PG.DataDir, "patroni.dynamic.json"))
			if err != nil {
				return false
			}
			var dyn struct {
				Pause bool `json:"pause"`
			}
			if json.Unmarshal(cache, &dyn) != nil || dyn.Pause != paused {
				return false
			}
		}
		return true
	})
}

// Freeze stops the member's Patroni process (SIGSTOP; its PostgreSQL runs
// on) until the returned thaw is called (also at cleanup): its REST API
// accepts connections but never answers, as an unreachable member's.
func (m *PatroniMember) Freeze(t testing.TB) (thaw func()) {
	t.Helper()
	pid := m.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("testhost: freeze %s's patroni: %v", m.Name, err)
	}
	thawed := false
	thaw = func() {
		if !thawed {
			thawed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw)
	return thaw
}
