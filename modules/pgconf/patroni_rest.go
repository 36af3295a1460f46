package pgconf

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pgtune/pgtune/engine"
	"github.com/pgtune/pgtune/engine/facts"
	"github.com/pgtune/pgtune/engine/transport"
)

// Patroni's REST API is asked on the member's own host, as the cluster
// owner (runAsOwner: never root, from cd /), with python3 -I (isolated:
// neither the working directory nor the user's site directory nor PYTHON*
// variables reach sys.path), the python3 Patroni itself runs on.
//
// The address comes from the member's patroni.yml, which is the host's
// input: the script calls it only when every address it names is this
// host's own (loopback, or one a socket can bind to), so a member cannot
// point pgtune's POST /restart at another member; it connects to the
// address it checked, follows no redirect (the Authorization header never
// leaves for another URL) and uses no proxy. The credentials of
// restapi.authentication go on stdin, never on a command line; the answer
// is cut at 1 MiB. Over HTTPS the certificate is checked (PatroniTLS).
// Arguments: method, URL, JSON body, timeout, member, TLS settings.
const patroniRESTScript = `def refuse(msg):
    sys.stdout.write('status=0\n' + msg)
    sys.exit(0)
` + facts.PatroniLocalPy + `method, url, body, timeout, member = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
who = 'Patroni member %r: ' % member
auth = sys.stdin.read().strip()
u, host, port, addrs = local_addresses(url)
opener = make_opener(json.loads(sys.argv[6]), host)
if not addrs:
    refuse(who + 'REST API address %r resolves to nothing' % host)
# Connect to the addresses just checked, never to a second resolution.
r, code, err = None, 0, 'no address'
for fam, ip in addrs:
    req = urllib.request.Request(address_url(u, port, fam, ip, u.path, u.query),
                                 data=body.encode() if body else None, method=method)
    req.add_header('Host', u.netloc.rpartition('@')[2])
    if body:
        req.add_header('Content-Type', 'application/json')
    if auth:
        req.add_header('Authorization', 'Basic ' + base64.b64encode(auth.encode()).decode())
    try:
        r = opener.open(req, timeout=timeout)
        code = r.status
        break
    except urllib.error.HTTPError as e:
        r, code = e, e.code
        break
    except Redirected as e:
        refuse(str(e))
    except Exception as e:
        err = tls_refusal(e)
        if err:
            refuse(err)
        err = type(e).__name__ + ': ' + str(e)
if r is None:
    refuse(err)
sys.stdout.write('status=%d\n' % code)
sys.stdout.flush()
sys.stdout.buffer.write(r.read(1048576))
`

// patroniAPI is one member's REST API as pgtune calls it.
type patroniAPI struct {
	URL    string
	Auth   string // "user:password" or ""
	Owner  string // the cluster owner: the helper runs as them
	Member string // the member's name, for errors
	TLS    *facts.PatroniTLS
}

// call makes one request and returns the HTTP status and body; a request
// that got no HTTP answer (or was refused: an address not this host's, a
// redirect) is an error.
func (a patroniAPI) call(ctx context.Context, t *engine.Target, method, endpoint string, body any, timeout time.Duration) (int, []byte, error) {
	js := ""
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		js = string(b)
	}
	if a.Owner == "" {
		return 0, nil, fmt.Errorf("%s %s%s: the cluster owner is not known", method, a.URL, endpoint)
	}
	secs := strconv.FormatFloat(timeout.Seconds(), 'f', 0, 64)
	res, err := runAsOwner(ctx, t, &facts.Postgres{Owner: a.Owner}, []byte(a.Auth), patroniRESTCommand,
		patroniRESTScript, method, a.URL+endpoint, js, secs, a.Member, a.TLS.PyArg())
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s%s: %w", method, a.URL, endpoint, err)
	}
	head, rest, _ := strings.Cut(string(res.Stdout), "\n")
	code, perr := strconv.Atoi(strings.TrimPrefix(head, "status="))
	if perr != nil || !strings.HasPrefix(head, "status=") {
		return 0, nil, fmt.Errorf("%s %s%s: no answer (%s)", method, a.URL, endpoint, transport.ClipOutput(string(res.Stderr)))
	}
	if code == 0 {
		return 0, nil, fmt.Errorf("%s %s%s: %s", method, a.URL, endpoint, transport.ClipOutput(rest))
	}
	return code, []byte(rest), nil
}

// patroniRESTCommand runs the python helper ($1) with the request's
// arguments, isolated: runAsOwner has already done cd /.
const patroniRESTCommand = `exec python3 -I -c "$@"`

// patroniStatus is the part of GET /patroni pgtune waits on.
type patroniStatus struct {
	State          string `json:"state"`
	Role           string `json:"role"`
	PendingRestart bool   `json:"pending_restart"`
	Pause          bool   `json:"pause"`
	Timeline       int64  `json:"timeline"`
	Postmaster     string `json:"postmaster_start_time"`
	Replication    []struct {
		State string `json:"state"`
	} `json:"replication"`
}

func (a patroniAPI) status(ctx context.Context, t *engine.Target) (*patroniStatus, error) {
	code, b, err := a.call(ctx, t, "GET", "/patroni", nil, 5*time.Second)
	if err != nil {
		return nil, err
	}
	var st patroniStatus
	// GET /patroni answers 503 on a replica that is not running: the
	// body is still the member's state.
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("GET %s/patroni: HTTP %d, not Patroni's JSON", a.URL, code)
	}
	return &st, nil
}

// dcsParams reads GET /config (the cluster-wide configuration in the DCS)
// and returns its postgresql.parameters among the managed settings.
func (a patroniAPI) dcsParams(ctx context.Context, t *engine.Target) (map[string]string, error) {
	code, b, err := a.call(ctx, t, "GET", "/config", nil, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("GET %s/config: HTTP %d", a.URL, code)
	}
	var c struct {
		PostgreSQL struct {
			Parameters map[string]any `json:"parameters"`
		} `json:"postgresql"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("GET %s/config: not Patroni's JSON", a.URL)
	}
	out := map[string]string{}
	for k, v := range c.PostgreSQL.Parameters {
		for _, name := range managed {
			if asciiEqualFold(k, name) && v != nil {
				out[name] = fmt.Sprint(v)
			}
		}
	}
	return out, nil
}

// post makes a POST and fails unless Patroni answers 2xx; the error
// quotes its answer.
func (a patroniAPI) post(ctx context.Context, t *engine.Target, endpoint string, body any, timeout time.Duration) (string, error) {
	code, b, err := a.call(ctx, t, "POST", endpoint, body, timeout)
	if err != nil {
		return "", err
	}
	answer := strings.TrimSpace(string(b))
	if len(answer) > 300 {
		answer = answer[:300] + "…"
	}
	if code < 200 || code > 299 {
		return answer, fmt.Errorf("POST %s%s: HTTP %d: %s", a.URL, endpoint, code, answer)
	}
	return answer, nil
}
