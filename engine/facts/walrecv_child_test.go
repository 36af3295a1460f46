package facts

import (
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// walRecvChildEnv makes this test binary a WAL receiver stand-in
// (startPostmaster's child, titled like one): "dial ADDR" connects to
// ADDR from a port of its own with SO_REUSEADDR set, so that the test
// may bind another connection to the same local end; "unix PATH"
// connects to the unix socket PATH ("many PATH": 9 times); "accept PATH"
// listens on the unix socket PATH and holds the first client it accepts
// (a WAL sender stand-in); "loop" brings up
// the loopback device of the network namespace it was started in and
// connects to a listener of its own there. It holds its connections
// until it is signalled.
const walRecvChildEnv = "PGTUNE_TEST_WALRECV_CHILD"

// walRecvChild runs the stand-in when walRecvChildEnv asks for it (from
// TestMain), and exits; else it returns.
func walRecvChild() {
	spec, ok := os.LookupEnv(walRecvChildEnv)
	if !ok {
		return
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	var hold []net.Conn
	switch {
	case len(spec) > 5 && spec[:5] == "dial ":
		from := "127.0.0.1:0"
		if strings.HasPrefix(spec[5:], "[") {
			from = "[::1]:0"
		}
		c, err := reuseDialer(from).Dial("tcp", spec[5:])
		if err != nil {
			os.Exit(2)
		}
		hold = append(hold, c)
	case len(spec) > 5 && spec[:5] == "unix ", len(spec) > 5 && spec[:5] == "many ":
		n := 1
		if spec[:5] == "many " {
			n = 9
		}
		for range n {
			c, err := net.Dial("unix", spec[5:])
			if err != nil {
				os.Exit(10)
			}
			hold = append(hold, c)
		}
	case len(spec) > 7 && spec[:7] == "accept ":
		// A WAL sender stand-in: one client of the unix socket it
		// listens on, accepted and held.
		ln, err := net.Listen("unix", spec[7:])
		if err != nil {
			os.Exit(8)
		}
		c, err := ln.Accept()
		if err != nil {
			os.Exit(9)
		}
		hold = append(hold, c)
	case spec == "loop":
		if err := loopbackUp(); err != nil {
			os.Exit(3)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			os.Exit(4)
		}
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			os.Exit(5)
		}
		a, err := ln.Accept()
		if err != nil {
			os.Exit(6)
		}
		hold = append(hold, c, a)
	default:
		os.Exit(7)
	}
	select {
	case <-stop:
	case <-time.After(5 * time.Minute):
	}
	for _, c := range hold {
		c.Close()
	}
	os.Exit(0)
}

// reuseDialer dials from local with SO_REUSEADDR set.
func reuseDialer(local string) *net.Dialer {
	addr, _ := net.ResolveTCPAddr("tcp", local)
	return &net.Dialer{LocalAddr: addr, Timeout: 10 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
		}); err != nil {
			return err
		}
		return serr
	}}
}

// loopbackUp sets lo up in this process's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	ifr.SetUint16(unix.IFF_UP | unix.IFF_LOOPBACK | unix.IFF_RUNNING)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
