package facts

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// A primary's pg_stat_replication shows each WAL sender's client address
// and port, as the primary's kernel saw the connection. Another instance
// on the standby's machine (same address) can claim that sender as its
// own; the standby's own word cannot settle it. What can is the kernel of
// the standby's machine: which process holds the connection whose local
// end is that address and port. The gather reads it as root, for a
// postmaster whose data directory says it is a standby, from the kernel
// alone:
//   - the postmaster's children whose title names a WAL receiver (the
//     title is the owner's to write: a lie hides its own connection,
//     nothing more; a child titled so by chance only costs a look);
//   - their descriptors that are sockets: the link is exactly
//     socket:[INODE] (find -lname; an O_PATH descriptor of a socket file
//     links to its path, and stat would call it a socket);
//   - those sockets in the gather's own network namespace's table
//     (/proc/self/net/tcp{,6}: a socket made in a namespace of the
//     owner's own, where any address can be given, is not there),
//     established, made by the owner's uid, and not a client connection
//     the server accepted (local port the server's);
//   - listed with the remote ports of the other established connections
//     from the same local end: Linux gives a connect() a local port
//     another connection holds when the destination differs, so an owner
//     can hold the honest standby's local end towards somewhere else
//     (ReceiverFor refuses a tie when one goes to the upstream's port);
//   - and, where the machine translates addresses (conntrack), with the
//     port a translated connection that leaves as that local end goes to
//     (its reply's source: another namespace's connection, a
//     container's, masqueraded as this machine's address and port; the
//     owner could bind that end here, where it is free), or marked
//     shared (~*) when the receiver's own connection was translated.
//     Without a readable table (no conntrack, a kernel without
//     /proc/net/nf_conntrack, not root) none is seen: SECURITY.md says
//     what is left.

// MaxReceiverConns bounds the connections a host may report for its WAL
// receiver (it holds one).
const MaxReceiverConns = 8

// Conn is one established TCP connection's two ends, and the remote
// ports of the other established connections that share its local end
// (-1: more than the gather lists).
type Conn struct {
	Local       netip.AddrPort `json:"local"`
	Remote      netip.AddrPort `json:"remote"`
	SharedPorts []int          `json:"shared_ports,omitempty"`
}

// walRecvAwk prints, for the postmaster pm run by uid, whose server
// listens on port (awk -v pm=PID -v uid=UID -v port=PORT), "ok" and its
// WAL receivers' connections (see above): each LOCAL-REMOTE with both
// ends ADDRHEX:PORTHEX, the address in network byte order
// (/proc/net/tcp prints each 32-bit word in the host's order: the byte
// order is read off awk's own ELF header), followed by a ~PORTHEX for
// each other connection from the same local end, established or
// translated (the port it goes to; at most 16 of each, then ~*), and ~*
// when its own was translated (-v ct=FILE names another conntrack table,
// for tests). Before the connections, a #INODE for each socket the
// receivers hold that is in no TCP or UDP table here and that no other
// process holds (at most 8): a unix socket's ties it to a WAL sender over
// a unix socket (walsend.go). The kernel numbers sockets with a 32-bit
// counter that wraps, so an owner who makes sockets until one gets the
// number of the honest receiver's (which any user can read) holds a
// socket of that number too; every process's descriptors are looked
// through (only when there is such a socket: a receiver over TCP holds
// none; none at all when there are more than 8, which no receiver holds)
// and a number another process holds ties nothing; a look that did not
// end (the find could not run: its end marker and status are missing or
// not 0 or 1, processes ending mid-look being 1) ties nothing either
// (-v scan=COMMAND replaces the find, for tests). Nothing when
// they cannot be read (not root nor the owner, no
// /proc/PID/task/PID/children). It keeps MaxReceiverConns (8)
// connections.
const walRecvAwk = `
function canon(h,   out, i, w) {
  if (h !~ /^[0-9A-F]+$/ || (length(h) != 8 && length(h) != 32)) return ""
  out = ""
  for (i = 1; i <= length(h); i += 8) {
    w = substr(h, i, 8)
    if (le) w = substr(w, 7, 2) substr(w, 5, 2) substr(w, 3, 2) substr(w, 1, 2)
    out = out w
  }
  return out
}
function dec(h,   i, n) {
  n = 0
  for (i = 1; i <= length(h); i++) n = n * 16 + index("0123456789ABCDEF", substr(h, i, 1)) - 1
  return n
}
function text(e,   a, i, t) {
  split(e, a, ":")
  if (length(a[1]) == 8) t = dec(substr(a[1], 1, 2)) "." dec(substr(a[1], 3, 2)) "." dec(substr(a[1], 5, 2)) "." dec(substr(a[1], 7, 2))
  else for (i = 1; i <= 32; i += 4) t = t (i > 1 ? ":" : "") tolower(substr(a[1], i, 4))
  return t " " dec(a[2])
}
function end(e,   a) {
  if (split(e, a, ":") != 2 || a[2] !~ /^[0-9A-F][0-9A-F][0-9A-F][0-9A-F]$/) return ""
  a[1] = canon(a[1])
  return a[1] == "" ? "" : a[1] ":" a[2]
}
BEGIN {
  if (pm !~ /^[1-9][0-9]*$/ || uid !~ /^[0-9]+$/) exit
  if (port !~ /^[1-9][0-9]*$/) port = 0
  le = 1
  if ((getline h < "/proc/self/exe") > 0 && substr(h, 6, 1) == "\002") le = 0
  close("/proc/self/exe")
  f = "/proc/" pm "/task/" pm "/children"; l = ""
  r = getline l < f
  close(f)
  if (r < 0) exit
  nk = split(l, kid, " "); args = ""
  for (i = 1; i <= nk; i++) {
    k = kid[i]
    if (k !~ /^[1-9][0-9]*$/) continue
    c = "/proc/" k "/cmdline"; t = ""
    getline t < c; close(c)
    if (index(t, "walreceiver") || index(t, "wal receiver")) { args = args " /proc/" k "/fd"; rk[k] = 1 }
  }
  if (args == "") { print "ok"; exit }
  cmd = "exec find" args " -maxdepth 1 \\( -type d -readable -printf \"r\\n\" \\) -o \\( -lname \"socket:\\[*\" -printf \"s %l\\n\" \\) 2>/dev/null"
  rd = 0
  while ((cmd | getline l) > 0) {
    if (l == "r") rd = 1
    else if (l ~ /^s socket:\[[0-9]+\]$/) ino[substr(l, 11, length(l) - 11)] = 1
  }
  close(cmd)
  if (!rd) exit
  own = sprintf("%04X", port)
  for (j = 1; j <= 4; j++) {
    f = "/proc/self/net/" (j == 1 ? "tcp" : j == 2 ? "tcp6" : j == 3 ? "udp" : "udp6")
    while ((getline l < f) > 0) {
      if (split(l, x, " ") < 10) continue
      if (x[10] in ino) inet[x[10]] = 1
      if (j > 2 || x[4] != "01") continue
      lo = end(x[2]); ro = end(x[3])
      if (lo == "" || ro == "") continue
      key = lo
      if (substr(key, 1, 24) == "00000000000000000000FFFF") key = substr(key, 25)
      i = ++cnt[key]; rport[key, i] = substr(ro, length(ro) - 3)
      if ((x[10] in ino) && x[8] == uid && substr(lo, length(lo) - 3) != own) { held[key] = i; conn[key] = lo "-" ro }
    }
    close(f)
  }
  nh = 0
  for (key in held) { want[text(key)] = key; nh++ }
  if (nh) {
    if (ct == "") ct = "/proc/net/nf_conntrack"
    r = getline l < ct
    if (r > 0) do {
      ns = 0; nd = 0; nsp = 0; ndp = 0
      nf = split(l, x, " ")
      for (i = 4; i <= nf; i++) {
        if (substr(x[i], 1, 4) == "src=") s[++ns] = substr(x[i], 5)
        else if (substr(x[i], 1, 4) == "dst=") d[++nd] = substr(x[i], 5)
        else if (substr(x[i], 1, 6) == "sport=") sp[++nsp] = substr(x[i], 7)
        else if (substr(x[i], 1, 6) == "dport=") dp[++ndp] = substr(x[i], 7)
      }
      if (x[3] != "tcp" || ns < 2 || nd < 2 || nsp < 2 || ndp < 2) continue
      o = s[1] " " sp[1]; rp = d[2] " " dp[2]
      if ((rp in want) && o != rp && sp[2] ~ /^[0-9]+$/ && length(sp[2]) <= 5 && sp[2] + 0 < 65536) {
        k = want[rp]
        if (++nt[k] > 16) nat[k] = 1
        else tr[k] = tr[k] " ~" sprintf("%04X", sp[2])
      }
      if ((o in want) && rp != o) nat[want[o]] = 1
    } while ((getline l < ct) > 0)
    close(ct)
  }
  nc = 0
  for (sk in ino) if (!(sk in inet)) nc++
  scanned = 0
  if (nc > 0 && nc <= 8) {
    if (scan == "") scan = "find /proc/[0-9]*/fd -maxdepth 1 -lname \"socket:\\[*\" -printf \"%h %l\\n\" 2>/dev/null"
    cmd = scan "; echo \"pgtune:end $?\""
    while ((cmd | getline l) > 0) {
      if (l == "pgtune:end 0" || l == "pgtune:end 1") { scanned = 1; continue }
      if (split(l, x, " ") != 2 || x[2] !~ /^socket:\[[0-9]+\]$/) continue
      k = substr(x[1], 7, length(x[1]) - 9); sk = substr(x[2], 9, length(x[2]) - 9)
      if ((sk in ino) && !(k in rk)) other[sk] = 1
    }
    close(cmd)
  }
  out = "ok"; n = 0
  for (sk in ino) if (scanned && !(sk in inet) && !(sk in other) && n++ < 8) out = out " #" sk
  n = 0
  for (key in held) {
    if (n++ >= 8) break
    out = out " " conn[key]; m = 0
    if (key in nat) out = out " ~*"
    out = out tr[key]
    for (i = 1; i <= cnt[key]; i++) {
      if (i == held[key]) continue
      if (++m > 16) { out = out " ~*"; break }
      out = out " ~" rport[key, i]
    }
  }
  print out
}
`

// walRecvFn is the gather's shell function: walrecv PID DIR UID PORT
// records walRecvAwk's answer for the postmaster PID, run by UID,
// listening on PORT, when DIR, its working directory, says it is a
// standby (standby.signal, or recovery.conf before PostgreSQL 12): on a
// primary there is no receiver to look for, and no process is spent.
const walRecvFn = `walrecv() {
  [ -n "$2" ] && { [ -f "$2/standby.signal" ] || [ -f "$2/recovery.conf" ]; } || return 0
  rec walrecv "$(awk -v pm="$1" -v uid="$3" -v port="$4" '` + walRecvAwk + `' </dev/null 2>/dev/null)"
}
`

// parseWALReceiver reads walRecvAwk's answer: the connections, the
// sockets, and whether they were read at all. Host input: a connection
// that is not two well-formed ends is left out with what follows it, and
// no more than MaxReceiverConns connections and MaxReceiverConns sockets
// kept.
func parseWALReceiver(s string) ([]Conn, []uint64, bool) {
	f := strings.Fields(s)
	if len(f) == 0 || f[0] != "ok" {
		return nil, nil, false
	}
	var out []Conn
	var socks []uint64
	last := -1 // the connection a ~PORT follows; -1 none (or left out)
	for _, e := range f[1:] {
		if p, ok := strings.CutPrefix(e, "#"); ok {
			if v, err := strconv.ParseUint(p, 10, 64); err == nil && v > 0 && len(socks) < MaxReceiverConns {
				socks = append(socks, v)
			}
			continue
		}
		if p, ok := strings.CutPrefix(e, "~"); ok {
			if last < 0 {
				continue
			}
			n := -1
			if p != "*" {
				v, err := strconv.ParseUint(p, 16, 16)
				if err != nil || len(p) != 4 {
					continue
				}
				n = int(v)
			}
			out[last].SharedPorts = append(out[last].SharedPorts, n)
			continue
		}
		last = -1
		if len(out) == MaxReceiverConns {
			continue
		}
		l, r, ok := strings.Cut(e, "-")
		if !ok {
			continue
		}
		lo, ok1 := parseEnd(l)
		ro, ok2 := parseEnd(r)
		if ok1 && ok2 {
			out = append(out, Conn{Local: lo, Remote: ro})
			last = len(out) - 1
		}
	}
	return out, socks, true
}

// parseEnd reads ADDRHEX:PORTHEX (8 or 32 hex digits, network order; 4
// for the port).
func parseEnd(s string) (netip.AddrPort, bool) {
	a, p, ok := strings.Cut(s, ":")
	if !ok || len(p) != 4 || (len(a) != 8 && len(a) != 32) {
		return netip.AddrPort{}, false
	}
	b, err := hex.DecodeString(a)
	if err != nil {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	addr, ok := netip.AddrFromSlice(b)
	if !ok {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(addr, uint16(port)), true
}

// ReceiverFor reports whether conns, a standby's WAL receiver
// connections, hold the one connection from addr:port (a WAL sender's
// client end, as its upstream shows it) to the upstream's port upPort,
// with no other connection from that local end to a port upPort and
// none translated (see walRecvAwk): the kernel lets another process hold
// the same local end towards another destination, and which of them the
// upstream serves is then not known. IPv4-mapped IPv6 addresses compare
// as IPv4.
func ReceiverFor(conns []Conn, addr netip.Addr, port, upPort int) bool {
	return ReceiverWhy(conns, addr, port, upPort) == ""
}

// ReceiverWhy is why ReceiverFor is false, "" when it is true.
func ReceiverWhy(conns []Conn, addr netip.Addr, port, upPort int) string {
	n := 0
	end := netip.AddrPortFrom(addr.Unmap(), uint16(port))
	for _, c := range conns {
		if c.Local.Addr().Unmap() != addr.Unmap() || int(c.Local.Port()) != port {
			continue
		}
		if int(c.Remote.Port()) != upPort {
			return fmt.Sprintf("its WAL receiver's connection from %s goes to port %d, not to the upstream's port %d (a port forwarded on the way cannot be tied)", end, c.Remote.Port(), upPort)
		}
		for _, p := range c.SharedPorts {
			if p < 0 {
				return fmt.Sprintf("its WAL receiver's connection from %s shares that end with more connections than listed, or was itself translated (NAT on its machine)", end)
			}
			if p == upPort {
				return fmt.Sprintf("its WAL receiver's connection from %s shares that end with another connection to port %d (on its machine, or translated to that end from a namespace of its own): which one the upstream serves is not known", end, upPort)
			}
		}
		n++
	}
	if n == 0 {
		return fmt.Sprintf("no WAL receiver connection of its holds %s", end)
	}
	if n > 1 {
		return fmt.Sprintf("more than one WAL receiver connection of its holds %s", end)
	}
	return ""
}
