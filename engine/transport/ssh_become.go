package transport

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"sync/atomic"

	"golang.org/x/crypto/ssh"
)

// becomeSecret is a sudo password. It prints masked, so no %v of a
// struct holding it can show it.
type becomeSecret string

func (becomeSecret) String() string   { return "(secret)" }
func (becomeSecret) GoString() string { return "(secret)" }

// passwordAuth is password and keyboard-interactive authentication with
// pw, tried after the keys as ssh(1) does; none without a password.
func passwordAuth(pw string) []ssh.AuthMethod {
	if pw == "" {
		return nil
	}
	return []ssh.AuthMethod{
		ssh.Password(pw),
		ssh.KeyboardInteractive(func(_, _ string, questions []string, echos []bool) ([]string, error) {
			answers := make([]string, len(questions))
			for i := range questions {
				if echos[i] {
					return nil, errors.New("keyboard-interactive asks for more than a password")
				}
				answers[i] = pw
			}
			return answers, nil
		}),
	}
}

// becomeFeed runs one command through `sudo -S` with the become password.
// The password goes on the session's stdin, only when sudo's prompt (a
// random marker, taken out of stderr) shows that sudo asks for it; the
// command's own stdin follows once the wrapper reports its PID, which
// only happens after sudo let it run. A second prompt means the password
// was wrong: stdin is closed, sudo ends, and Run says so — it never waits
// for a password it cannot give.
type becomeFeed struct {
	password string
	prompt   string
	stdin    io.WriteCloser
	stderr   *pidCapture
	answered atomic.Bool // the password was written
	wrong    atomic.Bool // sudo asked again after it
}

func newBecomeFeed(pw becomeSecret) *becomeFeed {
	nonce := make([]byte, 8)
	_, _ = rand.Read(nonce)
	return &becomeFeed{password: string(pw), prompt: "[pgtune-sudo-" + hex.EncodeToString(nonce) + "] password:"}
}

// line is the remote command line: sudo reads the password from stdin
// (-S) and prints our marker as its prompt (-p).
func (f *becomeFeed) line(args []string) string {
	return "exec sudo -S -p " + Quote(f.prompt) + " -- " + Join(append([]string{"sh", "-c", wrapperScript, "sh"}, args...))
}

// argv is line as an argument vector, for the local connection.
func (f *becomeFeed) argv(args []string) []string {
	return append([]string{"sudo", "-S", "-p", f.prompt, "--", "sh", "-c", wrapperScript, "sh"}, args...)
}

// attach takes the session's stdin and makes stderr watch for the prompt.
func (f *becomeFeed) attach(sess *ssh.Session, stderr *pidCapture) error {
	stdin, err := sess.StdinPipe()
	if err != nil {
		return err
	}
	f.attachPipe(stdin, stderr)
	return nil
}

// attachPipe is attach for any command's stdin pipe and stderr.
func (f *becomeFeed) attachPipe(stdin io.WriteCloser, stderr *pidCapture) {
	f.stdin, f.stderr = stdin, stderr
	stderr.watchPrompt(f.prompt)
}

// run answers sudo and then hands the command its stdin; the returned
// function stops it when Run returns.
func (f *becomeFeed) run(stdin []byte) func() {
	stop := make(chan struct{})
	go func() {
		asked := 0
		for {
			select {
			case <-f.stderr.prompts:
				if f.stderr.started() {
					// The command runs: a prompt now is never sudo's
					// (nor is one that came with the PID line).
					f.feed(stdin)
					return
				}
				asked++
				if asked > 1 {
					f.wrong.Store(true)
					f.stdin.Close()
					return
				}
				if _, err := io.WriteString(f.stdin, f.password+"\n"); err != nil {
					return
				}
				f.answered.Store(true)
			case <-f.stderr.parsed:
				f.feed(stdin)
				return
			case <-stop:
				return
			}
		}
	}()
	return func() { close(stop) }
}

// feed hands the started command its stdin and closes it.
func (f *becomeFeed) feed(stdin []byte) {
	if len(stdin) > 0 {
		_, _ = f.stdin.Write(stdin)
	}
	f.stdin.Close()
}

// refused reports that sudo did not take the password: it asked again,
// or it failed after being answered without ever starting the command
// (a sudo configured for a single try).
func (f *becomeFeed) refused(exitCode int) bool {
	return f.wrong.Load() || f.answered.Load() && exitCode == 1 && f.stderr.PID() == 0
}
