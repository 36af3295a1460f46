package report

// Style is the SGR colouring of one output stream; the zero Style prints
// plain text. Whether to colour is decided by the caller from the stream
// and the environment, never by asking the terminal.
type Style struct{ On bool }

type style = Style

func (s Style) sgr(code, t string) string {
	if !s.On || t == "" {
		return t
	}
	return "\x1b[" + code + "m" + t + "\x1b[0m"
}

func (s Style) Red(t string) string    { return s.sgr("31", t) }
func (s Style) Green(t string) string  { return s.sgr("32", t) }
func (s Style) Yellow(t string) string { return s.sgr("33", t) }
func (s Style) Cyan(t string) string   { return s.sgr("36", t) }
func (s Style) Bold(t string) string   { return s.sgr("1", t) }
func (s Style) Dim(t string) string    { return s.sgr("2", t) }
