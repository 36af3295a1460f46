package topology

import (
	"net"
	"sort"
	"strings"
)

// Cascading replication: a standby may stream from another standby. Its
// restart must come before its upstream's (leaves first): restarting the
// upstream first would cut the cascaded standby off while it still runs
// the old values, and then cut it off again for its own restart.

// Reach is one way a member's server is reached: an address as a
// standby's upstream names it (pg_stat_wal_receiver's sender_host and
// sender_port, or primary_conninfo's host and port). Socket directories
// and loopback addresses only mean the same server on the same machine,
// so those carry the machine's name.
func Reach(machine, host string, port int) string {
	if port <= 0 {
		return ""
	}
	p := ":" + itoa(port)
	switch {
	case strings.HasPrefix(host, "/"):
		return machine + "|" + host + p
	case isLoopback(host):
		return machine + "|loopback" + p
	}
	return strings.ToLower(host) + p
}

// Addresses is every Reach of a server on machine listening on port,
// with its socket directory: loopback, and each of names (the machine's
// name, the inventory's address).
func Addresses(machine, socketDir string, port int, names ...string) []string {
	out := []string{Reach(machine, "localhost", port)}
	for _, h := range append([]string{socketDir}, names...) {
		if h != "" {
			out = append(out, Reach(machine, h, port))
		}
	}
	return out
}

// UpstreamReach is Reach for a standby's upstream ("host:port") as seen
// from the standby's machine.
func UpstreamReach(machine, upstream string) string {
	host, port, err := net.SplitHostPort(upstream)
	if err != nil {
		i := strings.LastIndexByte(upstream, ':')
		if i < 0 {
			return ""
		}
		host, port = upstream[:i], upstream[i+1:]
	}
	n := 0
	for _, r := range port {
		if r < '0' || r > '9' || n > 65535 {
			return ""
		}
		n = n*10 + int(r-'0')
	}
	return Reach(machine, host, n)
}

func isLoopback(host string) bool {
	if host == "" || strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return string(b[i:])
}

// orderStandbys links each standby to the member it streams from and
// sorts the standbys deepest first (a cascaded standby before its
// upstream), by name within one depth. It fills c.Upstreams for the
// standbys that stream from another standby, and returns the member each
// standby streams from, where the run holds it.
func (c *Cluster) orderStandbys(members []Member) map[string]string {
	byReach := map[string]string{}
	for _, m := range members {
		for _, r := range m.Reach {
			if r != "" {
				byReach[r] = m.Host
			}
		}
	}
	parent := map[string]string{}
	for _, m := range members {
		if m.Host == c.Primary || m.Topo == nil || m.Topo.Upstream == "" || contains(c.OtherPrimaries, m.Host) {
			continue
		}
		if up, ok := byReach[UpstreamReach(m.Machine, m.Topo.Upstream)]; ok && up != m.Host {
			parent[m.Host] = up
		}
	}
	depth := func(h string) int {
		d := 1
		for seen := map[string]bool{h: true}; ; d++ {
			up, ok := parent[h]
			if !ok || up == c.Primary || seen[up] {
				return d
			}
			seen[up], h = true, up
		}
	}
	for h, up := range parent {
		if up != c.Primary && contains(c.Standbys, up) {
			if c.Upstreams == nil {
				c.Upstreams = map[string]string{}
			}
			c.Upstreams[h] = up
		}
	}
	c.depth = map[string]int{}
	for _, s := range c.Standbys {
		c.depth[s] = depth(s)
	}
	sort.SliceStable(c.Standbys, func(i, j int) bool {
		di, dj := c.depth[c.Standbys[i]], c.depth[c.Standbys[j]]
		if di != dj {
			return di > dj
		}
		return c.Standbys[i] < c.Standbys[j]
	})
	return parent
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
