package facts

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pgtune/pgtune/engine/transport"
)

// Topology is a running cluster's place in replication: what the server
// says about itself, and whether Patroni manages it.
type Topology struct {
	// Role is "primary" or "standby" (pg_is_in_recovery()), or
	// RoleStopped for a server that is not running, known by its
	// pg_control (system identifier, timeline) alone.
	Role string `json:"role"`
	// StoppedStandby is set on a stopped server whose pg_control or
	// signal files say it starts as a standby.
	StoppedStandby bool `json:"stopped_standby,omitempty"`
	// SystemID is pg_control_system()'s system_identifier: every member
	// of one replication cluster has the same.
	SystemID string `json:"system_identifier"`
	Timeline int64  `json:"timeline,omitempty"`
	// ClusterName is the cluster_name setting (Patroni sets its scope).
	ClusterName string `json:"cluster_name,omitempty"`
	// SocketDirs is the unix_socket_directories setting as the server
	// reports it: where a standby on its machine connects (walsend.go).
	SocketDirs string `json:"-"`
	// Upstream is where a standby streams from: "host:port" from
	// pg_stat_wal_receiver, else from primary_conninfo (only host and
	// port are ever read out of it: it may hold a password).
	Upstream string `json:"upstream,omitempty"`
	// Receiver is pg_stat_wal_receiver's status ("streaming"), empty when
	// no WAL receiver runs.
	Receiver string `json:"receiver,omitempty"`
	// ReplayLagBytes is, on a standby, the WAL received but not yet
	// replayed.
	ReplayLagBytes int64 `json:"replay_lag_bytes,omitempty"`
	// Standbys are the primary's (or a cascading standby's) WAL senders
	// to physical standbys (and to any client that cannot be told from
	// one: see classifyWALSender).
	Standbys []StandbyInfo `json:"standbys,omitempty"`
	// Clients are its WAL senders to clients that are no standby: WAL
	// archivers, base backups, logical decoding clients (at most
	// MaxWALClients; MoreClients counts the others). They are no members
	// of the cluster: a restart cuts them off, and they reconnect.
	Clients     []WALClient `json:"wal_clients,omitempty"`
	MoreClients int         `json:"more_wal_clients,omitempty"`
	// IdleSlots are, on a primary, its physical replication slots that
	// no one streams through (pg_replication_slots: not active, not
	// temporary; at most MaxIdleSlots, valid slot names only): each is a
	// standby that is not streaming, whether or not the run reaches it.
	IdleSlots []string `json:"idle_slots,omitempty"`
	// SlotName is, on a standby, the slot it streams through
	// (primary_slot_name): it tells its own idle slot from a missing
	// member's.
	SlotName string `json:"slot_name,omitempty"`
	// Patroni is set when Patroni manages this server.
	Patroni *Patroni `json:"patroni,omitempty"`
	// Settings are the server's own values of LiveSettings
	// (pg_settings), asked in the same query, so that a check does not
	// start psql and a backend twice. Not part of the facts' JSON: they
	// are as old as the gather, and only a dry-run check uses them.
	Settings map[string]string `json:"-"`
}

// LiveSettings are the server settings pgtune manages or sizes by, as
// pg_settings names them (huge_pages_status: PostgreSQL 17 on).
var LiveSettings = []string{"shared_buffers", "huge_pages", "huge_page_size", "huge_pages_status", "block_size", "shared_memory_size_in_huge_pages"}

// LiveSettingsSQL lists LiveSettings as name=setting rows.
var LiveSettingsSQL = `SELECT name || '=' || setting FROM pg_settings WHERE name IN ('` + strings.Join(LiveSettings, "', '") + `')`

// StandbyInfo is one row of pg_stat_replication.
type StandbyInfo struct {
	Name string `json:"name"` // application_name
	Addr string `json:"addr,omitempty"`
	// Port is the client's TCP port (client_port): with Addr, the
	// connection's end on the standby's machine; 0 when not asked, -1
	// for a unix socket.
	Port  int    `json:"port,omitempty"`
	State string `json:"state"`
	// PID is the WAL sender's process on the server's machine. For a
	// sender over a unix socket (Addr "local"), Peers are the inodes of
	// the other ends of the unix sockets it holds (the standby's WAL
	// receiver's, walsend.go), PeersRead whether they were read,
	// PeersNote why none could be (the controller's words).
	PID       int      `json:"pid,omitempty"`
	Peers     []uint64 `json:"peers,omitempty"`
	PeersRead bool     `json:"peers_read,omitempty"`
	PeersNote string   `json:"peers_note,omitempty"`
	// LagBytes is how far its replay is behind this server's WAL.
	LagBytes int64 `json:"lag_bytes"`
}

// WALClient is a WAL sender's client that is no standby, as
// pg_stat_replication and pg_replication_slots tell it: its name is the
// client's application_name, host input (checked and clipped: clientText).
type WALClient struct {
	Name  string `json:"name"`
	Addr  string `json:"addr,omitempty"`
	State string `json:"state"`
	Kind  string `json:"kind"` // ClientArchiver, ClientBaseBackup or ClientLogical
}

// The kinds of WAL clients.
const (
	// ClientArchiver streams WAL and reports where it wrote (and
	// flushed) it but never a replay position: pg_receivewal, Barman's
	// barman_receive_wal, pg_basebackup's WAL stream.
	ClientArchiver = "WAL archiver"
	// ClientBaseBackup is a base backup being taken (state 'backup':
	// pg_basebackup, Barman's backup_method: postgres).
	ClientBaseBackup = "base backup"
	// ClientLogical decodes through a logical slot (its WAL sender holds
	// it: active_pid): a subscription, pg_recvlogical, a change data
	// capture tool (Debezium). Its slot stays on this server: in
	// PostgreSQL 15 logical slots do not follow the primary role.
	ClientLogical = "logical decoding client"
)

// MaxWALClients bounds the WAL clients kept for a host (the others are
// only counted: MoreClients).
const MaxWALClients = 32

// String is `"name" (kind, from addr)`, for notes and messages.
func (c WALClient) String() string {
	name := strconv.Quote(c.Name)
	if c.Name == "" {
		name = "(no application_name)"
	}
	return fmt.Sprintf("%s (%s, from %s)", name, c.Kind, c.Addr)
}

// LogicalClients are the server's logical decoding clients.
func (t *Topology) LogicalClients() []WALClient {
	var out []WALClient
	if t == nil {
		return nil
	}
	for _, c := range t.Clients {
		if c.Kind == ClientLogical {
			out = append(out, c)
		}
	}
	return out
}

// Patroni is what says Patroni manages a server, and its view of it.
type Patroni struct {
	// Scope is Patroni's cluster name, Name this member's.
	Scope string `json:"scope"`
	Name  string `json:"name"`
	// PID is the Patroni process: the postmaster's parent.
	PID        int    `json:"pid"`
	ConfigFile string `json:"config_file,omitempty"`
	// APIURL is the member's REST API (restapi.connect_address).
	APIURL string `json:"api_url,omitempty"`
	// GeneratedConf says the server's postgresql.conf is the one Patroni
	// writes (and overwrites).
	GeneratedConf bool `json:"generated_conf"`
	// From the REST API (empty when it did not answer: APIError says why).
	Role           string          `json:"role,omitempty"`
	State          string          `json:"state,omitempty"`
	PendingRestart bool            `json:"pending_restart,omitempty"`
	Paused         bool            `json:"paused,omitempty"`
	Members        []PatroniMember `json:"members,omitempty"`
	APIError       string          `json:"api_error,omitempty"`
	// TLS is how the REST API's HTTPS is checked (nil over plain HTTP).
	TLS *PatroniTLS `json:"tls,omitempty"`
}

// PatroniMember is one member as Patroni's GET /cluster lists it.
type PatroniMember struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	State string `json:"state"`
	// Lag is the replica's lag in bytes as Patroni reports it (-1 unknown).
	Lag int64 `json:"lag"`
	// Host is where the member's PostgreSQL is reached (the host of
	// postgresql.connect_address, as the member registered it in the
	// DCS): on the primary's list it ties a standby's Patroni name to an
	// address the controller knows it by (topology's tiePatroni). The
	// port is not read: a standby's own port is its word, no tie, and
	// connect_address often names another (a NAT, a container's mapping).
	Host string `json:"host,omitempty"`
}

// IsPrimary reports whether the server is its cluster's primary.
func (t *Topology) IsPrimary() bool { return t != nil && t.Role == "primary" }

// RoleStopped is the role of a server that is not running: its cluster
// is known from pg_control, its place in replication is not.
const RoleStopped = "stopped"

// IsStopped reports whether the server was not running.
func (t *Topology) IsStopped() bool { return t != nil && t.Role == RoleStopped }

// topologySQL prints key=value records (psql -0 ends each with a NUL);
// the settings rows are setting=name=value.
// A standby's receive position starts, after a restart, where its WAL
// receiver began streaming, which can be behind what it already replayed
// from its own pg_wal: no lag then (0), not a negative one, until new WAL
// arrives (on an idle cluster, never).
// Every WAL sender is read with the slot it holds (if any): a standby
// replays and says where (replay_lsn), a WAL archiver writes but never
// replays, a base backup is in state 'backup', a logical decoding client
// holds a logical slot (classifyWALSender); logical clients come first,
// so that the bound on clients (MaxWALClients) never drops one.
// Idle physical slots are asked of a primary only (a standby's may be
// copies of its primary's, kept by Patroni): a slot no one streams
// through is a standby that is down, unreachable or gone, seen from the
// one member the run does reach. Asked in this query: no other process.
var topologySQL = `SELECT 'role=' || CASE WHEN pg_is_in_recovery() THEN 'standby' ELSE 'primary' END
UNION ALL SELECT 'sysid=' || system_identifier FROM pg_control_system()
UNION ALL SELECT 'timeline=' || timeline_id FROM pg_control_checkpoint()
UNION ALL SELECT 'cluster_name=' || current_setting('cluster_name')
UNION ALL SELECT 'socket_dirs=' || current_setting('unix_socket_directories')
UNION ALL SELECT 'conninfo=' || current_setting('primary_conninfo')
UNION ALL SELECT 'receiver=' || status || ' ' || coalesce(sender_host, '') || ' ' || coalesce(sender_port::text, '') FROM pg_stat_wal_receiver
UNION ALL SELECT 'replay_lag=' || greatest(coalesce(pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())::bigint, 0), 0) WHERE pg_is_in_recovery()
UNION ALL (SELECT 'walsender=' || coalesce(pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END, r.replay_lsn)::bigint, -1)
  || ' ' || coalesce(r.state, '') || ' ' || coalesce(host(r.client_addr), 'local') || ' ' || coalesce(r.client_port, -1) || ' ' || r.pid || ' ' || (r.write_lsn IS NOT NULL) || ' ' || (r.replay_lsn IS NOT NULL)
  || ' ' || coalesce(s.slot_type, 'none') || ' ' || r.application_name
  FROM pg_stat_replication r LEFT JOIN pg_replication_slots s ON s.active_pid = r.pid ORDER BY s.slot_type = 'logical' DESC NULLS LAST, r.pid)
UNION ALL SELECT 'slot_name=' || current_setting('primary_slot_name') WHERE pg_is_in_recovery()
UNION ALL (SELECT 'idle_slot=' || slot_name::text FROM pg_replication_slots
  WHERE slot_type = 'physical' AND NOT active AND NOT temporary AND NOT pg_is_in_recovery() ORDER BY slot_name LIMIT ` + strconv.Itoa(MaxIdleSlots) + `)
UNION ALL SELECT 'setting=' || r FROM (` + LiveSettingsSQL + `) AS s(r)`

// MaxIdleSlots bounds the idle slots a host may report (the query asks
// no more; the parser keeps no more).
const MaxIdleSlots = 32

// PsqlConnect is how every query pgtune asks a running server starts
// psql (shell words, to follow "$psql"): no .psqlrc (-X), never a
// password prompt (-w: on the operator's terminal, for a server the owner
// runs), the postgres database, and at most 10 s to connect
// (connect_timeout, authentication included): a server that accepts the
// connection but never answers it (stopped, say) fails the query then,
// not at the host's --timeout.
const PsqlConnect = `-X -w -d 'dbname=postgres connect_timeout=10'`

// topologyScript runs as the cluster owner (ownerRunScript). It prints
// NUL-ended records: first the postmaster's parent (Patroni, when it
// manages the server) and, when that parent looks like Patroni, the
// config file its command line names, in base64; then the head of
// postgresql.conf, a conf_line record per line; then the server's answers
// to topologySQL.
//
//	$1 psql  $2 socket dir  $3 port  $4 postmaster pid  $5 config file  $6 SQL
const topologyScript = `export LC_ALL=C
psql=$1 sock=$2 port=$3 pm=$4 conf=$5 sql=$6
cd /
rec() { printf '%s=%s\0' "$1" "$2"; }
# A process of ours: its /proc directory is ours (test -O, a stat; reading
# every process's status took the shell a syscall per byte).
for pd in /proc/[0-9]*; do
  [ -O "$pd" ] || continue
  p=${pd#/proc/}
  # This shell is no Patroni (its arguments were a tr per run).
  [ "$p" != "$$" ] || continue
  c=
  read -r c 2>/dev/null < "/proc/$p/comm" || continue
  case $c in postgres|postmaster) continue;; esac
  n=0 isp= last=
  while IFS= read -r a; do
    n=$((n+1))
    if [ $n -le 2 ] && [ "${a##*/}" = patroni ]; then isp=1; fi
    last=$a
  done <<ARGS
$(tr '\0' '\n' 2>/dev/null < "/proc/$p/cmdline")
ARGS
  [ -n "$isp" ] || continue
  rec patroni_pid "$p"
  rec pconf_path "$last"
  case $last in /*) rec pconf "$(head -c 262144 -- "$last" 2>/dev/null | base64 -w0)";; esac
done
# The head of postgresql.conf (512 bytes): its lines, a record each (no
# base64: the shell's read drops NULs, so no line can end its record
# early).
while IFS= read -r l; do rec conf_line "$l"; done <<HEAD
$(head -c 512 -- "$conf" 2>/dev/null)
HEAD
set -- "$psql" ` + PsqlConnect + ` -A -t -q -0 -v ON_ERROR_STOP=1 -c "$sql"
if [ -n "$sock" ]; then set -- "$@" -h "$sock"; fi
if [ -n "$port" ] && [ "$port" != 0 ]; then set -- "$@" -p "$port"; fi
exec "$@"
`

// ownerRunScript runs the script $2 as the cluster owner $1 (we are the
// owner, or root through runuser, or sudo -n -u), with the arguments after
// it; each branch ends the script (exec; sw_owner with sw_exec=exec).
// Nothing found on the host runs as root.
// Who we are and the owner's uid come from rh_ids (SwitchOwnerFn).
var ownerRunScript = `owner=$1 script=$2
shift 2
cd /
` + SwitchOwnerFn + `rh_ids
if [ -n "$rh_uid" ] && [ "$rh_me" = "$rh_uid" ]; then exec sh -c "$script" sh "$@"
elif [ "$rh_me" = 0 ] && command -v runuser >/dev/null 2>&1; then sw_exec=exec; sw_owner sh -c "$script" sh "$@"
else exec sudo -n -u "$owner" -- sh -c "$script" sh "$@"; fi
`

// patroniGetScript fetches Patroni's GET /patroni and GET /cluster from
// the member's REST API ($2, a URL built by pgtune from the member's
// patroni.yml: the host's input), as the cluster owner, with the python
// helper $1 run isolated (python3 -I: no cwd, user site or PYTHON* on
// sys.path) with the TLS settings $3 (PatroniTLS.PyArg), each answer on
// one line in base64 (empty when it failed).
const patroniGetScript = `export LC_ALL=C
exec python3 -I -c "$1" "$2" "$3"`

// patroniGetPy is the helper: it asks only this host's own API (every
// address the URL names is loopback or binds locally; else one line
// refused=<base64 reason> and nothing is sent), connects to the addresses
// it checked, follows no redirect and uses no proxy. Over HTTPS a
// certificate that does not check out is refused, with the reason.
const patroniGetPy = `def out(k, b):
    sys.stdout.write(k + '=' + base64.b64encode(b).decode() + '\n')
def refuse(msg):
    out('refused', msg.encode())
    sys.exit(0)
who = ''
` + PatroniLocalPy + `u, host, port, addrs = local_addresses(sys.argv[1])
opener = make_opener(json.loads(sys.argv[2]), host)
def get(path):
    for fam, ip in addrs:
        req = urllib.request.Request(address_url(u, port, fam, ip, path, ''))
        req.add_header('Host', u.netloc.rpartition('@')[2])
        try:
            return opener.open(req, timeout=5).read(1048576)
        except urllib.error.HTTPError as e:
            return e.read(1048576)
        except Redirected:
            return b''
        except Exception as e:
            why = tls_refusal(e)
            if why:
                refuse(why)
    return b''
out('patroni', get('/patroni'))
out('cluster', get('/cluster'))
`

// GatherTopology asks a running server where it stands in replication, as
// the cluster owner over its unix socket, and whether Patroni manages it
// (the postmaster's parent is a Patroni process; its config file names
// the REST API, which is then asked for its view). A nil Postgres or a
// stopped one has no topology: (nil, nil).
func GatherTopology(ctx context.Context, t transport.Transport, become bool, pg *Postgres) (*Topology, error) {
	if pg == nil || pg.Owner == "" {
		return nil, nil
	}
	if !pg.Running {
		return stoppedTopology(ctx, t, become, pg), nil
	}
	args := topologyArgs(pg.Owner, path.Join(pg.BinDir, "psql"), pg.SocketDir, strconv.Itoa(pg.Port), strconv.Itoa(pg.PID), pg.ConfigFile)
	res, err := t.Run(ctx, transport.Command{Args: args, Become: become})
	if err != nil {
		return nil, fmt.Errorf("replication topology: %w", err)
	}
	topo, pat, err := parseTopology(res.Stdout, pg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("replication topology: %w", err)
	}
	readSenderPeers(ctx, t, become, pg, topo)
	if pat != nil {
		topo.Patroni = pat
		if pat.APIURL != "" {
			askPatroni(ctx, t, become, pg.Owner, pat)
		}
	}
	return topo, nil
}

// topologyArgs is the command that asks a running server its topology
// (GatherTopology; the gather runs it ahead with placeholders, prerun.go).
func topologyArgs(owner, psql, sock, port, pid, conf string) []string {
	return OwnerRunArgs(owner, topologyScript, psql, sock, port, pid, conf, topologySQL)
}

// controldataScript prints pg_control, as the owner: $1 bin dir, $2 data
// directory.
const controldataScript = `LC_ALL=C "$1/pg_controldata" -D "$2" || exit
if [ -e "$2/standby.signal" ] || [ -e "$2/recovery.signal" ]; then echo 'pgtune recovery signal: present'; fi`

// stoppedTopology is what a stopped server's pg_control says of its
// cluster: its system identifier and timeline, so that a member that is
// down still counts in its cluster (a rollout must not take the primary
// down while a standby is down). Nil when pg_control cannot be read.
func stoppedTopology(ctx context.Context, t transport.Transport, become bool, pg *Postgres) *Topology {
	if pg.BinDir == "" || pg.DataDir == "" {
		return nil
	}
	res, err := t.Run(ctx, transport.Command{Args: []string{"sh", "-c", ownerRunScript, "sh", pg.Owner, controldataScript, pg.BinDir, pg.DataDir}, Become: become})
	if err != nil {
		return nil
	}
	return parseStoppedTopology(string(res.Stdout))
}

func parseStoppedTopology(out string) *Topology {
	topo := &Topology{Role: RoleStopped}
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		switch v = strings.TrimSpace(v); strings.TrimSpace(k) {
		case "Database system identifier":
			if _, err := ParseInt("system identifier", v, 1, 1<<63-1); err == nil {
				topo.SystemID = v
			}
		case "Database cluster state":
			// A server shut down (or crashed) out of recovery was a
			// primary; one in recovery, or with a signal file that
			// starts it as one, is a standby.
			if v != "shut down" && v != "in production" {
				topo.StoppedStandby = true
			}
		case "pgtune recovery signal":
			topo.StoppedStandby = true
		case "Latest checkpoint's TimeLineID":
			if tl, err := ParseInt("timeline", v, 1, 1<<32); err == nil {
				topo.Timeline = tl
			}
		}
	}
	if topo.SystemID == "" {
		return nil
	}
	return topo
}

// patroniCandidate is a Patroni process of the cluster owner and its
// config file.
type patroniCandidate struct {
	pid, path, conf string
}

// parseTopology reads topologyScript's records; dataDir is the server's,
// to tell which Patroni process (if any) manages it.
func parseTopology(out []byte, dataDir string) (*Topology, *Patroni, error) {
	topo := &Topology{}
	var cands []patroniCandidate
	kv := map[string]string{}
	confHead := "" // the first lines of postgresql.conf
	for _, rec := range strings.Split(string(out), "\x00") {
		rec = strings.Clone(rec) // kept values pin their record, not the whole output
		k, v, ok := strings.Cut(strings.Trim(rec, "\n"), "=")
		if !ok {
			continue
		}
		switch k {
		case "patroni_pid":
			cands = append(cands, patroniCandidate{pid: v})
		case "pconf_path", "pconf":
			if len(cands) == 0 {
				continue
			}
			c := &cands[len(cands)-1]
			if k == "pconf" {
				c.conf = v
			} else {
				c.path = v
			}
		case "setting":
			name, val, ok := strings.Cut(v, "=")
			if ok && slices.Contains(LiveSettings, name) {
				if topo.Settings == nil {
					topo.Settings = map[string]string{}
				}
				topo.Settings[name] = val
			}
		case "conf_line":
			confHead += v + "\n"
		case "idle_slot":
			if ValidSlotName(v) && len(topo.IdleSlots) < MaxIdleSlots && !slices.Contains(topo.IdleSlots, v) {
				topo.IdleSlots = append(topo.IdleSlots, v)
			}
		case "walsender":
			s, c, err := parseWALSender(v)
			switch {
			case err != nil:
				return nil, nil, err
			case c == nil:
				topo.Standbys = append(topo.Standbys, s)
			case len(topo.Clients) < MaxWALClients:
				topo.Clients = append(topo.Clients, *c)
			default:
				topo.MoreClients++
			}
		default:
			if _, dup := kv[k]; !dup {
				kv[k] = v
			}
		}
	}
	switch kv["role"] {
	case "primary", "standby":
		topo.Role = kv["role"]
	default:
		return nil, nil, fmt.Errorf("the server did not say whether it is in recovery")
	}
	if _, err := ParseInt("system identifier", kv["sysid"], 1, 1<<63-1); err != nil {
		return nil, nil, err
	}
	topo.SystemID = kv["sysid"]
	if tl, err := ParseInt("timeline", kv["timeline"], 1, 1<<32); err == nil {
		topo.Timeline = tl
	}
	topo.ClusterName = kv["cluster_name"]
	topo.SocketDirs = kv["socket_dirs"]
	if topo.Role == "standby" && ValidSlotName(kv["slot_name"]) {
		topo.SlotName = kv["slot_name"]
	}
	if topo.Role != "primary" {
		topo.IdleSlots = nil // a standby's slots may be copies (Patroni): a primary's only
	}
	if topo.Role == "standby" {
		if err := topo.readUpstream(kv["receiver"], kv["conninfo"], kv["replay_lag"]); err != nil {
			return nil, nil, err
		}
	}
	return topo, detectPatroni(strings.Contains(confHead, generatedMarker), cands, dataDir), nil
}

// readUpstream fills a standby's upstream, receiver status and lag.
func (t *Topology) readUpstream(receiver, conninfo, lag string) error {
	if receiver != "" {
		f := strings.Fields(receiver)
		t.Receiver = f[0]
		if len(f) == 3 {
			t.Upstream = net.JoinHostPort(f[1], f[2])
		}
	}
	if t.Upstream == "" {
		if host, port := conninfoAddr(conninfo); host != "" {
			t.Upstream = net.JoinHostPort(host, port)
		}
	}
	if lag != "" {
		n, err := ParseInt("replay lag (bytes)", lag, 0, MaxBytes)
		if err != nil {
			return err
		}
		t.ReplayLagBytes = n
	}
	return nil
}

// ValidSlotName reports whether s is a name PostgreSQL allows for a
// replication slot (lower-case letters, digits and underscores, at most
// NAMEDATALEN-1 bytes): anything else did not come from pg_replication_slots.
func ValidSlotName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' {
			return false
		}
	}
	return true
}

// parseWALSender reads "LAG STATE ADDR PORT PID WRITES REPLAYS
// SLOTTYPE NAME" (NAME may hold spaces): a standby, or (non-nil) a client
// that is none.
func parseWALSender(v string) (StandbyInfo, *WALClient, error) {
	f := strings.SplitN(v, " ", 9)
	if len(f) != 9 {
		return StandbyInfo{}, nil, fmt.Errorf("pg_stat_replication row: %d fields", len(f))
	}
	lag, err := ParseInt("standby lag (bytes)", f[0], -1, MaxBytes)
	if err != nil {
		return StandbyInfo{}, nil, err
	}
	port, err := ParseInt("client_port", f[3], -1, 65535)
	if err != nil {
		return StandbyInfo{}, nil, err
	}
	pid, err := ParseInt("WAL sender pid", f[4], 1, MaxPID)
	if err != nil {
		return StandbyInfo{}, nil, err
	}
	state, addr, name := clientText(f[1], 16), clientAddr(f[2]), clientText(f[8], maxClientName)
	kind := classifyWALSender(state, f[5] == "true", f[6] == "true", f[7])
	if kind == "" {
		if port == 0 {
			port = -1 // no TCP port PostgreSQL reports: never a tie
		}
		return StandbyInfo{LagBytes: lag, State: state, Addr: addr, Port: int(port), PID: int(pid), Name: name}, nil, nil
	}
	return StandbyInfo{}, &WALClient{Name: name, Addr: addr, State: state, Kind: kind}, nil
}

// classifyWALSender tells what a WAL sender's client is from what
// PostgreSQL reports of it: "" for a physical standby, else the kind of
// client. A client that holds a logical slot decodes; one in state
// 'backup' takes a base backup; one that reports a write position but no
// replay position archives WAL (a standby's WAL receiver always reports
// its replay). A client that reports nothing yet (just connected, or a
// standby with wal_receiver_status_interval = 0) cannot be told from a
// standby, and counts as one: it holds its cluster as a standby does.
func classifyWALSender(state string, writes, replays bool, slotType string) string {
	switch {
	case slotType == "logical":
		return ClientLogical
	case state == "backup":
		return ClientBaseBackup
	case writes && !replays:
		return ClientArchiver
	}
	return ""
}

// maxClientName is the longest application_name PostgreSQL keeps
// (NAMEDATALEN-1 bytes).
const maxClientName = 63

// clientText is text a host reports of a WAL sender's client
// (application_name, state), as PostgreSQL itself keeps an
// application_name: printable ASCII only (anything else a '?'), at most
// max bytes.
func clientText(s string, max int) string {
	if len(s) > max {
		s = s[:max]
	}
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	return string(b)
}

// clientAddr is a client's address: an IP address, or "local" (a unix
// socket); anything else is no address PostgreSQL reports ("?").
func clientAddr(s string) string {
	if s == "local" || net.ParseIP(s) != nil {
		return s
	}
	return "?"
}

// conninfoAddr reads host (or hostaddr) and port out of a libpq
// connection string, keyword form or URI, and nothing else: the password
// in it is never read out. The port defaults to 5432.
func conninfoAddr(s string) (host, port string) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "postgresql://") || strings.HasPrefix(s, "postgres://") {
		rest := s[strings.Index(s, "://")+3:]
		if i := strings.IndexAny(rest, "/?"); i >= 0 {
			rest = rest[:i]
		}
		if i := strings.LastIndexByte(rest, '@'); i >= 0 {
			rest = rest[i+1:] // user:password@ dropped
		}
		rest, _, _ = strings.Cut(rest, ",")
		if h, p, err := net.SplitHostPort(rest); err == nil {
			return h, p
		}
		return rest, "5432"
	}
	kv := conninfoPairs(s)
	host, port = kv["host"], kv["port"]
	if host == "" {
		host = kv["hostaddr"]
	}
	host, _, _ = strings.Cut(host, ",")
	port, _, _ = strings.Cut(port, ",")
	if port == "" {
		port = "5432"
	}
	return host, port
}

// conninfoPairs parses libpq's keyword = value form (values quoted with
// single quotes, backslash escapes), keeping only host, hostaddr and port.
func conninfoPairs(s string) map[string]string {
	out := map[string]string{}
	i := 0
	for i < len(s) {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n') {
			i++
		}
		j := i
		for j < len(s) && s[j] != '=' && s[j] != ' ' {
			j++
		}
		key := s[i:j]
		for j < len(s) && s[j] == ' ' {
			j++
		}
		if j >= len(s) || s[j] != '=' {
			return out
		}
		j++
		for j < len(s) && s[j] == ' ' {
			j++
		}
		var val strings.Builder
		if j < len(s) && s[j] == '\'' {
			j++
			for j < len(s) && s[j] != '\'' {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				val.WriteByte(s[j])
				j++
			}
			j++
		} else {
			for j < len(s) && s[j] != ' ' && s[j] != '\t' {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				val.WriteByte(s[j])
				j++
			}
		}
		switch key {
		case "host", "hostaddr", "port":
			out[key] = val.String()
		}
		i = j
	}
	return out
}

// generatedMarker is in the first lines of the postgresql.conf Patroni
// writes ("Do not edit this file manually! It will be overwritten by
// Patroni!").
const generatedMarker = "overwritten by Patroni"

// detectPatroni decides whether Patroni manages the server in dataDir:
// a Patroni process of the owner whose config file names that data
// directory (Patroni detaches the postmaster it starts, so the postmaster
// is not its child), or a postgresql.conf that says Patroni writes it.
func detectPatroni(generated bool, cands []patroniCandidate, dataDir string) *Patroni {
	var errs []string
	for _, c := range cands {
		p := &Patroni{GeneratedConf: generated, ConfigFile: c.path}
		pid, err := ParseInt("patroni pid", c.pid, 2, MaxPID)
		if err != nil {
			continue
		}
		p.PID = int(pid)
		conf, err := base64.StdEncoding.DecodeString(c.conf)
		if err != nil || len(conf) == 0 {
			errs = append(errs, fmt.Sprintf("patroni pid %d: config file %s not readable", pid, strconv.Quote(c.path)))
			continue
		}
		managed, err := p.readConfig(conf, dataDir)
		if !managed {
			continue
		}
		if err != nil {
			p.APIError = err.Error()
		}
		return p
	}
	if !generated {
		return nil
	}
	p := &Patroni{GeneratedConf: true, APIError: "postgresql.conf says Patroni writes it, but no Patroni process of the cluster owner names this data directory"}
	if len(errs) > 0 {
		p.APIError += " (" + strings.Join(errs, "; ") + ")"
	}
	return p
}

// patroniConfig is the part of patroni.yml pgtune reads: never the
// authentication sections.
type patroniConfig struct {
	Scope      string `yaml:"scope"`
	Name       string `yaml:"name"`
	PostgreSQL struct {
		DataDir string `yaml:"data_dir"`
	} `yaml:"postgresql"`
	RestAPI struct {
		Listen          string `yaml:"listen"`
		ConnectAddress  string `yaml:"connect_address"`
		CertFile        string `yaml:"certfile"`
		KeyFile         string `yaml:"keyfile"`
		KeyFilePassword string `yaml:"keyfile_password"`
		CAFile          string `yaml:"cafile"`
		VerifyClient    string `yaml:"verify_client"`
	} `yaml:"restapi"`
	Ctl struct {
		Insecure        any    `yaml:"insecure"`
		CACert          string `yaml:"cacert"`
		CertFile        string `yaml:"certfile"`
		KeyFile         string `yaml:"keyfile"`
		KeyFilePassword string `yaml:"keyfile_password"`
	} `yaml:"ctl"`
}

// readConfig reads a Patroni config file: whether it manages dataDir, and
// then its scope, name and REST API address.
func (p *Patroni) readConfig(b []byte, dataDir string) (bool, error) {
	var c patroniConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		return false, nil // not a config file pgtune can read: not this server's
	}
	if !samePath(c.PostgreSQL.DataDir, dataDir) {
		return false, nil
	}
	p.Scope, p.Name = c.Scope, c.Name
	return true, p.readAPI(c)
}

func (p *Patroni) readAPI(c patroniConfig) error {
	addr := c.RestAPI.ConnectAddress
	if addr == "" {
		addr = c.RestAPI.Listen
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("patroni config %s: restapi address %s: %v", strconv.Quote(p.ConfigFile), strconv.Quote(addr), err)
	}
	if _, err := ParseInt("patroni restapi port", port, 1, 65535); err != nil {
		return err
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	if strings.ContainsAny(host, "/?#@ \t\n") {
		return fmt.Errorf("patroni config %s: restapi host %s is not a host name", strconv.Quote(p.ConfigFile), strconv.Quote(host))
	}
	scheme := "http"
	if c.RestAPI.CertFile != "" {
		scheme = "https"
		tls, err := restAPITLS(c)
		if err != nil {
			return fmt.Errorf("patroni config %s: %w", strconv.Quote(p.ConfigFile), err)
		}
		p.TLS = tls
	}
	p.APIURL = scheme + "://" + net.JoinHostPort(host, port)
	return nil
}

// askPatroni reads the member's and the cluster's state from the REST API
// on the host itself (it usually listens on loopback only), as the owner.
// A failure is recorded in APIError: Patroni still manages the server.
func askPatroni(ctx context.Context, t transport.Transport, become bool, owner string, p *Patroni) {
	args := []string{"sh", "-c", ownerRunScript, "sh", owner, patroniGetScript, patroniGetPy, p.APIURL, p.TLS.PyArg()}
	res, err := t.Run(ctx, transport.Command{Args: args, Become: become})
	if err != nil {
		p.APIError = fmt.Sprintf("GET %s/patroni: %v", p.APIURL, err)
		return
	}
	answers := map[string][]byte{}
	for _, l := range strings.Split(string(res.Stdout), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			answers[k], _ = base64.StdEncoding.DecodeString(v)
		}
	}
	if why, ok := answers["refused"]; ok {
		p.APIError = fmt.Sprintf("patroni member %s: %s", strconv.Quote(p.Name), why)
		return
	}
	if err := p.readStatus(answers["patroni"]); err != nil {
		p.APIError = fmt.Sprintf("GET %s/patroni: %v", p.APIURL, err)
		return
	}
	if err := p.readMembers(answers["cluster"]); err != nil {
		p.APIError = fmt.Sprintf("GET %s/cluster: %v", p.APIURL, err)
	}
}

// readStatus reads GET /patroni.
func (p *Patroni) readStatus(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("no answer")
	}
	var st struct {
		State          string `json:"state"`
		Role           string `json:"role"`
		PendingRestart bool   `json:"pending_restart"`
		Pause          bool   `json:"pause"`
		Patroni        struct {
			Scope string `json:"scope"`
			Name  string `json:"name"`
		} `json:"patroni"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("not Patroni's JSON: %v", err)
	}
	p.State, p.Role, p.PendingRestart, p.Paused = st.State, st.Role, st.PendingRestart, st.Pause
	if st.Patroni.Scope != "" {
		p.Scope = st.Patroni.Scope
	}
	if st.Patroni.Name != "" {
		p.Name = st.Patroni.Name
	}
	return nil
}

// readMembers reads GET /cluster.
func (p *Patroni) readMembers(b []byte) error {
	if len(b) == 0 {
		return fmt.Errorf("no answer")
	}
	var c struct {
		Members []struct {
			Name  string          `json:"name"`
			Role  string          `json:"role"`
			State string          `json:"state"`
			Lag   json.RawMessage `json:"lag"`
			Host  string          `json:"host"`
		} `json:"members"`
		Pause bool `json:"pause"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("not Patroni's JSON: %v", err)
	}
	p.Members = nil
	for _, m := range c.Members {
		lag := int64(-1)
		if n, err := ParseInt("patroni member lag", string(m.Lag), 0, MaxBytes); err == nil {
			lag = n
		}
		p.Members = append(p.Members, PatroniMember{Name: m.Name, Role: m.Role, State: m.State, Lag: lag, Host: m.Host})
	}
	p.Paused = p.Paused || c.Pause
	return nil
}
