package fakehost

import (
	"fmt"
	"strconv"
	"strings"
)

// Server is a PostgreSQL stand-in on the host's huge page pools, for tests
// of the order in which pools change around restarts. A restart of Unit
// stops it (its segment's pages are freed; pages left surplus by a shrink
// leave the pool) and starts it on Conf: "huge_page_size_kb = N" and
// "pages = N" lines say which pool it maps and how much of it. A pool
// short of free pages fails the start as PostgreSQL fails it, and the
// server stays down; so does a "refuse = yes" line (a setting the server
// rejects).
type Server struct {
	Unit, Conf string
	Up         bool
	// SizeKB and Pages are the segment of the running server.
	SizeKB, Pages int64
	// Starts has one line per start: "up N×SIZEkB" or "failed: why".
	Starts []string
}

// AddServer puts a server on the host, up on the pool its Conf names
// (which must hold its pages).
func (h *Host) AddServer(unit, conf string) *Server {
	s := &Server{Unit: unit, Conf: conf}
	h.Server = s
	h.OnService = func(u, action string) error {
		if u != s.Unit || action != "restart" {
			return nil
		}
		return h.restartServer()
	}
	if err := h.restartServer(); err != nil {
		panic(err)
	}
	return s
}

// restartServer runs with the host locked.
func (h *Host) restartServer() error {
	s := h.Server
	s.Up = false
	size, pages, refuse, err := serverConf(h.Files[s.Conf])
	switch {
	case err != nil:
	case refuse:
		err = fmt.Errorf("FATAL:  configuration file %q contains errors", s.Conf)
	case h.offers(size) && h.counts(size).free >= pages:
		s.Up, s.SizeKB, s.Pages = true, size, pages
		s.Starts = append(s.Starts, fmt.Sprintf("up %d×%dkB", pages, size))
		return nil
	default:
		err = fmt.Errorf("FATAL:  could not map anonymous shared memory: Cannot allocate memory (%d pages of %d kB wanted, %d free)",
			pages, size, h.counts(size).free)
	}
	s.Starts = append(s.Starts, "failed: "+err.Error())
	return err
}

func serverConf(conf string) (sizeKB, pages int64, refuse bool, err error) {
	for _, line := range strings.Split(conf, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "huge_page_size_kb":
			sizeKB, err = strconv.ParseInt(v, 10, 64)
		case "pages":
			pages, err = strconv.ParseInt(v, 10, 64)
		case "refuse":
			refuse = v == "yes"
		}
		if err != nil {
			return 0, 0, false, fmt.Errorf("FATAL:  %s: %v", k, err)
		}
	}
	return sizeKB, pages, refuse, nil
}
