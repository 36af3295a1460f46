package facts

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pgtune/pgtune/engine/transport"
)

// A WAL sender whose client came over a unix socket (client_addr empty)
// has no address or port to tie it to a standby: any server on the
// primary's machine could claim it. What ties it is the socket pair: the
// sender holds one end, the standby's WAL receiver the other, and the
// kernel knows both (sock_diag, listed by ss from iproute2). The
// primary's side is read here, as the cluster owner (its own processes),
// in a round trip of its own that only a primary with such a sender
// spends: for each sender PID the query named, the peer inode of each
// unix socket it holds. The standby's side is the socket inodes its WAL
// receiver holds, read as root with its connections (walRecvAwk); a
// claimant is the sender's when it holds the peer (topology.sameConn).
//
// ss prints a socket's path as it is, newlines included, and any user
// can bind a socket at a path of their choice: a line of its output can
// be forged. So ss is asked only for the sockets named as the server's
// own socket files (an accepted connection bears its listener's name;
// ss's src filter, which matches case-insensitively but no wildcard
// here): one in each of unix_socket_directories (postmaster.pid's when
// the server did not say), each given only when it holds nothing but
// letters, digits and / . _ - after its leading / or @ (an abstract
// name): no space, which ss's filter cannot take, no glob character. A
// name that must equal one holds no newline, so no line can be forged;
// a sender's socket still counts only when exactly one line ends with
// its inode, the peer's name and the peer's inode.

// MaxSenderPeers bounds the socket peers kept for one WAL sender (it
// holds one socket).
const MaxSenderPeers = 4

// senderPeersAwk prints "ok" (" noss": ss could not be run; " path": a
// socket path cannot be given to ss), then "PID PEER..." for each of
// pids (awk -v pm=POSTMASTER -v sock="PATH..." -v pids="PID ..."), a WAL
// sender of pm: a child of pm titled walsender (PostgreSQL 10: wal
// sender), pm being in the pid namespace of this /proc (its NSpid one
// number: the pids the server reports are then this /proc's). Nothing
// when pm is not that.
const senderPeersAwk = `
function num(s) { return s ~ /^[1-9][0-9]*$/ && length(s) <= 10 }
BEGIN {
  if (!num(pm)) exit
  f = "/proc/" pm "/status"; ns = 0
  while ((getline l < f) > 0) if (l ~ /^NSpid:/) ns = split(l, a, /[ \t]+/) - 1
  close(f)
  if (ns != 1) exit
  n = split(pids, p, " "); args = ""
  for (i = 1; i <= n; i++) {
    k = p[i]
    if (!num(k) || (k in want)) continue
    f = "/proc/" k "/stat"; l = ""
    getline l < f; close(f)
    j = 0; for (x = length(l); x > 0; x--) if (substr(l, x, 1) == ")") { j = x; break }
    if (!j || split(substr(l, j + 2), a, " ") < 2 || a[2] != pm) continue
    f = "/proc/" k "/cmdline"; t = ""
    getline t < f; close(f)
    if (!index(t, "walsender") && !index(t, "wal sender")) continue
    want[k] = 1; args = args " /proc/" k "/fd"
  }
  out = "ok"
  if (args != "") {
    cmd = "exec find" args " -maxdepth 1 -lname \"socket:\\[*\" -printf \"%h %l\\n\" 2>/dev/null"
    while ((cmd | getline l) > 0) {
      if (split(l, a, " ") != 2 || a[2] !~ /^socket:\[[0-9]+\]$/) continue
      k = substr(a[1], 7, length(a[1]) - 9); s = substr(a[2], 9, length(a[2]) - 9)
      if (k in want) { held[s] = k; m++ }
    }
    close(cmd)
  }
  flt = ""
  n = split(sock, sp, " ")
  for (i = 1; i <= n; i++) {
    if (sp[i] !~ /^[\/@][A-Za-z0-9\/._-]+$/) { bad = 1; continue }
    flt = flt (flt == "" ? "" : " or") " src " sp[i]
  }
  if (m && bad) out = out " path"
  if (m && flt != "") {
    cmd = "if command -v ss >/dev/null 2>&1; then exec ss -x \\(" flt " \\) 2>/dev/null; else echo pgtune:noss; fi"
    while ((cmd | getline l) > 0) {
      if (l == "pgtune:noss") { out = out " noss"; continue }
      nf = split(l, a, " ")
      if (nf < 3 || !((a[nf - 2]) in held) || a[nf] !~ /^[0-9]+$/) continue
      s = a[nf - 2]; seen[s]++; peer[s] = a[nf]
    }
    close(cmd)
  }
  print out
  for (k in want) {
    l = k
    for (s in held) if (held[s] == k && seen[s] == 1 && peer[s] != "0") l = l " " peer[s]
    print l
  }
}
`

// senderPeersScript runs senderPeersAwk: $1 the postmaster's PID, $2
// its socket files, the sender PIDs after them. ss is in /usr/sbin where
// /usr is not merged, off a user's PATH.
const senderPeersScript = `export LC_ALL=C PATH="$PATH:/usr/sbin:/sbin"
pm=$1 sock=$2
shift 2
exec awk -v pm="$pm" -v sock="$sock" -v pids="$*" '` + senderPeersAwk + `' </dev/null`

// readSenderPeers fills the socket peers of topo's standby senders over a
// unix socket (StandbyInfo.Peers, PeersRead), read as pg's owner; it
// spends no round trip when there is none. A failed read leaves them
// unread: such a sender then ties to no claimant (topology).
func readSenderPeers(ctx context.Context, t transport.Transport, become bool, pg *Postgres, topo *Topology) {
	var local []int // the senders over a unix socket, by index
	var pids []string
	for i, r := range topo.Standbys {
		if r.Addr == "local" && r.PID > 0 {
			local = append(local, i)
			pids = append(pids, strconv.Itoa(r.PID))
		}
	}
	socks := socketFiles(topo.SocketDirs, pg.SocketDir, pg.Port)
	if len(pids) == 0 || pg.PID <= 0 || len(socks) == 0 {
		return
	}
	args := OwnerRunArgs(pg.Owner, senderPeersScript, append([]string{strconv.Itoa(pg.PID), strings.Join(socks, " ")}, pids...)...)
	res, err := t.Run(ctx, transport.Command{Args: args, Become: become})
	if err != nil {
		return
	}
	peers, note, ok := parseSenderPeers(string(res.Stdout))
	if !ok {
		return
	}
	switch note {
	case "noss":
		note = "its upstream's machine has no ss (iproute2) to list the other end of that WAL sender's unix socket: install it there to tie the sender"
	case "path":
		note = fmt.Sprintf("its upstream's socket files %q hold a path ss cannot be asked for (a space or a character other than letters, digits and / . _ -): a standby connecting through it is not tied", strings.Join(socks, " "))
	}
	for _, i := range local {
		r := topo.Standbys[i]
		p, ok := peers[r.PID]
		topo.Standbys[i].PeersRead = true
		topo.Standbys[i].Peers = p
		topo.Standbys[i].PeersNote = note
		if !ok {
			topo.Standbys[i].PeersNote = fmt.Sprintf("its upstream's WAL sender %d was, when read, no child of its postmaster titled walsender (it ended since, or the server runs in a PID namespace of its own)", r.PID)
		}
	}
}

// socketFiles are the server's socket files: one in each of dirs (its
// unix_socket_directories, comma-separated, each maybe double-quoted),
// else in pidDir (postmaster.pid's), for its port. A path with a space
// is passed on as one ss cannot take (senderPeersAwk says so).
func socketFiles(dirs, pidDir string, port int) []string {
	if port <= 0 {
		return nil
	}
	var list []string
	for _, d := range strings.Split(dirs, ",") {
		d = strings.TrimSpace(d)
		if len(d) >= 2 && d[0] == '"' && d[len(d)-1] == '"' {
			d = d[1 : len(d)-1]
		}
		if d != "" {
			list = append(list, d)
		}
	}
	if len(list) == 0 && pidDir != "" {
		list = []string{pidDir}
	}
	var out []string
	for _, d := range list {
		f := strings.TrimRight(d, "/") + "/.s.PGSQL." + strconv.Itoa(port)
		if strings.ContainsAny(f, " \t\n") {
			f = "-" // not asked, said
		}
		out = append(out, f)
	}
	return out
}

// parseSenderPeers reads senderPeersAwk's answer: the peers by sender
// PID, why none could be read ("noss", "path" or ""), and whether it was
// read at all. Host input: malformed lines are left out, each sender
// keeps at most MaxSenderPeers.
func parseSenderPeers(s string) (map[int][]uint64, string, bool) {
	lines := strings.Split(s, "\n")
	head := strings.Fields(lines[0])
	if len(head) == 0 || head[0] != "ok" {
		return nil, "", false
	}
	note := ""
	for _, n := range []string{"noss", "path"} {
		if slices.Contains(head[1:], n) {
			note = n
		}
	}
	out := map[int][]uint64{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil || pid <= 0 || pid > MaxPID {
			continue
		}
		var peers []uint64
		for _, p := range f[1:] {
			v, err := strconv.ParseUint(p, 10, 64)
			if err != nil || v == 0 || len(peers) == MaxSenderPeers {
				continue
			}
			peers = append(peers, v)
		}
		out[pid] = peers
	}
	return out, note, true
}

// PeerWhy is why a WAL sender over a unix socket is not the one whose
// peer the WAL receiver sockets socks hold, "" when it is.
func PeerWhy(row StandbyInfo, socks []uint64) string {
	if !row.PeersRead {
		return "its upstream's WAL sender over the unix socket could not be read to tie it (read as the cluster owner on the upstream's machine)"
	}
	for _, p := range row.Peers {
		if slices.Contains(socks, p) {
			return ""
		}
	}
	switch {
	case len(row.Peers) > 0:
		return fmt.Sprintf("no WAL receiver socket of its is the other end of that sender's unix socket (peer inode %d), or another process holds a socket of that number too", row.Peers[0])
	case row.PeersNote != "":
		return row.PeersNote
	}
	return "its upstream's WAL sender over the unix socket has no socket peer to tie it by (its server in a network namespace of its own)"
}
