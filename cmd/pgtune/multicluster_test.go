package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/transport"
	"github.com/pgtune/pgtune/internal/fakehost"
)

// twoPostmasters is discovery's answer on a Debian host running two
// clusters (15/main and 15/demo2), each a genuine postmaster.
var twoPostmasters = strings.Join([]string{
	postmasterBlock("812", "5432", "main"),
	postmasterBlock("901", "5499", "demo2"),
	clusterBlock("main"), clusterBlock("demo2"),
}, "")

func postmasterBlock(pid, port, name string) string {
	data := "/var/lib/postgresql/15/" + name
	return nul("[postmaster]", "pid="+pid, "exe=/usr/lib/postgresql/15/bin/postgres", "cwd="+data,
		"ruid=105", "euid=105", "hugetlb_kb=0", "starttime=4711",
		"arg=/usr/lib/postgresql/15/bin/postgres", "arg=-D", "arg="+data, "arg=-c",
		"arg=config_file=/etc/postgresql/15/"+name+"/postgresql.conf",
		"data="+data, "realdata="+data, "owner=postgres", "owner_uid=105", "pg_version=15",
		"pidfile_pid="+pid, "pidfile_port="+port, "pidfile_socket=/var/run/postgresql",
		"bin=/usr/lib/postgresql/15/bin", "version=postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)")
}

func clusterBlock(name string) string {
	data := "/var/lib/postgresql/15/" + name
	return nul("[cluster]", "cluster="+name, "cluster_version=15",
		"log=/var/log/postgresql/postgresql-15-"+name+".log", "data="+data, "realdata="+data,
		"owner=postgres", "pg_version=15", "bin=/usr/lib/postgresql/15/bin",
		"version=postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)")
}

// nul joins records as the discovery script prints them.
func nul(recs ...string) string { return strings.Join(recs, "\x00") + "\x00" }

// TestSeveralClustersNoPGData is `make demo` on a machine running two
// clusters with no pg_data set: the audit fails (exit 1: the modules
// that size against the cluster cannot check) with one error that names
// both clusters and the inventory key that picks one, and no note
// claiming no cluster was found (golden files; made-up facts, so nothing
// depends on this machine).
func TestSeveralClustersNoPGData(t *testing.T) {
	for _, tc := range []struct {
		cmd    string
		code   int
		golden string
	}{
		{"check", 1, "several-clusters-check.golden"},
		{"facts", 0, "several-clusters-facts.golden"},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			dir := t.TempDir()
			inv := filepath.Join(dir, "localhost.yml")
			writeFile(t, inv, "all:\n  hosts:\n    localhost:\n      connection: local\n")
			var out, errOut bytes.Buffer
			app := newApp()
			app.Stdout, app.Stderr = &out, &errOut
			app.Dial = func(context.Context, *inventory.Host) (transport.Transport, error) {
				h := fakehost.New()
				h.Other = func(_ context.Context, cmd transport.Command) (transport.Result, error) {
					switch {
					case isGather(cmd):
						return transport.Result{Stdout: []byte(profiles[0].transcript())}, nil
					case isDiscovery(cmd) || len(cmd.Args) > 2 && strings.Contains(cmd.Args[2], "want_data=$1"):
						return transport.Result{Stdout: []byte(twoPostmasters)}, nil
					}
					res := transport.Result{ExitCode: 127, Stderr: []byte("fake host runs no commands")}
					return res, &transport.ExitError{Command: cmd.String(), Result: res}
				}
				return h, nil
			}
			if code := app.Run([]string{tc.cmd, "-i", inv, "--no-color"}); code != tc.code {
				t.Errorf("%s: exit %d, want %d\n%s%s", tc.cmd, code, tc.code, out.String(), errOut.String())
			}
			checkGolden(t, tc.golden, out.String())
		})
	}
}
