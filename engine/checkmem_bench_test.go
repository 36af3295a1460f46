package engine

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	gliderssh "github.com/gliderlabs/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/pgtune/pgtune/engine/inventory"
	"github.com/pgtune/pgtune/engine/plan"
	"github.com/pgtune/pgtune/engine/playbook"
	"github.com/pgtune/pgtune/engine/report"
	"github.com/pgtune/pgtune/engine/transport"
)

// BenchmarkCheckMemory is the controller's memory per host in a fleet
// check: N hosts reached over real SSH (the transport pgtune uses, one
// connection per host) served by in-process SSH endpoints, each answering
// the facts gather with a recorded transcript and a configuration file of
// a stock postgresql.conf's size, which a module plans to rewrite (what
// pgconf does on every host of a first audit). It runs without root.
//
// Metrics: retained-B/host is the heap still in use once every host is
// planned and the report written (what grows with the fleet: the hosts'
// plans and report); alloc-B/host is everything allocated per host, the
// in-process SSH endpoints' share included. Timing is not the point: the
// endpoints share this process's CPU.
func BenchmarkCheckMemory(b *testing.B) {
	for _, n := range []int{50, 500} {
		b.Run(fmt.Sprintf("hosts=%d", n), func(b *testing.B) { benchCheckMemory(b, n) })
	}
}

// confPath is the file the bench module reads; confSize is about the size
// of PostgreSQL 15's postgresql.conf.sample.
const (
	confPath = "/etc/pgtune-bench/postgresql.conf"
	confSize = 30 << 10
)

func benchCheckMemory(b *testing.B, n int) {
	b.Setenv("SSH_AUTH_SOCK", "") // the bench's key only, never an agent's
	gather, err := os.ReadFile("facts/testdata/gather-debian-vm.txt")
	if err != nil {
		b.Fatal(err)
	}
	fl := startBenchHosts(b, n, gather, benchConf())
	inv, err := inventory.Parse("inv.yml", []byte(fl.inventory))
	if err != nil {
		b.Fatal(err)
	}
	mods, _ := Registry(confRewrite{})
	book := &playbook.Playbook{File: "bench.yml", Plays: []*playbook.Play{{
		Name: "bench", Hosts: "db", Sections: []string{"confrewrite"}, Policy: map[string]any{"confrewrite": &struct{}{}},
	}}}
	hosts, err := Targets(inv, book, "")
	if err != nil {
		b.Fatal(err)
	}
	r := &Runner{Modules: mods, Forks: 20, RunID: "bench", PlanOnly: true, Dial: Dial,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	b.ReportAllocs()
	var retained, allocated float64
	runs := 0
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s, err := r.Plan(context.Background(), inv, book, hosts)
		if err != nil {
			b.Fatal(err)
		}
		rep := s.Report("check")
		if err := report.WriteJSON(io.Discard, rep); err != nil {
			b.Fatal(err)
		}
		if rep.Summary.Drift != n {
			b.Fatalf("summary %+v, want %d hosts drifting", rep.Summary, n)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(s)
		runtime.KeepAlive(rep)
		retained += float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
		allocated += float64(after.TotalAlloc - before.TotalAlloc)
		runs++
		s.Close()
	}
	b.ReportMetric(retained/float64(runs*n), "retained-B/host")
	b.ReportMetric(allocated/float64(runs*n), "alloc-B/host")
}

// benchConf is a configuration file of confSize: commented-out settings,
// as a stock postgresql.conf mostly is.
func benchConf() string {
	var c strings.Builder
	for i := 0; c.Len() < confSize; i++ {
		fmt.Fprintf(&c, "#setting_%04d = 'value %d'\t\t# what it does, in a comment\n", i, i)
	}
	return c.String()
}

// confRewrite reads confPath and plans it with one line more, keeping the
// new content for Apply, as pgconf plans postgresql.conf's include line.
type confRewrite struct{}

func (confRewrite) Name() string       { return "confrewrite" }
func (confRewrite) Requires() []string { return nil }
func (confRewrite) NewParams() any     { return &struct{}{} }
func (confRewrite) Validate(any) error { return nil }
func (confRewrite) Check(ctx context.Context, t *Target, _ any) (*plan.ModulePlan, error) {
	res, err := t.Transport.Run(ctx, transport.Command{Args: []string{"cat", confPath}})
	if err != nil {
		return nil, err
	}
	before := string(res.Stdout)
	after := before + "include_dir = 'conf.d'\n"
	p := &plan.ModulePlan{Module: "confrewrite", State: []byte(after)}
	p.Add(plan.Change{Kind: plan.KindFile, Target: confPath, Before: before, After: after,
		Diff: "--- a" + confPath + "\n+++ b" + confPath + "\n@@ -1,0 +1,1 @@\n+include_dir = 'conf.d'\n"})
	return p, nil
}
func (confRewrite) Apply(context.Context, *Target, *plan.ModulePlan) error  { return nil }
func (confRewrite) Verify(context.Context, *Target, *plan.ModulePlan) error { return nil }

// benchHosts is N SSH endpoints of one in-process server and the
// inventory that reaches them.
type benchHosts struct {
	inventory string
}

// startBenchHosts serves n endpoints on 127.0.0.1: the gather (the
// command that reads /proc/meminfo) gets the transcript, `cat confPath`
// gets conf, anything else fails with status 1.
func startBenchHosts(b *testing.B, n int, gather []byte, conf string) *benchHosts {
	dir := b.TempDir()
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	hostKey, err := gossh.NewSignerFromKey(hostPriv)
	if err != nil {
		b.Fatal(err)
	}
	clientPub, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	block, err := gossh.MarshalPrivateKey(clientPriv, "")
	if err != nil {
		b.Fatal(err)
	}
	keyFile := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		b.Fatal(err)
	}
	allowed, err := gossh.NewPublicKey(clientPub)
	if err != nil {
		b.Fatal(err)
	}
	srv := &gliderssh.Server{
		Handler: func(s gliderssh.Session) {
			line := s.RawCommand()
			_, _ = io.Copy(io.Discard, s)
			switch {
			case strings.Contains(line, "/proc/meminfo"):
				_, _ = s.Write(gather)
			case strings.Contains(line, confPath):
				_, _ = io.WriteString(s, conf)
			default:
				_, _ = io.WriteString(s.Stderr(), "bench host: not served\n")
				_ = s.Exit(1)
				return
			}
			_ = s.Exit(0)
		},
		PublicKeyHandler: func(_ gliderssh.Context, key gliderssh.PublicKey) bool {
			return bytes.Equal(key.Marshal(), allowed.Marshal())
		},
	}
	srv.AddHostKey(hostKey)
	b.Cleanup(func() { _ = srv.Close() })
	hostLine := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(hostKey.PublicKey())))
	var known, inv strings.Builder
	fmt.Fprintf(&inv, "all:\n  children:\n    db:\n      vars:\n        ssh_host: 127.0.0.1\n        ssh_user: bench\n")
	fmt.Fprintf(&inv, "        ssh_private_key_file: %s\n        ssh_known_hosts_file: %s\n      hosts:\n", keyFile, filepath.Join(dir, "known_hosts"))
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		go func() { _ = srv.Serve(l) }()
		port := l.Addr().(*net.TCPAddr).Port
		fmt.Fprintf(&known, "[127.0.0.1]:%d %s\n", port, hostLine)
		fmt.Fprintf(&inv, "        h%04d:\n          ssh_port: %d\n", i, port)
	}
	if err := os.WriteFile(filepath.Join(dir, "known_hosts"), []byte(known.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	return &benchHosts{inventory: inv.String()}
}
