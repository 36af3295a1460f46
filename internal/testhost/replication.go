package testhost

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ReplicaSet is plain streaming replication on loopback: a primary made by
// initdb and standbys made from it with pg_basebackup, each with its own
// data directory, socket directory and port, all run by `postgres`.
type ReplicaSet struct {
	Primary  *Cluster
	Standbys []*Cluster
	// Cascaded are standbys streaming from another standby (AddCascaded).
	Cascaded []*Cluster
}

// Members lists the primary, then the standbys, then the cascaded ones.
func (r *ReplicaSet) Members() []*Cluster {
	return append(append([]*Cluster{r.Primary}, r.Standbys...), r.Cascaded...)
}

// AddCascaded makes a standby of upstream (itself a standby: cascading
// replication) with pg_basebackup, starts it and waits until upstream
// sees it streaming.
func (r *ReplicaSet) AddCascaded(t testing.TB, upstream *Cluster, name string) *Cluster {
	t.Helper()
	c := basebackup(t, upstream, name)
	r.Cascaded = append(r.Cascaded, c)
	AwaitFiles(t, name+" to stream from its upstream", []string{c.Root}, nil, func() bool {
		out, err := upstream.TryQuery("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND application_name = '" + name + "'")
		return err == nil && strings.TrimSpace(out) == "1"
	})
	return c
}

// ReplicaPassword is the password each standby's primary_conninfo carries
// (the clusters trust loopback, so it is never checked): tests assert that
// no output ever shows it.
const ReplicaPassword = "repl-s3cret-never-shown"

// smallConf keeps each member's shared memory small: every member of a
// set shares this machine's one kernel.
var smallConf = []string{
	"shared_buffers = 16MB",
	"max_connections = 20",
	"wal_level = replica",
	"max_wal_senders = 8",
	"hot_standby = on",
	"wal_keep_size = 64MB",
}

// StreamingReplication starts a primary and n standbys streaming from it,
// and waits until the primary sees every standby streaming. Everything is
// stopped and removed in t.Cleanup (standbys first). Needs root, like
// Postgres.
func StreamingReplication(t testing.TB, n int, opts ...PGOption) *ReplicaSet {
	t.Helper()
	primary := Postgres(t, append([]PGOption{WithConf(smallConf...)}, opts...)...)
	set := &ReplicaSet{Primary: primary}
	for i := 1; i <= n; i++ {
		set.Standbys = append(set.Standbys, basebackup(t, primary, fmt.Sprintf("standby%d", i)))
	}
	set.WaitStreaming(t)
	return set
}

// basebackup makes a standby of primary named name (its application_name
// on the primary) and starts it.
func basebackup(t testing.TB, primary *Cluster, name string) *Cluster {
	t.Helper()
	c := emptyCluster(t, primary.BinDir)
	c.AsOwner(t, filepath.Join(c.BinDir, "pg_basebackup"), "-D", c.DataDir, "-h", primary.SocketDir,
		"-p", strconv.Itoa(primary.Port), "-X", "stream", "-c", "fast", "--no-sync")
	// pg_basebackup -R would write a conninfo with a passfile; spell it
	// out instead, with a password, as many real standbys have.
	conninfo := fmt.Sprintf("host=%s port=%d user=postgres password=%s application_name=%s",
		primary.SocketDir, primary.Port, ReplicaPassword, name)
	c.AppendConf(t, "primary_conninfo = '"+conninfo+"'", "cluster_name = '"+name+"'")
	WriteOwned(t, c.Owner, filepath.Join(c.DataDir, "standby.signal"), "", 0o600)
	c.Start(t)
	return c
}

// emptyCluster makes the directories of a cluster whose data directory
// something else fills (pg_basebackup); cleanup as in Postgres.
func emptyCluster(t testing.TB, binDir string) *Cluster {
	t.Helper()
	Reap(t)
	root, err := os.MkdirTemp("/tmp", "pgtune-pg-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{
		Root:      root,
		DataDir:   filepath.Join(root, "data"),
		BinDir:    binDir,
		SocketDir: filepath.Join(root, "sock"),
		LogFile:   filepath.Join(root, "server.log"),
		Owner:     "postgres",
	}
	// Recorded before anything starts: a test killed from here on
	// leaves them to the next Reap.
	forgetDir := register(t, record{Kind: "dir", Path: root})
	forgetPG := register(t, record{Kind: "postgres", DataDir: c.DataDir, BinDir: c.BinDir})
	t.Cleanup(func() {
		c.stopForCleanup(t)
		_ = os.RemoveAll(root)
		forgetPG()
		forgetDir()
	})
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(c.SocketDir, 0o755); err != nil {
		t.Fatal(err)
	}
	chown(t, c.Owner, root, c.SocketDir)
	return c
}

// WaitStreaming waits until the primary reports every standby streaming
// (pg_stat_replication), re-checking whenever a standby writes its log (it
// logs "started streaming WAL" when it does).
func (r *ReplicaSet) WaitStreaming(t testing.TB) {
	t.Helper()
	want := strconv.Itoa(len(r.Standbys))
	var dirs []string
	for _, s := range r.Standbys {
		dirs = append(dirs, s.Root)
	}
	AwaitFiles(t, "standbys to stream", dirs, nil, func() bool {
		out, err := r.Primary.TryQuery("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
		return err == nil && strings.TrimSpace(out) == want
	})
}

// WaitReplayed waits until this standby has replayed the WAL up to lsn,
// re-checking as WAL arrives in its pg_wal.
func (c *Cluster) WaitReplayed(t testing.TB, lsn string) {
	t.Helper()
	AwaitFiles(t, "standby to replay "+lsn, []string{filepath.Join(c.DataDir, "pg_wal")}, nil, func() bool {
		out, err := c.TryQuery("SELECT pg_last_wal_replay_lsn() >= '" + lsn + "'::pg_lsn")
		return err == nil && out == "t"
	})
}
