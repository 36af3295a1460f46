package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/pgtune/pgtune/engine/inventory"
)

// passwordFlags are Ansible's -k/--ask-pass and -K/--ask-become-pass.
type passwordFlags struct {
	login, become bool
}

// passwordFlagsOn declares -k/--ask-pass and -K/--ask-become-pass on a
// command that reaches hosts.
func passwordFlagsOn(fs *pflag.FlagSet, p *passwordFlags) {
	fs.BoolVarP(&p.login, "ask-pass", "k", false, "ask for the SSH login password (read without echo; ansible_password wins)")
	fs.BoolVarP(&p.become, "ask-become-pass", "K", false, "ask for the sudo password (read without echo; empty: the SSH password; ansible_become_password wins)")
}

// askPasswords reads the passwords the flags ask for, once per run, and
// gives them to every host whose inventory sets none (ansible_password
// and ansible_become_password win, as in Ansible). They live in the
// hosts' connection settings only, and are masked in every output.
func (a *App) askPasswords(inv *inventory.Inventory) error {
	if !a.passwords.login && !a.passwords.become {
		return nil
	}
	read := a.ReadPassword
	if read == nil {
		read = a.readTerminalPassword
	}
	var login, become string
	var err error
	if a.passwords.login {
		if login, err = read("SSH password: "); err != nil {
			return fmt.Errorf("--ask-pass: %w", err)
		}
	}
	if a.passwords.become {
		prompt := "BECOME password: "
		if a.passwords.login {
			prompt = "BECOME password [defaults to SSH password]: "
		}
		if become, err = read(prompt); err != nil {
			return fmt.Errorf("--ask-become-pass: %w", err)
		}
		if become == "" {
			become = login
		}
	}
	for _, h := range inv.Hosts {
		if h.Conn.Password == "" {
			h.Conn.Password = login
		}
		if h.Conn.BecomePassword == "" {
			h.Conn.BecomePassword = become
		}
	}
	return nil
}

// readTerminalPassword prompts on stderr and reads a line from the
// terminal on stdin without echo.
func (a *App) readTerminalPassword(prompt string) (string, error) {
	if !a.IsTerminal() {
		return "", errors.New("needs a terminal to read the password from (or set ansible_password / ansible_become_password in a vars file only you can read)")
	}
	fmt.Fprint(a.Stderr, prompt)
	b, err := term.ReadPassword(int(os.Stdin.Fd()))
	fmt.Fprintln(a.Stderr)
	if err != nil {
		return "", err
	}
	return string(b), nil
}
