package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pgtune/pgtune/engine/transport"
)

// recording is what a live plan ran on one host and what came back, so a
// plan can be replayed over any number of hosts with no process, network or
// kernel in the way: what is left is the engine's own work.
type recording struct {
	PGData   string     `json:"pg_data"`
	PGBin    string     `json:"pg_bin"`
	StateDir string     `json:"state_dir"`
	Commands []recorded `json:"commands"`
}

type recorded struct {
	Args     []string `json:"args"`
	Stdin    string   `json:"stdin,omitempty"`
	Become   bool     `json:"become,omitempty"`
	Stdout   string   `json:"stdout"`
	Stderr   string   `json:"stderr,omitempty"`
	ExitCode int      `json:"exit_code,omitempty"`
	// Err is a failure to run at all (not a non-zero exit).
	Err string `json:"err,omitempty"`
	// took is how long the live command ran (not recorded: the replay
	// answers at once).
	took time.Duration
}

// nonceRE is the gather's discovery nonce (facts.discoveryNonce), the
// last line of its stdin: random per run, so it is keyed as one
// placeholder and the live one put in place of the recorded one in the
// answer.
var nonceRE = regexp.MustCompile(`(?m)^pgtune-[0-9a-f]{32}$`)

const noncePlaceholder = "pgtune-nonce"

// withoutNonce is stdin with its nonce (if any) replaced by the
// placeholder, and the nonce.
func withoutNonce(stdin []byte) ([]byte, string) {
	if !bytes.HasPrefix(stdin, []byte("discover\n")) {
		return stdin, ""
	}
	n := nonceRE.Find(stdin)
	if n == nil {
		return stdin, ""
	}
	return bytes.Replace(stdin, n, []byte(noncePlaceholder), 1), string(n)
}

// seed keys every replay map; one per process is enough.
var seed = maphash.MakeSeed()

// commandKey hashes a command: the gather script and the scratch copy's
// stdin are tens of kB, and formatting them into a key on every command
// would cost more than the engine work being measured.
func commandKey(c transport.Command) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	for _, a := range c.Args {
		h.WriteString(a)
		h.WriteByte(0)
	}
	if c.Become {
		h.WriteByte(1)
	}
	h.WriteByte(0)
	stdin, _ := withoutNonce(c.Stdin)
	h.Write(stdin)
	return h.Sum64()
}

// same confirms a hash hit, so a collision can never serve a wrong answer.
func (r recorded) same(c transport.Command) bool {
	a, _ := withoutNonce([]byte(r.Stdin))
	b, _ := withoutNonce(c.Stdin)
	return slices.Equal(r.Args, c.Args) && r.Become == c.Become && bytes.Equal(a, b)
}

// recorder runs commands on an inner transport and keeps every exchange.
type recorder struct {
	inner transport.Transport
	mu    sync.Mutex
	log   []recorded
}

func (r *recorder) Run(ctx context.Context, c transport.Command) (transport.Result, error) {
	start := time.Now()
	res, err := r.inner.Run(ctx, c)
	rec := recorded{Args: c.Args, Stdin: string(c.Stdin), Become: c.Become,
		Stdout: string(res.Stdout), Stderr: string(res.Stderr), ExitCode: res.ExitCode, took: time.Since(start)}
	var exit *transport.ExitError
	if err != nil && !errors.As(err, &exit) {
		rec.Err = err.Error()
	}
	r.mu.Lock()
	r.log = append(r.log, rec)
	r.mu.Unlock()
	return res, err
}

func (r *recorder) Close() error { return r.inner.Close() }

// replayer answers each command with what the recording got for it; a
// command asked again gets the next answer recorded for it (the last one
// once they run out). A command never recorded is an error naming it, so a
// changed engine shows up as a failed benchmark, not a silently cheaper one.
type replayer struct {
	answers map[uint64][]recorded
	mu      sync.Mutex
	next    map[uint64]int
}

func newReplayer(rec *recording) *replayer {
	p := &replayer{answers: map[uint64][]recorded{}, next: map[uint64]int{}}
	for _, c := range rec.Commands {
		k := commandKey(transport.Command{Args: c.Args, Stdin: []byte(c.Stdin), Become: c.Become})
		p.answers[k] = append(p.answers[k], c)
	}
	return p
}

// fork returns a fresh replayer over the same answers, one per host.
func (p *replayer) fork() *replayer {
	return &replayer{answers: p.answers, next: map[uint64]int{}}
}

func (p *replayer) Run(ctx context.Context, c transport.Command) (transport.Result, error) {
	if err := ctx.Err(); err != nil {
		return transport.Result{}, err
	}
	k := commandKey(c)
	as := p.answers[k]
	if len(as) == 0 || !as[0].same(c) {
		return transport.Result{}, fmt.Errorf("replay: command not in the recording (re-record with go test ./bench -run TestPlanReplay -capture): %s", short(c.String()))
	}
	p.mu.Lock()
	i := min(p.next[k], len(as)-1)
	p.next[k]++
	p.mu.Unlock()
	a := as[i]
	res := transport.Result{Stdout: []byte(a.Stdout), Stderr: []byte(a.Stderr), ExitCode: a.ExitCode}
	if _, was := withoutNonce([]byte(a.Stdin)); was != "" {
		_, now := withoutNonce(c.Stdin)
		res.Stdout = bytes.ReplaceAll(res.Stdout, []byte(was), []byte(now))
	}
	if a.Err != "" {
		return res, errors.New(a.Err)
	}
	if a.ExitCode != 0 {
		return res, &transport.ExitError{Command: c.String(), Result: res}
	}
	return res, nil
}

func (p *replayer) Close() error { return nil }

func short(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

func loadRecording(path string) (*recording, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rec recording
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rec.Commands) == 0 {
		return nil, fmt.Errorf("%s: no commands recorded", path)
	}
	return &rec, nil
}
