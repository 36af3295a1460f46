//go:build benchfleet

package benchfleet

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	gliderssh "github.com/gliderlabs/ssh"
	gossh "golang.org/x/crypto/ssh"
)

// The replay fleet measures the controller at fleet sizes the real hosts
// cannot reach on one small machine: a real sshd host's check costs the
// machine seconds of CPU (sudo, sh, postgres -C), so 1000 of them take
// most of an hour. A recording proxy in front of one real endpoint keeps,
// for every session of one real check, the bytes each way in the order
// they crossed and the exit status; then N in-process SSH endpoints play
// those sessions back to the pgtune binary. The controller does all of
// its work (a handshake per host, every command sent, every answer
// parsed, planned and reported) while the hosts cost next to nothing. The
// replayed hosts' CPU is this process's and is not shown.
//
// A session is played back step by step: before sending what the host
// sent, the endpoint reads as many bytes from pgtune as the host had
// received by then, so a conversation over one session (a shell fed
// commands on stdin) replays as well as one command per session. A word
// pgtune sends that differs from the recording (a random marker the host
// is to echo) is put in place of the recorded one in what is sent back.

// event is one step of a recorded session: bytes received from the
// controller (in), or sent to it on stdout (out) and stderr (errOut).
type event struct {
	in, out, errOut []byte
}

// recording is one session: its command line, its events and its exit.
type recording struct {
	command string
	events  []event
	exit    int
}

// tape is every session of one recorded host check, by command line, in
// the order each command line was first run: the i-th session with a
// given command line on a connection replays the i-th recorded one.
type tape struct {
	mu       sync.Mutex
	sessions map[string][]*recording
}

func (t *tape) add(r *recording) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sessions[r.command] = append(t.sessions[r.command], r)
}

func (t *tape) find(command string, nth int) *recording {
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := t.sessions[command]
	if nth >= len(rs) {
		return nil
	}
	return rs[nth]
}

func (t *tape) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, rs := range t.sessions {
		n += len(rs)
	}
	return n
}

// sessionLog collects a recorded session's events as they cross the proxy.
type sessionLog struct {
	mu     sync.Mutex
	events []event
}

func (l *sessionLog) received(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := len(l.events); k > 0 && l.events[k-1].in != nil {
		l.events[k-1].in = append(l.events[k-1].in, p...)
		return
	}
	l.events = append(l.events, event{in: append([]byte(nil), p...)})
}

// sent adds output; output events between two inputs become one.
func (l *sessionLog) sent(ext int, p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := len(l.events)
	if k == 0 || l.events[k-1].in != nil {
		l.events = append(l.events, event{out: []byte{}})
		k++
	}
	if ext == 1 {
		l.events[k-1].errOut = append(l.events[k-1].errOut, p...)
	} else {
		l.events[k-1].out = append(l.events[k-1].out, p...)
	}
}

type logReader struct {
	r   io.Reader
	log *sessionLog
}

func (r logReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.log.received(p[:n])
	}
	return n, err
}

type logWriter struct {
	w   io.Writer
	ext int
	log *sessionLog
}

func (w logWriter) Write(p []byte) (int, error) {
	w.log.sent(w.ext, p)
	return w.w.Write(p)
}

// replayFleet is the proxy (while recording) and the N endpoints.
type replayFleet struct {
	tape    *tape
	hostKey gossh.Signer
	user    gossh.PublicKey // the only key let in: the bench's client key
	servers []*gliderssh.Server
	ports   []int
	known   string // known_hosts of the replay endpoints
	execs   atomic.Int64
	misses  atomic.Int64
	missed  sync.Map // command line → true, for the failure message
}

func newReplayFleet(b *testing.B, f *fleet) *replayFleet {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	hk, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		b.Fatal(err)
	}
	client := clientSigner(b, f)
	return &replayFleet{tape: &tape{sessions: map[string][]*recording{}}, hostKey: hk, user: client.PublicKey()}
}

func clientSigner(b *testing.B, f *fleet) gossh.Signer {
	pem, err := os.ReadFile(f.base.KeyFile)
	if err != nil {
		b.Fatal(err)
	}
	s, err := gossh.ParsePrivateKey(pem)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

func (rf *replayFleet) server(handler gliderssh.Handler) *gliderssh.Server {
	srv := &gliderssh.Server{
		Handler: handler,
		PublicKeyHandler: func(_ gliderssh.Context, key gliderssh.PublicKey) bool {
			return bytes.Equal(key.Marshal(), rf.user.Marshal())
		},
	}
	srv.AddHostKey(rf.hostKey)
	rf.servers = append(rf.servers, srv)
	return srv
}

// serve starts srv on a new port of 127.0.0.1.
func (rf *replayFleet) serve(b *testing.B, srv *gliderssh.Server) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	b.Cleanup(func() { _ = srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// proxy returns the port of a recording proxy in front of the real
// endpoint upstream: each session is run there (a connection per session,
// logged in as benchUser with the bench's key) and recorded on rf's tape.
func (rf *replayFleet) proxy(b *testing.B, f *fleet, upstream int) int {
	cfg := &gossh.ClientConfig{
		User:            benchUser,
		Auth:            []gossh.AuthMethod{gossh.PublicKeys(clientSigner(b, f))},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(), // loopback: the fleet's own sshd, started by this bench
	}
	addr := fmt.Sprintf("127.0.0.1:%d", upstream)
	return rf.serve(b, rf.server(func(s gliderssh.Session) {
		rec := &recording{command: s.RawCommand()}
		exit, err := relay(s, addr, cfg, rec)
		if err != nil {
			fmt.Fprintf(s.Stderr(), "replay proxy: %v\n", err)
			exit = 255
		}
		rec.exit = exit
		rf.tape.add(rec)
		_ = s.Exit(exit)
	}))
}

// relay runs s's command upstream, logging what crosses.
func relay(s gliderssh.Session, addr string, cfg *gossh.ClientConfig, rec *recording) (int, error) {
	c, err := gossh.Dial("tcp", addr, cfg)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	up, err := c.NewSession()
	if err != nil {
		return 0, err
	}
	defer up.Close()
	log := &sessionLog{}
	up.Stdin = logReader{r: s, log: log}
	up.Stdout = logWriter{w: s, ext: 0, log: log}
	up.Stderr = logWriter{w: s.Stderr(), ext: 1, log: log}
	err = up.Run(rec.command)
	rec.events = log.events
	var exitErr *gossh.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exitErr):
		return exitErr.ExitStatus(), nil
	}
	return 0, err
}

// start opens n replay endpoints and writes their known_hosts.
func (rf *replayFleet) start(b *testing.B, dir string, n int) {
	line := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(rf.hostKey.PublicKey())))
	var known strings.Builder
	srv := rf.server(rf.play)
	for i := 0; i < n; i++ {
		p := rf.serve(b, srv)
		rf.ports = append(rf.ports, p)
		fmt.Fprintf(&known, "[127.0.0.1]:%d %s\n", p, line)
	}
	rf.known = filepath.Join(dir, "replay_known_hosts")
	if err := os.WriteFile(rf.known, []byte(known.String()), 0o600); err != nil {
		b.Fatal(err)
	}
}

// connKey is where a replay connection counts its sessions by command.
type connKey struct{}

type connSessions struct {
	mu   sync.Mutex
	seen map[string]int
}

// play replays one session: the recording of the same command line, the
// same occurrence on its connection.
func (rf *replayFleet) play(s gliderssh.Session) {
	rf.execs.Add(1)
	cs := connState(s.Context())
	cs.mu.Lock()
	nth := cs.seen[s.RawCommand()]
	cs.seen[s.RawCommand()]++
	cs.mu.Unlock()
	rec := rf.tape.find(s.RawCommand(), nth)
	if rec == nil {
		rf.misses.Add(1)
		rf.missed.Store(s.RawCommand(), true)
		fmt.Fprintf(s.Stderr(), "replay: no recorded session %d for this command\n", nth+1)
		_ = s.Exit(127)
		return
	}
	var subst [][2][]byte // recorded word → the word pgtune sent instead
	for _, e := range rec.events {
		if e.in != nil {
			got := make([]byte, len(e.in))
			if _, err := io.ReadFull(s, got); err != nil {
				return
			}
			subst = append(subst, changedWords(e.in, got)...)
			continue
		}
		for _, part := range []struct {
			w    io.Writer
			data []byte
		}{{s, e.out}, {s.Stderr(), e.errOut}} {
			if len(part.data) == 0 {
				continue
			}
			data := part.data
			for _, sw := range subst {
				data = bytes.ReplaceAll(data, sw[0], sw[1])
			}
			if _, err := part.w.Write(data); err != nil {
				return
			}
		}
	}
	_ = s.Exit(rec.exit)
}

// changedWords pairs each word of recorded that got differs in (a word:
// a run of letters and digits, at the same place in both) with got's.
func changedWords(recorded, got []byte) [][2][]byte {
	var out [][2][]byte
	word := func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	for i := 0; i < len(recorded); i++ {
		if recorded[i] == got[i] {
			continue
		}
		start, end := i, i+1
		for start > 0 && word(recorded[start-1]) && word(got[start-1]) {
			start--
		}
		for end < len(recorded) && word(recorded[end]) && word(got[end]) {
			end++
		}
		out = append(out, [2][]byte{append([]byte(nil), recorded[start:end]...), append([]byte(nil), got[start:end]...)})
		i = end
	}
	return out
}

func connState(ctx gliderssh.Context) *connSessions {
	ctx.Lock()
	defer ctx.Unlock()
	if cs, ok := ctx.Value(connKey{}).(*connSessions); ok {
		return cs
	}
	cs := &connSessions{seen: map[string]int{}}
	ctx.SetValue(connKey{}, cs)
	return cs
}
