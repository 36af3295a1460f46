package testhost

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestPostgresCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	c := Postgres(t)
	if got := c.Query(t, "SELECT 1+1"); got != "2" {
		t.Fatalf("SELECT 1+1 = %q", got)
	}
	pid := c.PID(t)
	if _, err := os.Stat("/proc/" + itoa(pid)); err != nil {
		t.Fatalf("postmaster %d not running: %v", pid, err)
	}
	conf, err := os.ReadFile(c.ConfigFile())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(conf), "#include_dir = '...'") {
		t.Errorf("plain initdb config expected, with a commented include_dir")
	}
	c.Stop(t)
	if c.Running() {
		t.Fatal("still running after Stop")
	}
	c.Start(t)
	if c.PID(t) == pid {
		t.Fatal("same PID after restart")
	}
	// StopOnCleanup stops the server when the (sub)test that called it
	// ends, before cleanups registered earlier (the cluster's own, here
	// the outer test's) run; those still remove it.
	t.Run("StopOnCleanup", func(t *testing.T) { StopOnCleanup(t, c) })
	if c.Running() {
		t.Error("StopOnCleanup: the server still runs after the subtest's cleanups")
	}
	if _, err := os.Stat(c.DataDir); err != nil {
		t.Errorf("StopOnCleanup removed the data directory: %v", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
