package testhost

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// WALClient is a WAL client that is not a standby, streaming from a
// server as its owner: pg_receivewal (a WAL archiver, as Barman's
// barman_receive_wal) or pg_recvlogical (a logical decoding client, as a
// change data capture tool). Stopped (its process group killed) in
// t.Cleanup.
type WALClient struct {
	Name string // its application_name
	cmd  *exec.Cmd
	done chan struct{}
}

// StartReceiveWAL starts pg_receivewal streaming from c through the
// physical slot slot (made if missing) into a directory of its own, as
// application_name name, and waits until c reports it streaming.
func StartReceiveWAL(t testing.TB, c *Cluster, name, slot string) *WALClient {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "pgtune-receivewal-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	chown(t, c.Owner, dir)
	c.Query(t, "SELECT pg_create_physical_replication_slot('"+slot+"') WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = '"+slot+"')")
	return startWALClient(t, c, name, "pg_receivewal", "-D", dir, "--slot", slot, "--no-sync")
}

// StartRecvLogical starts pg_recvlogical streaming the changes of the
// logical slot slot (test_decoding, made if missing: c needs wal_level =
// logical) into /dev/null, as application_name name, and waits until c
// reports it streaming.
func StartRecvLogical(t testing.TB, c *Cluster, name, slot string) *WALClient {
	t.Helper()
	c.Query(t, "SELECT pg_create_logical_replication_slot('"+slot+"', 'test_decoding') WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = '"+slot+"')")
	return startWALClient(t, c, name, "pg_recvlogical", "--slot", slot, "--start", "-f", "/dev/null")
}

func startWALClient(t testing.TB, c *Cluster, name, prog string, args ...string) *WALClient {
	t.Helper()
	// pg_receivewal ignores the database; pg_recvlogical needs one.
	dsn := "host=" + c.SocketDir + " port=" + strconv.Itoa(c.Port) + " user=postgres dbname=postgres application_name=" + name
	argv := append([]string{"-u", c.Owner, "--", filepath.Join(c.BinDir, prog), "-d", dsn}, args...)
	cmd := exec.Command("runuser", argv...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testhost: start %s: %v", prog, err)
	}
	w := &WALClient{Name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(w.done) }()
	t.Cleanup(w.Stop)
	w.AwaitStreaming(t, c)
	return w
}

// AwaitStreaming waits until c reports the client streaming and its
// first write position (each client reports one as soon as it streams).
func (w *WALClient) AwaitStreaming(t testing.TB, c *Cluster) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := c.TryQuery("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND write_lsn IS NOT NULL AND application_name = '" + w.Name + "'")
		if err == nil && strings.TrimSpace(out) == "1" {
			return
		}
		select {
		case <-w.done:
			t.Fatalf("testhost: WAL client %s ended before it streamed", w.Name)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("testhost: WAL client %s does not stream (%q, %v)", w.Name, out, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop ends the client (its process group: runuser and the client) and
// waits for it.
func (w *WALClient) Stop() {
	select {
	case <-w.done:
		return
	default:
	}
	_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-w.cmd.Process.Pid, syscall.SIGKILL)
		<-w.done
	}
}
