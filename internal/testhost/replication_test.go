package testhost

import (
	"strings"
	"testing"
)

func TestStreamingReplication(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts three PostgreSQL clusters")
	}
	set := StreamingReplication(t, 2)
	if got := set.Primary.Query(t, "SELECT pg_is_in_recovery()"); got != "f" {
		t.Errorf("primary in recovery: %q", got)
	}
	names := set.Primary.Query(t, "SELECT string_agg(application_name, ',' ORDER BY application_name) FROM pg_stat_replication WHERE state = 'streaming'")
	if names != "standby1,standby2" {
		t.Errorf("streaming standbys = %q, want standby1,standby2", names)
	}
	sysid := set.Primary.Query(t, "SELECT system_identifier FROM pg_control_system()")
	for _, s := range set.Standbys {
		if got := s.Query(t, "SELECT pg_is_in_recovery()"); got != "t" {
			t.Errorf("standby %s not in recovery: %q", s.DataDir, got)
		}
		if got := s.Query(t, "SELECT system_identifier FROM pg_control_system()"); got != sysid {
			t.Errorf("standby system identifier %s, primary %s", got, sysid)
		}
		if s.Port == set.Primary.Port || s.DataDir == set.Primary.DataDir {
			t.Errorf("standby shares port or data dir with the primary")
		}
	}
	// A row written on the primary reaches the standbys.
	set.Primary.Query(t, "CREATE TABLE probe AS SELECT 42 AS v")
	set.Primary.Query(t, "SELECT pg_switch_wal()")
	lsn := set.Primary.Query(t, "SELECT pg_current_wal_lsn()")
	for _, s := range set.Standbys {
		s.WaitReplayed(t, lsn)
		if got := s.Query(t, "SELECT v FROM probe"); !strings.Contains(got, "42") {
			t.Errorf("standby %s: probe = %q", s.DataDir, got)
		}
	}
}
