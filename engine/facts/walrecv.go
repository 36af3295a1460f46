package facts

import (
	"encoding/hex"
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
// alone: the postmaster's children whose title names a WAL receiver
// (the title is the owner's to write: a lie hides its own connection,
// nothing more), the socket inodes of their descriptors (stat -L: the
// kind is the kernel's, a file named like a socket is a file), and those
// sockets' ends in the postmaster's network namespace, which must be the
// gather's own (in a namespace of its own, an unprivileged owner could
// give any address to a socket).

// MaxReceiverConns bounds the connections a host may report for its WAL
// receiver (it holds one).
const MaxReceiverConns = 8

// Conn is one established TCP connection's two ends.
type Conn struct {
	Local  netip.AddrPort `json:"local"`
	Remote netip.AddrPort `json:"remote"`
}

// walRecvAwk prints, for the postmaster pm (awk -v pm=PID), "ok" and
// its WAL receivers' established TCP connections, each
// LOCAL-REMOTE with both ends ADDRHEX:PORTHEX, the address in network
// byte order (/proc/net/tcp prints each 32-bit word in the host's order:
// the byte order is read off awk's own ELF header). Nothing when they
// cannot be read (not root nor the owner, another network namespace, no
// /proc/PID/task/PID/children). It keeps MaxReceiverConns (8).
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
function end(e,   a) {
  if (split(e, a, ":") != 2 || a[2] !~ /^[0-9A-F][0-9A-F][0-9A-F][0-9A-F]$/) return ""
  a[1] = canon(a[1])
  return a[1] == "" ? "" : a[1] ":" a[2]
}
BEGIN {
  if (pm !~ /^[1-9][0-9]*$/) exit
  le = 1
  if ((getline h < "/proc/self/exe") > 0 && substr(h, 6, 1) == "\002") le = 0
  close("/proc/self/exe")
  f = "/proc/" pm "/task/" pm "/children"; l = ""
  r = getline l < f
  close(f)
  if (r < 0) exit
  nk = split(l, kid, " "); args = ""; nw = 0
  for (i = 1; i <= nk; i++) {
    k = kid[i]
    if (k !~ /^[1-9][0-9]*$/) continue
    c = "/proc/" k "/cmdline"; t = ""
    getline t < c; close(c)
    if (index(t, "walreceiver") == 0) continue
    args = args " /proc/" k "/fd/*"; want[k] = 1; nw++
  }
  if (nw == 0) { print "ok"; exit }
  cmd = "exec stat -L -c \"%n|%F|%i\" /proc/self/ns/net /proc/" pm "/ns/net" args " 2>/dev/null"
  ns = ""; pmns = ""
  while ((cmd | getline l) > 0) {
    if (split(l, x, "|") != 3 || x[3] !~ /^[0-9]+$/) continue
    if (x[1] == "/proc/self/ns/net") { ns = x[3]; continue }
    if (x[1] == "/proc/" pm "/ns/net") { pmns = x[3]; continue }
    if (split(x[1], y, "/") != 5 || !(y[3] in want) || y[4] != "fd") continue
    got[y[3]] = 1
    if (x[2] == "socket") ino[x[3]] = 1
  }
  close(cmd)
  if (ns == "" || ns != pmns) exit
  for (k in want) if (!(k in got)) exit
  out = "ok"; n = 0
  for (j = 1; j <= 2; j++) {
    f = "/proc/" pm "/net/" (j == 1 ? "tcp" : "tcp6")
    while ((getline l < f) > 0) {
      if (split(l, x, " ") < 10 || x[4] != "01" || !(x[10] in ino) || n >= 8) continue
      lo = end(x[2]); ro = end(x[3])
      if (lo != "" && ro != "") { out = out " " lo "-" ro; n++ }
    }
    close(f)
  }
  print out
}
`

// walRecvFn is the gather's shell function: walrecv PID DIR records
// walRecvAwk's answer for the postmaster PID when DIR, its working
// directory, says it is a standby (standby.signal, or recovery.conf
// before PostgreSQL 12): on a primary there is no receiver to look for,
// and no process is spent.
const walRecvFn = `walrecv() {
  [ -n "$2" ] && { [ -f "$2/standby.signal" ] || [ -f "$2/recovery.conf" ]; } || return 0
  rec walrecv "$(awk -v pm="$1" '` + walRecvAwk + `' </dev/null 2>/dev/null)"
}
`

// parseWALReceiver reads walRecvAwk's answer: the connections, and
// whether they were read at all. Host input: an entry that is not two
// well-formed ends is left out, and no more than MaxReceiverConns kept.
func parseWALReceiver(s string) ([]Conn, bool) {
	f := strings.Fields(s)
	if len(f) == 0 || f[0] != "ok" {
		return nil, false
	}
	var out []Conn
	for _, e := range f[1:] {
		if len(out) == MaxReceiverConns {
			break
		}
		l, r, ok := strings.Cut(e, "-")
		if !ok {
			continue
		}
		lo, ok1 := parseEnd(l)
		ro, ok2 := parseEnd(r)
		if ok1 && ok2 {
			out = append(out, Conn{Local: lo, Remote: ro})
		}
	}
	return out, true
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

// HoldsEnd reports whether one of conns has the local end addr:port
// (IPv4-mapped IPv6 addresses compare as IPv4).
func HoldsEnd(conns []Conn, addr netip.Addr, port int) bool {
	for _, c := range conns {
		if c.Local.Addr().Unmap() == addr.Unmap() && int(c.Local.Port()) == port {
			return true
		}
	}
	return false
}
