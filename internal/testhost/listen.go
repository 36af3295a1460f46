package testhost

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os/user"
	"runtime"
	"strconv"
	"syscall"
	"testing"
)

// ServeAs is an httptest server whose sockets belong to user name, as if
// that user ran it: the kernel gives a socket the fsuid of the thread
// that made it (what /proc/net/tcp shows), a connection waiting to be
// accepted the listener's, and an accepted one the accepting thread's.
// The handler still runs in the test. Needs root.
func ServeAs(t *testing.T, name string, h http.Handler) *httptest.Server {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		t.Fatal(err)
	}
	l, err := listenAs(uid)
	if err != nil {
		t.Fatalf("listen as %s: %v", name, err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = fsuidListener{l, uid}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// listenAs opens a loopback listener as uid (asUID).
func listenAs(uid int) (l net.Listener, err error) {
	asUID(uid, func() { l, err = net.Listen("tcp", "127.0.0.1:0") })
	return l, err
}

// fsuidListener accepts as uid.
type fsuidListener struct {
	net.Listener
	uid int
}

func (l fsuidListener) Accept() (c net.Conn, err error) {
	asUID(l.uid, func() { c, err = l.Listener.Accept() })
	return c, err
}

// asUID runs f with fsuid uid on this thread alone (locked to it, so a
// syscall f waits on is retried there), then puts the fsuid back.
func asUID(uid int, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(uid), 0, 0)
	defer syscall.RawSyscall(syscall.SYS_SETFSUID, prev, 0, 0)
	f()
}
