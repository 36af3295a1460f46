package facts

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/testhost"
)

func TestConninfoAddr(t *testing.T) {
	for _, tc := range []struct{ in, host, port string }{
		{"host=db1 port=5433 user=rep password=secret", "db1", "5433"},
		{"user=rep password='a b\\' c' host = '/run/pg' port=6000", "/run/pg", "6000"},
		{"hostaddr=10.0.0.1 password=x", "10.0.0.1", "5432"},
		{"host=a,b port=1,2", "a", "1"},
		{"postgresql://rep:secret@db2:5434/postgres?sslmode=require", "db2", "5434"},
		{"postgres://db3/x", "db3", "5432"},
		{"", "", "5432"},
	} {
		h, p := conninfoAddr(tc.in)
		if h != tc.host || (tc.host != "" && p != tc.port) {
			t.Errorf("conninfoAddr(%q) = %q, %q; want %q, %q", tc.in, h, p, tc.host, tc.port)
		}
	}
}

func TestParseTopology(t *testing.T) {
	rec := func(k, v string) string { return k + "=" + v + "\x00" }
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	patroniYML := "scope: demo\nname: node2\npostgresql:\n  data_dir: /data/n2\n  authentication:\n    superuser:\n      password: topsecret\nrestapi:\n  listen: 0.0.0.0:8008\n  connect_address: 10.1.1.2:8008\n  authentication:\n    password: topsecret\n"
	for _, tc := range []struct {
		name    string
		out     string
		want    Topology
		patroni *Patroni
		err     string
	}{{
		name: "primary with standbys",
		out: rec("conf_line", "# plain") + rec("role", "primary") + rec("sysid", "7312345678901234567") + rec("timeline", "1") +
			rec("cluster_name", "") + rec("conninfo", "") + rec("walsender", "0 streaming 127.0.0.1 40001 1001 true true physical standby1") + rec("walsender", "4096 catchup local -1 1002 true true none my standby") + "\n",
		want: Topology{Role: "primary", SystemID: "7312345678901234567", Timeline: 1, Standbys: []StandbyInfo{
			{Name: "standby1", Addr: "127.0.0.1", Port: 40001, PID: 1001, State: "streaming"}, {Name: "my standby", Addr: "local", Port: -1, PID: 1002, State: "catchup", LagBytes: 4096}}},
	}, {
		name: "primary: WAL clients that are no standby",
		out: rec("role", "primary") + rec("sysid", "42") +
			rec("walsender", "-1 streaming 10.0.0.9 40009 1003 true false logical debezium") +
			rec("walsender", "-1 streaming 10.0.0.7 40007 1004 true false physical barman_receive_wal") +
			rec("walsender", "-1 streaming local -1 1005 true false none pg_receivewal") +
			rec("walsender", "-1 backup 10.0.0.7 40017 1006 false false none pg_basebackup") +
			rec("walsender", "-1 catchup local -1 1007 false false logical sub_1") +
			rec("walsender", "0 streaming 10.0.0.2 40002 1008 true true physical standby1") +
			// Nothing reported yet (just connected, or status updates
			// off): it cannot be told from a standby, and counts as one.
			rec("walsender", "-1 startup 10.0.0.3 40003 1009 false false none standby2"),
		want: Topology{Role: "primary", SystemID: "42",
			Standbys: []StandbyInfo{{Name: "standby1", Addr: "10.0.0.2", Port: 40002, PID: 1008, State: "streaming"}, {Name: "standby2", Addr: "10.0.0.3", Port: 40003, PID: 1009, State: "startup", LagBytes: -1}},
			Clients: []WALClient{
				{Name: "debezium", Addr: "10.0.0.9", State: "streaming", Kind: ClientLogical},
				{Name: "barman_receive_wal", Addr: "10.0.0.7", State: "streaming", Kind: ClientArchiver},
				{Name: "pg_receivewal", Addr: "local", State: "streaming", Kind: ClientArchiver},
				{Name: "pg_basebackup", Addr: "10.0.0.7", State: "backup", Kind: ClientBaseBackup},
				{Name: "sub_1", Addr: "local", State: "catchup", Kind: ClientLogical}}},
	}, {
		name: "hostile WAL clients: names and addresses checked and clipped, the count bounded",
		out: rec("role", "primary") + rec("sysid", "42") +
			rec("walsender", "-1 streaming 10.0.0.7; 40007 1010 true false none \x1b]0;pwned\x07 $(reboot) "+strings.Repeat("x", 100)) +
			rec("walsender", "-1 streaming\x1b[2J local -1 1011 true false logical caf\xc3\xa9") +
			rec("walsender", "0 streaming local -1 1012 true true physical evil\nstandby") +
			strings.Repeat(rec("walsender", "-1 streaming local -1 1013 true false none many"), MaxWALClients+3),
		want: Topology{Role: "primary", SystemID: "42",
			Standbys: []StandbyInfo{{Name: "evil?standby", Addr: "local", Port: -1, PID: 1012, State: "streaming"}},
			Clients: append([]WALClient{
				{Name: "?]0;pwned? $(reboot) " + strings.Repeat("x", 63-len("?]0;pwned? $(reboot) ")), Addr: "?", State: "streaming", Kind: ClientArchiver},
				{Name: "caf??", Addr: "local", State: "streaming?[2J", Kind: ClientLogical}},
				manyClients(MaxWALClients-2)...),
			MoreClients: 5},
	}, {
		name: "forged WAL sender row", out: rec("role", "primary") + rec("sysid", "1") + rec("walsender", "0 streaming local standby1"), err: "pg_stat_replication",
	}, {
		name: "forged WAL sender lag", out: rec("role", "primary") + rec("sysid", "1") + rec("walsender", "-2 streaming local -1 1014 true true none s"), err: "standby lag",
	}, {
		name: "forged WAL sender port", out: rec("role", "primary") + rec("sysid", "1") + rec("walsender", "0 streaming 10.0.0.2 65536 1015 true true none s"), err: "client_port",
	}, {
		name: "forged WAL sender pid", out: rec("role", "primary") + rec("sysid", "1") + rec("walsender", "0 streaming local -1 4194305 true true none s"), err: "WAL sender pid",
	}, {
		name: "WAL sender pid not a number", out: rec("role", "primary") + rec("sysid", "1") + rec("walsender", "0 streaming local -1 1e3 true true none s"), err: "WAL sender pid",
	}, {
		name: "standby: upstream from the receiver, never the password",
		out: rec("role", "standby") + rec("sysid", "42") + rec("timeline", "3") + rec("conninfo", "host=p port=1 password=hunter2") +
			rec("receiver", "streaming /tmp/sock 5433") + rec("replay_lag", "8192"),
		want: Topology{Role: "standby", SystemID: "42", Timeline: 3, Upstream: "/tmp/sock:5433", Receiver: "streaming", ReplayLagBytes: 8192},
	}, {
		name: "standby without a receiver: upstream from primary_conninfo",
		out:  rec("role", "standby") + rec("sysid", "42") + rec("conninfo", "password=hunter2 host=db1 port=5433"),
		want: Topology{Role: "standby", SystemID: "42", Upstream: "db1:5433"},
	}, {
		name: "under Patroni",
		out: rec("patroni_pid", "4141") + rec("pconf_path", "/etc/patroni/other.yml") + rec("pconf", b64(strings.ReplaceAll(patroniYML, "/data/n2", "/data/other"))) +
			rec("patroni_pid", "4242") + rec("pconf_path", "/etc/patroni/n2.yml") + rec("pconf", b64(patroniYML)) +
			rec("conf_line", "# Do not edit this file manually!") + rec("conf_line", "# It will be overwritten by Patroni!") + rec("role", "primary") + rec("sysid", "42"),
		want:    Topology{Role: "primary", SystemID: "42"},
		patroni: &Patroni{Scope: "demo", Name: "node2", PID: 4242, ConfigFile: "/etc/patroni/n2.yml", APIURL: "http://10.1.1.2:8008", GeneratedConf: true},
	}, {
		name:    "another data directory's Patroni",
		out:     rec("patroni_pid", "4141") + rec("pconf_path", "/etc/patroni/other.yml") + rec("pconf", b64(strings.ReplaceAll(patroniYML, "/data/n2", "/data/other"))) + rec("role", "primary") + rec("sysid", "42"),
		want:    Topology{Role: "primary", SystemID: "42"},
		patroni: nil,
	}, {
		name:    "Patroni's postgresql.conf, no Patroni process",
		out:     rec("conf_line", "# It will be overwritten by Patroni!") + rec("role", "standby") + rec("sysid", "42"),
		want:    Topology{Role: "standby", SystemID: "42"},
		patroni: &Patroni{GeneratedConf: true, APIError: "postgresql.conf says Patroni writes it, but no Patroni process of the cluster owner names this data directory"},
	}, {
		name: "primary: idle slots, capped, invalid names dropped",
		out: rec("role", "primary") + rec("sysid", "42") + rec("idle_slot", "node_3") + rec("idle_slot", "node_3") +
			rec("idle_slot", "Bad-Name") + rec("idle_slot", strings.Repeat("x", 64)) + rec("idle_slot", "a\x1b[2J") + rec("slot_name", "ignored") +
			strings.Repeat(rec("idle_slot", "many"), 3) + idleSlots(MaxIdleSlots+5),
		want: Topology{Role: "primary", SystemID: "42", IdleSlots: append([]string{"node_3", "many"}, slotNames(MaxIdleSlots-2)...)},
	}, {
		name: "standby: its slot, and no idle slots of its own",
		out:  rec("role", "standby") + rec("sysid", "42") + rec("slot_name", "node_2") + rec("idle_slot", "copy_of_node_3") + rec("receiver", "streaming db1 5432"),
		want: Topology{Role: "standby", SystemID: "42", Upstream: "db1:5432", Receiver: "streaming", SlotName: "node_2"},
	}, {
		name: "standby: a slot name PostgreSQL would refuse",
		out:  rec("role", "standby") + rec("sysid", "42") + rec("slot_name", "node 2; DROP"),
		want: Topology{Role: "standby", SystemID: "42"},
	}, {
		name: "no role", out: rec("sysid", "42"), err: "recovery",
	}, {
		name: "forged system identifier", out: rec("role", "primary") + rec("sysid", "-1"), err: "system identifier",
	}, {
		name: "forged lag", out: rec("role", "standby") + rec("sysid", "1") + rec("replay_lag", "99999999999999999999"), err: "replay lag",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			topo, pat, err := parseTopology([]byte(tc.out), "/data/n2")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one about %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			gotJSON, _ := json.Marshal(topo)
			wantJSON, _ := json.Marshal(tc.want)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("topology\n got %s\nwant %s", gotJSON, wantJSON)
			}
			gotP, _ := json.Marshal(pat)
			wantP, _ := json.Marshal(tc.patroni)
			if string(gotP) != string(wantP) {
				t.Errorf("patroni\n got %s\nwant %s", gotP, wantP)
			}
			if strings.Contains(string(gotJSON)+string(gotP), "hunter2") || strings.Contains(string(gotP), "topsecret") {
				t.Errorf("a password reached the facts")
			}
		})
	}
}

// manyClients are n WAL archivers named "many" on a unix socket.
func manyClients(n int) []WALClient {
	var out []WALClient
	for range n {
		out = append(out, WALClient{Name: "many", Addr: "local", State: "streaming", Kind: ClientArchiver})
	}
	return out
}

// slotNames are n idle slot names as idleSlots reports them.
func slotNames(n int) []string {
	var out []string
	for i := range n {
		out = append(out, "slot_"+strconv.Itoa(i))
	}
	return out
}

// idleSlots is n idle_slot records.
func idleSlots(n int) string {
	var b strings.Builder
	for _, s := range slotNames(n) {
		b.WriteString("idle_slot=" + s + "\x00")
	}
	return b.String()
}

// topologyOf discovers the cluster in dataDir and asks its topology, as
// pgtune does on a host, over the local transport.
func topologyOf(t *testing.T, dataDir string) *Topology {
	t.Helper()
	ctx := context.Background()
	tr := transport.NewLocal()
	pg, err := DiscoverPostgres(ctx, tr, Options{PGData: dataDir})
	if err != nil || pg == nil {
		t.Fatalf("discover %s: %v", dataDir, err)
	}
	topo, err := GatherTopology(ctx, tr, false, pg)
	if err != nil {
		t.Fatalf("topology of %s: %v", dataDir, err)
	}
	if topo == nil {
		t.Fatalf("no topology for the running server in %s", dataDir)
	}
	return topo
}

func TestTopologyStreaming(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: a primary and two standbys")
	}
	set := testhost.StreamingReplication(t, 2)
	primary := topologyOf(t, set.Primary.DataDir)
	if primary.Role != "primary" || primary.Patroni != nil {
		t.Errorf("primary: role %q, patroni %+v", primary.Role, primary.Patroni)
	}
	var names []string
	for _, s := range primary.Standbys {
		names = append(names, s.Name+":"+s.State)
		if s.LagBytes < 0 {
			t.Errorf("standby %s: lag %d", s.Name, s.LagBytes)
		}
	}
	if strings.Join(names, ",") != "standby1:streaming,standby2:streaming" && strings.Join(names, ",") != "standby2:streaming,standby1:streaming" {
		t.Errorf("primary's standbys = %v", names)
	}
	want := strconv.Itoa(set.Primary.Port)
	for i, s := range set.Standbys {
		topo := topologyOf(t, s.DataDir)
		if topo.Role != "standby" || topo.SystemID != primary.SystemID || topo.Receiver != "streaming" {
			t.Errorf("standby%d: %+v (primary's system identifier %s)", i+1, topo, primary.SystemID)
		}
		if !strings.HasSuffix(topo.Upstream, ":"+want) {
			t.Errorf("standby%d: upstream %q, want the primary's port %s", i+1, topo.Upstream, want)
		}
		if topo.ClusterName != "standby"+strconv.Itoa(i+1) {
			t.Errorf("standby%d: cluster_name %q", i+1, topo.ClusterName)
		}
		b, _ := json.Marshal(topo)
		if strings.Contains(string(b), testhost.ReplicaPassword) {
			t.Errorf("standby%d: the password of primary_conninfo reached the facts: %s", i+1, b)
		}
	}
	if primary.SocketDirs != set.Primary.SocketDir {
		t.Errorf("primary's unix_socket_directories %q, want %q", primary.SocketDirs, set.Primary.SocketDir)
	}
	// Both stream over the primary's unix socket, from one machine: each
	// sender is tied to its standby by the other end of its socket, which
	// that standby's WAL receiver holds and the other's does not.
	for i, s := range set.Standbys {
		pg, err := DiscoverPostgres(context.Background(), transport.NewLocal(), Options{PGData: s.DataDir})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range primary.Standbys {
			if r.Addr != "local" || r.PID <= 0 || !r.PeersRead || r.PeersNote != "" || len(r.Peers) != 1 {
				t.Fatalf("primary's sender %+v: want its one socket peer read", r)
			}
			why := PeerWhy(r, pg.WALReceiverSockets)
			if mine := r.Name == fmt.Sprintf("standby%d", i+1); mine != (why == "") {
				t.Errorf("standby%d (receiver sockets %v), sender %q (peers %v): tied %v (%s)", i+1, pg.WALReceiverSockets, r.Name, r.Peers, why == "", why)
			}
		}
	}
	if len(primary.IdleSlots) != 0 {
		t.Errorf("primary: idle slots %q, none made", primary.IdleSlots)
	}
	// standby1 streams through a slot; "gone" is the slot of a standby
	// that streams no more: only it is idle.
	set.Primary.Query(t, "SELECT pg_create_physical_replication_slot('standby1'), pg_create_physical_replication_slot('gone')")
	s1 := set.Standbys[0]
	s1.Stop(t)
	s1.AppendConf(t, "primary_slot_name = 'standby1'")
	s1.Start(t)
	set.WaitStreaming(t)
	if got := topologyOf(t, set.Primary.DataDir).IdleSlots; strings.Join(got, ",") != "gone" {
		t.Errorf("primary: idle slots %q, want gone", got)
	}
	if got := topologyOf(t, s1.DataDir); got.SlotName != "standby1" || len(got.IdleSlots) != 0 {
		t.Errorf("standby1: slot %q, idle slots %q", got.SlotName, got.IdleSlots)
	}
}

// TestTopologyWALClients: a primary with a standby, a WAL archiver
// (pg_receivewal through a physical slot, as Barman streams) and a logical
// decoding client (pg_recvlogical on a test_decoding slot) streaming from
// it: only the standby is a standby; the others are its clients, named
// and of their kind.
func TestTopologyWALClients(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: a primary, a standby, pg_receivewal and pg_recvlogical")
	}
	set := testhost.StreamingReplication(t, 1, testhost.WithConf("wal_level = logical"))
	testhost.StartReceiveWAL(t, set.Primary, "barman_receive_wal", "barman")
	testhost.StartRecvLogical(t, set.Primary, "debezium", "cdc")
	topo := topologyOf(t, set.Primary.DataDir)
	var standbys, clients []string
	for _, s := range topo.Standbys {
		standbys = append(standbys, s.Name)
	}
	for _, c := range topo.Clients {
		clients = append(clients, c.Name+": "+c.Kind+" "+c.State+" "+c.Addr)
	}
	if strings.Join(standbys, ",") != "standby1" {
		t.Errorf("standbys %q, want standby1 alone", standbys)
	}
	// The logical client first (logical clients come first).
	want := "debezium: " + ClientLogical + " streaming local|barman_receive_wal: " + ClientArchiver + " streaming local"
	if got := strings.Join(clients, "|"); got != want {
		t.Errorf("WAL clients\n got %q\nwant %q", got, want)
	}
	if lc := topo.LogicalClients(); len(lc) != 1 || lc[0].Name != "debezium" {
		t.Errorf("logical clients %+v", lc)
	}
	if len(topo.IdleSlots) != 0 {
		t.Errorf("idle slots %q: the archiver streams through its slot", topo.IdleSlots)
	}
}

func TestTopologyPatroni(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: etcd and three Patroni members")
	}
	pc := testhost.Patroni(t, 3)
	leader := pc.Leader()
	if leader == nil {
		t.Fatal("no leader")
	}
	sysid := ""
	for _, m := range pc.Members {
		topo := topologyOf(t, m.PG.DataDir)
		p := topo.Patroni
		if p == nil {
			t.Fatalf("%s: Patroni not detected: %+v", m.Name, topo)
		}
		if p.Scope != pc.Scope || p.Name != m.Name || p.APIURL != m.APIURL() || p.ConfigFile != m.ConfigFile || !p.GeneratedConf || p.PID <= 0 {
			t.Errorf("%s: patroni facts %+v", m.Name, p)
		}
		if p.APIError != "" || p.State != "running" || len(p.Members) != len(pc.Members) || p.Paused {
			t.Errorf("%s: REST view %+v", m.Name, p)
		}
		wantRole := "standby"
		if m == leader {
			wantRole = "primary"
		}
		if topo.Role != wantRole {
			t.Errorf("%s: role %s, want %s (leader %s)", m.Name, topo.Role, wantRole, leader.Name)
		}
		if sysid != "" && topo.SystemID != sysid {
			t.Errorf("%s: system identifier %s, others %s", m.Name, topo.SystemID, sysid)
		}
		sysid = topo.SystemID
		b, _ := json.Marshal(topo)
		if strings.Contains(string(b), testhost.PatroniPassword) {
			t.Errorf("%s: a password from patroni.yml reached the facts: %s", m.Name, b)
		}
		// Patroni starts the server with --config-file: the topology
		// query still comes with the gather, and finds the same.
		f, err := GatherHost(context.Background(), transport.NewLocal(), Options{PGData: m.PG.DataDir})
		if err != nil || f.Postgres == nil {
			t.Fatalf("%s: GatherHost: %v %s", m.Name, err, f.PostgresError)
		}
		if f.Ran.Len() != 1 {
			t.Errorf("%s: %d answers run ahead; want the topology query's", m.Name, f.Ran.Len())
		}
		seen := &seenRuns{Transport: transport.NewLocal()}
		ahead, err := GatherTopology(context.Background(), f.Ran.Transport(seen), false, f.Postgres)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range seen.args {
			if len(a) > 5 && a[5] == topologyScript {
				t.Errorf("%s: the topology query ran on its own: not run ahead", m.Name)
			}
		}
		if ahead.Role != topo.Role || ahead.SystemID != topo.SystemID || ahead.Patroni == nil || ahead.Patroni.Name != m.Name {
			t.Errorf("%s: topology run ahead %+v; asked on its own %+v", m.Name, ahead, topo)
		}
	}
}

// seenRuns passes commands on and keeps their arguments.
type seenRuns struct {
	transport.Transport
	args [][]string
}

func (s *seenRuns) Run(ctx context.Context, cmd transport.Command) (transport.Result, error) {
	s.args = append(s.args, cmd.Args)
	return s.Transport.Run(ctx, cmd)
}

func TestParseStoppedTopology(t *testing.T) {
	out := "pg_control version number:            1300\nDatabase system identifier:           7312345678901234567\nDatabase cluster state:               shut down in recovery\nLatest checkpoint's TimeLineID:       3\n"
	got := parseStoppedTopology(out)
	if got == nil || got.Role != RoleStopped || got.SystemID != "7312345678901234567" || got.Timeline != 3 || !got.IsStopped() || got.IsPrimary() || !got.StoppedStandby {
		t.Fatalf("got %+v", got)
	}
	for state, standby := range map[string]bool{"shut down": false, "in production": false, "in archive recovery": true, "shut down in recovery": true} {
		got := parseStoppedTopology("Database system identifier: 7\nDatabase cluster state: " + state + "\n")
		if got == nil || got.StoppedStandby != standby {
			t.Errorf("%s: got %+v, want stopped standby %v", state, got, standby)
		}
	}
	if got := parseStoppedTopology("Database system identifier: 7\nDatabase cluster state: shut down\npgtune recovery signal: present\n"); got == nil || !got.StoppedStandby {
		t.Errorf("standby.signal: got %+v, want a stopped standby", got)
	}
	for _, bad := range []string{"", "Database system identifier: -1\n", "Database system identifier: x\n"} {
		if got := parseStoppedTopology(bad); got != nil {
			t.Errorf("%q: got %+v, want none", bad, got)
		}
	}
}

// A server that accepts connections but never answers them (stopped
// here) fails the topology query with psql's timeout, on the gather's
// pre-run and on its own session alike: the host's facts are gathered
// all the same, and the run goes on.
func TestTopologyOfAServerThatNeverAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: a real cluster")
	}
	c := testhost.Postgres(t)
	ctx := context.Background()
	local := transport.NewLocal()
	f, err := GatherHost(ctx, local, Options{PGData: c.DataDir})
	if err != nil || f.Postgres == nil || !f.Postgres.Running {
		t.Fatalf("GatherHost: %v, %+v", err, f)
	}
	pid := c.PID(t)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	if _, err := GatherTopology(ctx, local, false, f.Postgres); err == nil || !strings.Contains(err.Error(), "timeout expired") {
		t.Errorf("GatherTopology: %v; want psql's timeout", err)
	}
	f, err = GatherHost(ctx, local, Options{PGData: c.DataDir})
	if err != nil || f.Postgres == nil || f.Ran.Len() != 0 {
		t.Errorf("GatherHost: %v, %+v; want the cluster and no answer run ahead", err, f)
	}
}
