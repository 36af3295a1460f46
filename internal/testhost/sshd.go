package testhost

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SSHServer is a real OpenSSH sshd listening on 127.0.0.1 for one test,
// with its own host keys, one client key authorised for every user, and a
// known_hosts file recording its ed25519 host key only (it also serves an
// ECDSA key, which clients prefer by default: a client that does not
// negotiate the recorded key type fails against it).
type SSHServer struct {
	Addr           string // 127.0.0.1:PORT
	Port           int
	User           string // "root"
	KeyFile        string // client private key (ed25519, no passphrase)
	KnownHostsFile string // `[127.0.0.1]:PORT ssh-ed25519 …`
	ConfigFile     string // ssh_config with `Host testhost` pointing here
	HostKeyLine    string // the known_hosts line, for tests that build their own file
	Dir            string // temporary directory holding everything

	cmd    *exec.Cmd
	forget func() // its registry record (reap.go)
	logMu  sync.Mutex
	log    bytes.Buffer
	exited chan struct{}
}

// sshdLog collects sshd's stderr (-e) for failure messages.
type sshdLog struct{ s *SSHServer }

func (w sshdLog) Write(p []byte) (int, error) {
	w.s.logMu.Lock()
	defer w.s.logMu.Unlock()
	return w.s.log.Write(p)
}

// Log returns what sshd has logged so far.
func (s *SSHServer) Log() string {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	return s.log.String()
}

// SSHD starts sshd for the test and stops it in Cleanup. It needs root
// (sshd must own its privilege-separation setup and switch users); it
// skips under -short and when not root, and fails when sshd is missing.
// Extra sshd_config lines replace the default line with the same keyword.
func SSHD(t testing.TB, extra ...string) *SSHServer {
	t.Helper()
	if testing.Short() {
		t.Skip("starts sshd (integration test; run without -short)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to run sshd")
	}
	sshd := findSSHD()
	if sshd == "" {
		t.Fatal("testhost: sshd not installed: run .ci/run (apt-get install -y openssh-server sudo)")
	}
	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Fatal("testhost: ssh-keygen not installed: run .ci/run (apt-get install -y openssh-server)")
	}
	// sshd refuses to start without its privilege-separation directory.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatalf("testhost: %v", err)
	}

	Reap(t)
	// Not t.TempDir(): sshd reads authorized_keys as the logging-in user,
	// so a non-root login needs every directory on the path traversable.
	dir, err := os.MkdirTemp("", "pgtune-sshd-")
	if err != nil {
		t.Fatalf("testhost: %v", err)
	}
	forgetDir := register(t, record{Kind: "dir", Path: dir})
	t.Cleanup(func() {
		os.RemoveAll(dir)
		forgetDir()
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("testhost: %v", err)
	}
	s := &SSHServer{Dir: dir, User: "root", KeyFile: filepath.Join(dir, "id_ed25519")}
	keygenRun := func(typ, file string) {
		out, err := exec.Command(keygen, "-q", "-t", typ, "-N", "", "-C", "pgtune-test", "-f", file).CombinedOutput()
		if err != nil {
			t.Fatalf("testhost: ssh-keygen -t %s: %v: %s", typ, err, out)
		}
	}
	hostEd := filepath.Join(dir, "ssh_host_ed25519_key")
	hostEC := filepath.Join(dir, "ssh_host_ecdsa_key")
	keygenRun("ed25519", hostEd)
	keygenRun("ecdsa", hostEC)
	keygenRun("ed25519", s.KeyFile)
	clientPub := readFile(t, s.KeyFile+".pub")
	writeFile(t, filepath.Join(dir, "authorized_keys"), clientPub, 0o644)
	hostPub := strings.Fields(readFile(t, hostEd+".pub"))

	var lastErr string
	for attempt := 0; attempt < 3; attempt++ {
		s.Port = freePort(t)
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
		conf := filepath.Join(dir, "sshd_config")
		writeFile(t, conf, strings.Join(withConfig([]string{
			"Port " + strconv.Itoa(s.Port),
			"ListenAddress 127.0.0.1",
			"HostKey " + hostEd,
			"HostKey " + hostEC,
			"PidFile " + filepath.Join(dir, "sshd.pid"),
			"AuthorizedKeysFile " + filepath.Join(dir, "authorized_keys"),
			"StrictModes no",
			"PermitRootLogin prohibit-password",
			"PubkeyAuthentication yes",
			"PasswordAuthentication no",
			"KbdInteractiveAuthentication no",
			"UsePAM no",
			"MaxSessions 20",
			"MaxStartups 100",
			"LogLevel VERBOSE",
			"PrintMotd no",
			"Subsystem sftp internal-sftp",
			// bash runs ~/.bashrc for every command sshd starts, unless
			// SHLVL says it is not a top-level shell. The tests are about
			// pgtune, not about the rc file of whoever runs them (root's
			// here starts pyenv: seconds per command, and pgtune runs
			// dozens per host).
			"SetEnv SHLVL=1",
			"",
		}, extra), "\n"), 0o600)
		if out, err := exec.Command(sshd, "-t", "-f", conf).CombinedOutput(); err != nil {
			t.Fatalf("testhost: sshd -t: %v: %s", err, out)
		}
		s.log.Reset()
		pidFile := filepath.Join(dir, "sshd.pid")
		_ = os.Remove(pidFile)
		cmd := exec.Command(sshd, "-D", "-e", "-f", conf)
		cmd.Stdout, cmd.Stderr = sshdLog{s}, sshdLog{s}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := startDying(cmd); err != nil {
			t.Fatalf("testhost: start sshd: %v", err)
		}
		s.cmd = cmd
		s.forget = registerProcess(t, cmd)
		s.exited = make(chan struct{})
		go func() { cmd.Wait(); close(s.exited) }()
		if s.waitListening(t, pidFile) {
			break
		}
		lastErr = s.Log()
		s.stop()
		s.cmd = nil
		if !strings.Contains(lastErr, "Address already in use") {
			t.Fatalf("testhost: sshd did not start: %s", lastErr)
		}
	}
	if s.cmd == nil {
		t.Fatalf("testhost: sshd did not start after 3 ports: %s", lastErr)
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("sshd log:\n%s", s.Log())
		}
	})

	s.HostKeyLine = fmt.Sprintf("[127.0.0.1]:%d %s %s", s.Port, hostPub[0], hostPub[1])
	s.KnownHostsFile = filepath.Join(dir, "known_hosts")
	writeFile(t, s.KnownHostsFile, s.HostKeyLine+"\n", 0o600)
	s.ConfigFile = filepath.Join(dir, "ssh_config")
	writeFile(t, s.ConfigFile, fmt.Sprintf(`Host testhost
  HostName 127.0.0.1
  Port %d
  User root
  IdentityFile %s
  UserKnownHostsFile %s
  StrictHostKeyChecking yes
  IdentitiesOnly yes
`, s.Port, s.KeyFile, s.KnownHostsFile), 0o600)
	return s
}

func findSSHD() string {
	if p, err := exec.LookPath("sshd"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs // sshd re-executes itself and insists on an absolute path
		}
	}
	for _, p := range []string{"/usr/sbin/sshd", "/usr/local/sbin/sshd"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// waitListening waits until sshd has written its PidFile, which OpenSSH
// does right after binding its listening sockets (on inotify events, no
// polling), then checks the port answers. It returns false when sshd
// exits first (a port taken meanwhile, say).
func (s *SSHServer) waitListening(t testing.TB, pidFile string) bool {
	t.Helper()
	written := func() bool {
		b, err := os.ReadFile(pidFile)
		return err == nil && strings.HasSuffix(string(b), "\n")
	}
	if !AwaitFiles(t, "sshd to listen", []string{filepath.Dir(pidFile)}, s.exited, written) {
		return false
	}
	c, err := net.Dial("tcp", s.Addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// stop ends the listener and any per-connection children left in its
// process group.
func (s *SSHServer) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	pgid := s.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-s.exited
	}
	if s.forget != nil {
		s.forget()
	}
}

// EnsureUser makes sure a local login user exists for tests that log in
// as someone other than root (the client key is authorised for every
// user). The account gets no usable password but is not locked, since
// sshd without PAM refuses locked accounts. With passwordlessSudo a
// sudoers.d drop-in grants it NOPASSWD sudo; without, any previous grant
// is removed, so `sudo -n` asks for a password. Both are idempotent and
// left in place: they are harmless and other test packages may share them.
func EnsureUser(t testing.TB, name string, passwordlessSudo bool) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create users")
	}
	if _, err := user.Lookup(name); err != nil {
		out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home",
			"--home-dir", "/nonexistent", "--shell", "/bin/sh", name).CombinedOutput()
		if err != nil {
			if _, lerr := user.Lookup(name); lerr != nil {
				t.Fatalf("testhost: useradd %s: %v: %s", name, err, out)
			}
		}
	}
	if out, err := exec.Command("usermod", "-p", "*", name).CombinedOutput(); err != nil {
		t.Fatalf("testhost: usermod %s: %v: %s", name, err, out)
	}
	drop := filepath.Join("/etc/sudoers.d", "pgtune-test-"+name)
	if !passwordlessSudo {
		if err := os.Remove(drop); err != nil && !os.IsNotExist(err) {
			t.Fatalf("testhost: %v", err)
		}
		return
	}
	if _, err := exec.LookPath("sudo"); err != nil {
		t.Fatal("testhost: sudo not installed: run .ci/run (apt-get install -y sudo)")
	}
	if err := os.MkdirAll("/etc/sudoers.d", 0o750); err != nil {
		t.Fatalf("testhost: %v", err)
	}
	tmp := drop + ".tmp"
	writeFile(t, tmp, name+" ALL=(ALL:ALL) NOPASSWD: ALL\n", 0o440)
	if out, err := exec.Command("visudo", "-cf", tmp).CombinedOutput(); err != nil {
		os.Remove(tmp)
		t.Fatalf("testhost: visudo -cf: %v: %s", err, out)
	}
	// sudo ignores names with a dot, so the temporary file is inert.
	if err := os.Rename(tmp, drop); err != nil {
		t.Fatalf("testhost: %v", err)
	}
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("testhost: %v", err)
	}
	return string(b)
}

func writeFile(t testing.TB, path, data string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatalf("testhost: %v", err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatalf("testhost: %v", err)
	}
}
