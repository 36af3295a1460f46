package testhost

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Prober writes a row every 100 ms to whichever server takes writes
// (libpq's multi-host conninfo with target_session_attrs=read-write, one
// connection per row, as a client following a switchover would) and
// remembers each row the server acknowledged and the longest time between
// two acknowledgements.
type Prober struct {
	conninfo string
	psql     string
	stop     chan struct{}
	done     chan struct{}

	mu      sync.Mutex
	acked   []int64
	last    time.Time
	maxGap  time.Duration
	gapFrom time.Time
	failed  int
}

// StartProber starts writing to the members (their TCP ports on
// 127.0.0.1); Finish stops it.
func StartProber(t testing.TB, members ...*Cluster) *Prober {
	t.Helper()
	var hosts, ports []string
	for _, m := range members {
		hosts = append(hosts, "127.0.0.1")
		ports = append(ports, strconv.Itoa(m.Port))
	}
	p := &Prober{
		conninfo: fmt.Sprintf("host=%s port=%s dbname=postgres user=postgres target_session_attrs=read-write connect_timeout=2",
			strings.Join(hosts, ","), strings.Join(ports, ",")),
		psql: filepath.Join(members[0].BinDir, "psql"),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	if out, err := p.run("CREATE TABLE IF NOT EXISTS probe (id bigserial PRIMARY KEY, at timestamptz NOT NULL DEFAULT now())"); err != nil {
		t.Fatalf("prober: create table: %v: %s", err, out)
	}
	p.last = time.Now()
	go p.loop()
	return p
}

func (p *Prober) run(sql string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, p.psql, "-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1", "-d", p.conninfo, "-c", sql).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (p *Prober) loop() {
	defer close(p.done)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		_, _ = p.WriteOnce()
	}
}

// WriteOnce writes one row now, as the prober does every 100 ms, and
// counts it acknowledged when the server returned its id; out is psql's
// output.
func (p *Prober) WriteOnce() (out string, err error) {
	out, err = p.run("INSERT INTO probe DEFAULT VALUES RETURNING id")
	now := time.Now()
	id, perr := strconv.ParseInt(out, 10, 64)
	if err == nil && perr != nil {
		err = fmt.Errorf("no row id: %w", perr)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.failed++
		return out, err
	}
	p.acked = append(p.acked, id)
	if gap := now.Sub(p.last); gap > p.maxGap {
		p.maxGap, p.gapFrom = gap, p.last
	}
	p.last = now
	return out, nil
}

// Finish stops the prober and checks that every acknowledged row is in
// the table the server now taking writes serves; it logs and returns the
// longest gap between two acknowledged writes.
func (p *Prober) Finish(t testing.TB) time.Duration {
	t.Helper()
	close(p.stop)
	<-p.done
	out, err := p.run("SELECT id FROM probe")
	if err != nil {
		t.Fatalf("prober: read the rows back: %v: %s", err, out)
	}
	present := map[int64]bool{}
	for _, l := range strings.Fields(out) {
		id, _ := strconv.ParseInt(l, 10, 64)
		present[id] = true
	}
	lost := 0
	for _, id := range p.acked {
		if !present[id] {
			lost++
		}
	}
	t.Logf("prober: %d rows acknowledged, %d attempts failed, %d rows in the table, %d acknowledged rows lost, longest write gap %v (from %s)",
		len(p.acked), p.failed, len(present), lost, p.maxGap.Round(time.Millisecond), p.gapFrom.Format("15:04:05.000"))
	if len(p.acked) == 0 {
		t.Fatal("prober: no row was ever acknowledged")
	}
	if lost > 0 {
		t.Errorf("prober: %d of %d acknowledged rows are missing after the rollout", lost, len(p.acked))
	}
	return p.maxGap
}
