package e2e

import (
	"os"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/internal/testhost"
)

// WAL clients that are not standbys stream from the primary: a WAL
// archiver (pg_receivewal through a physical slot, as Barman's
// barman_receive_wal) and a logical decoding client (pg_recvlogical on a
// test_decoding slot, as a change data capture tool). Neither is a member
// of the cluster: neither holds the primary's restart as a member outside
// the run would.

// walClientsFixture is newStreamingFixture with wal_level = logical on
// the primary and both clients streaming from it.
func walClientsFixture(t *testing.T) (*streamingFixture, *testhost.WALClient, *testhost.WALClient) {
	t.Helper()
	f := newStreamingFixture(t, "60s", func(set *testhost.ReplicaSet) {
		set.Primary.Stop(t)
		set.Primary.AppendConf(t, "wal_level = logical")
		set.Primary.Start(t)
		set.WaitStreaming(t)
	})
	archiver := testhost.StartReceiveWAL(t, f.set.Primary, "barman_receive_wal", "barman")
	cdc := testhost.StartRecvLogical(t, f.set.Primary, "debezium", "cdc")
	return f, archiver, cdc
}

// hostOf is a host's entry in a report.
func hostOf(t *testing.T, r jsonReport, name string) (notes, err string) {
	t.Helper()
	for _, h := range r.Hosts {
		if h.Name == name {
			if h.Error != nil {
				err = *h.Error
			}
			return strings.Join(h.Notes, "\n"), err
		}
	}
	t.Fatalf("no host %s in the report", name)
	return "", ""
}

// TestSwitchoverWALClients: with a logical decoding client streaming
// from the primary, check refuses the plain switchover and says why (its
// slot would stay on the old primary) and what to do; the standbys are
// not refused. With the logical client stopped and only the archiver
// streaming, apply switches over and warns that the archiver must follow
// the new primary or keep streaming from the old one.
func TestSwitchoverWALClients(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: three PostgreSQL servers, two WAL clients, three sshd and the kernel")
	}
	f, _, cdc := walClientsFixture(t)
	code, planned, stderr := pgtune(t, "check", "-i", f.inv, f.book)
	notes, herr := hostOf(t, planned, "primary")
	t.Logf("check: exit %d; primary: error %q\nnotes:\n%s", code, herr, notes)
	for _, w := range []string{"switchover refused", `"debezium"`, "logical", "primary: restart"} {
		if !strings.Contains(herr, w) {
			t.Errorf("check's error on the primary does not say %q: %q\n%s", w, herr, stderr)
		}
	}
	for _, w := range []string{"outside this run", "partial_cluster"} {
		if strings.Contains(herr+notes, w) {
			t.Errorf("check takes a WAL client for a member outside the run (%q): %q\n%s", w, herr, notes)
		}
	}
	if !strings.Contains(notes, `"barman_receive_wal" (WAL archiver`) {
		t.Errorf("check's notes on the primary do not name the archiver: %s", notes)
	}
	for _, s := range []string{"standby1", "standby2"} {
		if _, e := hostOf(t, planned, s); e != "" {
			t.Errorf("%s: %s", s, e)
		}
	}

	cdc.Stop()
	code, applied, stderr := pgtune(t, "apply", "--yes", "-i", f.inv, f.book)
	if code != 0 {
		t.Fatalf("apply with an archiver streaming: exit %d: %s\n%s", code, hostErrors(applied), stderr)
	}
	if np := f.onePrimary(t); np == "primary" {
		t.Fatal("the primary role did not move")
	}
	for _, w := range []string{"WAL archivers stream from the old primary", "barman_receive_wal", "follow the new primary"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("apply does not say %q:\n%s", w, lastN(stderr, 15))
		}
	}
	t.Logf("apply said:\n%s", lastN(stderr, 12))
}

// TestRestartStreamingWALClients: primary: restart with an archiver and
// a logical client streaming: apply restarts every member, the primary
// last, without pgtune_restart_partial_cluster; the notes name both
// clients; both stream again once the primary is back (they reconnect).
func TestRestartStreamingWALClients(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: three PostgreSQL servers, two WAL clients, three sshd and the kernel")
	}
	f, archiver, cdc := walClientsFixture(t)
	b, err := os.ReadFile(f.book)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, f.book, strings.Replace(string(b), "primary: switchover", "primary: restart", 1))
	before := f.pids(t)
	code, applied, stderr := pgtune(t, "apply", "--yes", "-i", f.inv, f.book)
	notes, herr := hostOf(t, applied, "primary")
	t.Logf("apply: exit %d; primary: error %q\nnotes:\n%s", code, herr, notes)
	if code != 0 {
		t.Fatalf("apply: exit %d: %s\n%s", code, hostErrors(applied), lastN(stderr, 15))
	}
	for name, pid := range f.pids(t) {
		if pid == before[name] {
			t.Errorf("%s was not restarted", name)
		}
	}
	for _, w := range []string{`"barman_receive_wal" (WAL archiver`, `"debezium" (logical`} {
		if !strings.Contains(notes, w) {
			t.Errorf("the primary's notes do not name %s: %s", w, notes)
		}
	}
	if strings.Contains(notes, "outside this run") {
		t.Errorf("a WAL client counted as a member outside the run: %s", notes)
	}
	archiver.AwaitStreaming(t, f.set.Primary)
	cdc.AwaitStreaming(t, f.set.Primary)
}
