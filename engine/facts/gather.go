package facts

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/pgtune/pgtune/engine/transport"
)

// gatherScript prints the core facts in one round trip; the modules' fact
// snippets follow it (setsScript). It is fixed text: the declared keys
// arrive as positional parameters. Every output line starts with a tag,
// and file contents are prefixed line by line, so no file content can be
// mistaken for a section.
//
//	M meminfo line       H hostname        K kernel release
//	U login user         I effective uid   S key value (live sysctl)
//	W 1|0 every declared key writable      N node nr_hugepages
//	F path (a sysctl file starts)          L line of that file
//	E path (that file could not be read)
//	R vm.min_free_kbytes (read-only: not a declared key)
//	P sizekB nr free resv surplus (one huge page size's pool)
//	Q node sizekB nr free (a NUMA node's share of that pool)
//	X module (its facts start)             Y line the module's snippet printed
//	ZN ZF ZL ZT ZE the declared files (Set.Files), see files.go
const gatherScript = `export LC_ALL=C
# one1 FILE sets v to the first line of a sysfs FILE ("" when unreadable):
# a builtin read, where $(cat) would fork a process per value. Not for
# /proc/sys: its integer files answer a read at an offset with nothing,
# and the shell reads a byte at a time.
one1() { v=; IFS= read -r v 2>/dev/null < "$1" || :; }
# The default huge page size (Hugepagesize's value) is taken in the same
# pass: the shell reads a byte at a time, a second pass was ~1500 reads.
# hpv: as "read -r k v rest" splits a line (globs off: meminfo's text).
hp=
hpv() { if [ "$1" = Hugepagesize: ]; then hp=$2; fi; }
while IFS= read -r l; do
  printf 'M %s\n' "$l"
  case $l in *Hugepagesize:*) set -f; hpv $l; set +f;; esac
done < /proc/meminfo
# hostname and osrelease are string files: unlike the integer ones they
# answer the shell's byte-at-a-time read (uname was a process).
v=; IFS= read -r v < /proc/sys/kernel/hostname || :
printf 'H %s\n' "$v"
v=; IFS= read -r v < /proc/sys/kernel/osrelease || :
printf 'K %s\n' "$v"
uid=
while read -r k r e rest; do if [ "$k" = Uid: ]; then uid=$e; break; fi; done < /proc/self/status
# The user: sudo's caller, else the passwd entry of our uid (id -un, a
# process, only for a user passwd does not list).
u=${SUDO_USER-}
if [ -z "$u" ]; then
  while IFS=: read -r pn px pu rest; do if [ "$pu" = "$uid" ]; then u=$pn; break; fi; done 2>/dev/null < /etc/passwd
fi
printf 'U %s\n' "${u:-$(id -un)}"
printf 'I %s\n' "$uid"
# sysfile KEY sets p to KEY's file under /proc/sys.
sysfile() {
  p=/proc/sys r=$1
  while :; do case $r in *.*) p=$p/${r%%.*} r=${r#*.};; *) p=$p/$r; break;; esac; done
}
# sysval FILE sets v to FILE's lines in vals (grep -H: "FILE:line").
nl='
'
sysval() {
  v= sv_first=1
  while IFS= read -r l; do
    case $l in "$1:"*) ;; *) continue;; esac
    if [ -n "$sv_first" ]; then v=${l#"$1:"} sv_first=; else v=$v$nl${l#"$1:"}; fi
  done <<VALS
$vals
VALS
}
# One grep reads every value (the shell cannot read /proc/sys: its
# integer files answer a read at an offset with nothing), after the keys
# in "$@".
n=$#
for k in "$@"; do sysfile "$k"; set -- "$@" "$p"; done
vals=$(shift "$n"; grep -H '' -- "$@" /proc/sys/vm/min_free_kbytes 2>/dev/null)
w=1
for k in "$@"; do
  [ "$n" -gt 0 ] || break
  n=$((n-1))
  sysfile "$k"
  if [ -r "$p" ]; then sysval "$p"; printf 'S %s %s\n' "$k" "$v"; [ -w "$p" ] || w=0; fi
done
echo "W $w"
if [ -r /proc/sys/vm/min_free_kbytes ]; then sysval /proc/sys/vm/min_free_kbytes; printf 'R %s\n' "$v"; fi
for n in /sys/devices/system/node/node[0-9]*; do
  [ -d "$n" ] || continue
  one1 "$n/hugepages/hugepages-${hp}kB/nr_hugepages"
  printf 'N %s %s\n' "${n##*/node}" "$v"
  for d in "$n"/hugepages/hugepages-*kB; do
    [ -d "$d" ] || continue
    s=${d##*/hugepages-}
    one1 "$d/nr_hugepages"; nr=$v
    one1 "$d/free_hugepages"
    printf 'Q %s %s %s %s\n' "${n##*/node}" "${s%kB}" "$nr" "$v"
  done
done
for d in /sys/kernel/mm/hugepages/hugepages-*kB; do
  [ -d "$d" ] || continue
  s=${d##*/hugepages-}
  printf 'P %s' "${s%kB}"
  for f in nr_hugepages free_hugepages resv_hugepages surplus_hugepages; do one1 "$d/$f"; printf ' %s' "$v"; done
  echo
done
emit() {
  printf 'F %s\n' "$1"
  { while IFS= read -r l || [ -n "$l" ]; do printf 'L %s\n' "$l"; done < "$1"; } 2>/dev/null || printf 'E %s\n' "$1"
}
for d in /etc/sysctl.d /run/sysctl.d /usr/local/lib/sysctl.d /usr/lib/sysctl.d /lib/sysctl.d; do
  for f in "$d"/*.conf; do
    if [ -d "$f" ]; then continue; fi
    if [ -e "$f" ] || [ -L "$f" ]; then emit "$f"; fi
  done
done
if [ -e /etc/sysctl.conf ]; then emit /etc/sysctl.conf; fi
`

// Gather collects a host's memory and kernel facts in one remote round
// trip. It does not look for PostgreSQL: the runner calls DiscoverPostgres
// for that. With opts.Become the script runs through sudo -n, so that
// writability and file contents are seen with the privileges the modules
// will have; User stays the login user and IsRoot says whether those
// privileged steps run as root.
func Gather(ctx context.Context, t transport.Transport, opts Options) (*Facts, error) {
	if err := CheckSets(opts.Sets); err != nil {
		return nil, fmt.Errorf("gather facts: %w", err)
	}
	args := append([]string{"sh", "-c", GatherScript(opts.Sets), "sh"}, SysctlKeys(opts.Sets)...)
	res, err := t.Run(ctx, transport.Command{Args: args, Become: opts.Become})
	if err != nil {
		return nil, fmt.Errorf("gather facts: %w", err)
	}
	f, err := ParseGather(res.Stdout, opts.Sets...)
	if err != nil {
		return nil, fmt.Errorf("gather facts: %w", err)
	}
	return f, nil
}

// GatherScript is the script Gather and GatherHost run for sets: the core
// facts, the sets' declared files (files.go), each set's snippet, then
// (GatherHost) cluster discovery.
func GatherScript(sets []Set) string {
	runs, _ := preRunsOf(sets)
	return discoverHead + gatherScript + filesScript(PrefetchFiles(sets)) + setsScript(sets) +
		"gpost=" + shellQuote(preRunScript(runs)) + "\n" + discoverTail
}

// discoverHead reads GatherHost's request on stdin before anything else
// can: "discover", then the inventory's pg_data and pg_bin, the
// delimiter of the discovery's answer (discoveryNonce), and "post I J..."
// to run those of the commands run ahead (prerun.go), a line each (checkOverride keeps
// line breaks out of them). Without it (Gather) no discovery runs.
const discoverHead = `unset dq pgd pgb dn pq gpost
dq= pgd= pgb= dn= pq=
IFS= read -r dq && IFS= read -r pgd && IFS= read -r pgb && IFS= read -r dn || :
if [ -n "$dn" ]; then IFS= read -r pq || :; fi
`

// discoverTail runs cluster discovery when asked (discoverHead), in the
// gather's own shell (a subshell was a process more; nothing of the
// gather runs after it, and it sets each variable it reads): its
// NUL-separated records come as they are between a "D NONCE" line and a
// last "NONCE STATUS" line, which the EXIT trap prints however the
// discovery ends (its exit, a shell error: the status a subshell had). The nonce is the controller's, random per run and sent on stdin,
// which no process on the host but root can read (nothing of the host
// sees it: not in argv, not in the environment, and binaries the
// discovery runs get /dev/null for stdin), so no content read from the
// host can forge either line: base64 (a process) is not needed to keep
// host text apart from the answer's frame.
var discoverTail = `if [ "$dq" = discover ] && [ -n "$dn" ]; then
  printf 'D %s\n' "$dn"
  disc=` + shellQuote(discoverScript) + `
  disc_end() { printf '\n%s %s\n' "$dn" "$1"; }
  trap 'disc_end "$?"; exit 0' EXIT
  set -- "$pgd" "$pgb" "" "$pgb" "" "${pq%% *}"
  eval "$disc" </dev/null
fi
exit 0
`

// shellQuote quotes s as one sh word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ParseGather parses the output of the gather script run for sets.
func ParseGather(out []byte, sets ...Set) (*Facts, error) {
	f := &Facts{Sysctl: map[string]string{}}
	setOut := map[string][]byte{}
	var curSet string
	meminfo := map[string]int64{}
	nodes := map[int]int64{}
	var files []SysctlFile
	var cur *SysctlFile
	var pools []HugePagePool
	var nodePools []NodePool
	sawMeminfo := false
	minFreeKB := ""
	prefetched := newFileParser(PrefetchFiles(sets)) // files.go
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "D ") {
			// The discovery's answer starts (discoverTail): its records
			// are host text as it is, never gather lines.
			break
		}
		// The facts keep pieces of some lines for the whole run: as
		// pieces of their own line, not of the whole output (a fleet's
		// controller held every host's gather output, ~12 KB each).
		line = strings.Clone(line)
		tag, rest, _ := strings.Cut(line, " ")
		switch tag {
		case "M":
			sawMeminfo = true
			k, n, ok, err := meminfoValue(rest)
			if err != nil {
				return nil, err
			}
			if ok {
				meminfo[k] = n
			}
		case "H":
			f.Hostname = rest
		case "K":
			f.Kernel = rest
		case "U":
			f.User = rest
		case "I":
			f.IsRoot = strings.TrimSpace(rest) == "0"
		case "S":
			k, v, _ := strings.Cut(rest, " ")
			f.Sysctl[k] = strings.TrimSpace(v)
		case "W":
			f.SysctlWritable = rest == "1"
		case "R":
			minFreeKB = rest
		case "N":
			id, v, _ := strings.Cut(rest, " ")
			node, err := ParseInt("NUMA node number", id, 0, MaxNUMANode)
			if err != nil {
				return nil, err
			}
			var n int64
			if strings.TrimSpace(v) != "" { // empty: no pool of that size on the node
				if n, err = ParseInt(fmt.Sprintf("node%d nr_hugepages", node), v, 0, MaxPages); err != nil {
					return nil, err
				}
			}
			nodes[int(node)] = n
		case "P":
			p, err := parsePoolLine(rest)
			if err != nil {
				return nil, err
			}
			pools = append(pools, p)
		case "Q":
			n, err := parseNodePoolLine(rest)
			if err != nil {
				return nil, err
			}
			nodePools = append(nodePools, n)
		case "F":
			files = append(files, SysctlFile{Path: rest})
			cur = &files[len(files)-1]
		case "L":
			if cur != nil {
				cur.Lines = append(cur.Lines, rest)
			}
		case "E":
			// Unreadable file: it still masks its name, with no lines.
		case "X":
			curSet = rest
			setOut[curSet] = []byte{}
		case "Y":
			if curSet != "" {
				setOut[curSet] = append(append(setOut[curSet], rest...), '\n')
			}
		default:
			if isFileTag(tag) {
				prefetched.line(tag, rest)
			}
		}
	}
	if !sawMeminfo {
		return nil, fmt.Errorf("no /proc/meminfo in output")
	}
	f.MemTotal = meminfo["MemTotal"]
	f.MemAvailable = meminfo["MemAvailable"]
	f.HugePageSize = meminfo["Hugepagesize"]
	f.HugePagesTotal = meminfo["HugePages_Total"]
	f.HugePagesFree = meminfo["HugePages_Free"]
	f.HugePagesRsvd = meminfo["HugePages_Rsvd"]
	f.HugePagesSurp = meminfo["HugePages_Surp"]
	f.SwapTotal = meminfo["SwapTotal"]
	f.CommitLimit = meminfo["CommitLimit"]
	f.CommittedAS = meminfo["Committed_AS"]
	f.PageTables = meminfo["PageTables"]
	if f.MemTotal == 0 {
		return nil, fmt.Errorf("no MemTotal in /proc/meminfo")
	}
	if err := checkPoolSize(f); err != nil {
		return nil, err
	}
	if err := f.setKernelReserve(meminfo["SUnreclaim"], minFreeKB); err != nil {
		return nil, err
	}
	f.NUMANodes = len(nodes)
	if f.NUMANodes == 0 {
		f.NUMANodes = 1 // kernel without NUMA sysfs
	}
	if len(nodes) > 1 {
		f.NodeHugePages = nodes
	}
	if err := f.setPools(pools, nodePools); err != nil {
		return nil, err
	}
	f.SysctlFiles = SysctlSettings(OrderSysctlFiles(files), SysctlKeys(sets))
	mods, err := parseSets(sets, setOut)
	if err != nil {
		return nil, err
	}
	f.Modules = mods
	f.Files = prefetched.files()
	return f, nil
}

// ScopeVars returns the facts as the `facts` object of policy expressions,
// with the JSON field names (facts.mem_total, facts.hugepage_size, ...).
// Whole numbers stay exact integers.
func (f *Facts) ScopeVars() (map[string]any, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return numbers(m).(map[string]any), nil
}

func numbers(x any) any {
	switch t := x.(type) {
	case json.Number:
		if n, err := t.Int64(); err == nil {
			return n
		}
		fl, _ := t.Float64()
		return fl
	case map[string]any:
		for k, v := range t {
			t[k] = numbers(v)
		}
		return t
	case []any:
		for i, v := range t {
			t[i] = numbers(v)
		}
		return t
	}
	return x
}

// NodeList renders per-node huge pages as "node0=512 node1=512".
func (f *Facts) NodeList() string {
	ids := make([]int, 0, len(f.NodeHugePages))
	for id := range f.NodeHugePages {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("node%d=%d", id, f.NodeHugePages[id])
	}
	return strings.Join(parts, " ")
}

// MaxHugePageSize bounds Hugepagesize (1 TiB; the largest real one is
// 16 GiB).
const MaxHugePageSize = 1 << 40

// checkPoolSize keeps the huge page counts times the page size within
// MaxBytes, so that modules can multiply them.
func checkPoolSize(f *Facts) error {
	if _, err := ParseInt("meminfo Hugepagesize (bytes)", fmt.Sprint(f.HugePageSize), 0, MaxHugePageSize); err != nil {
		return err
	}
	limit := int64(MaxBytes) / max(f.HugePageSize, 1)
	for _, c := range []struct {
		name string
		n    int64
	}{{"HugePages_Total", f.HugePagesTotal}, {"HugePages_Free", f.HugePagesFree}, {"HugePages_Rsvd", f.HugePagesRsvd}, {"HugePages_Surp", f.HugePagesSurp}} {
		if c.n > limit {
			return &RangeError{What: "meminfo " + c.name, Value: fmt.Sprint(c.n), Min: 0, Max: limit}
		}
	}
	return nil
}

// ParseMeminfoLine reads one /proc/meminfo line: kB values come back in
// bytes, counts (HugePages_*) as they are. A line whose number is missing
// or out of range is not ok.
func ParseMeminfoLine(line string) (key string, n int64, ok bool) {
	key, n, ok, err := meminfoValue(line)
	return key, n, ok && err == nil
}

// ParseMeminfo reads /proc/meminfo as ParseMeminfoLine does, failing on
// the first value out of range.
func ParseMeminfo(data []byte) (map[string]int64, error) {
	m := map[string]int64{}
	for _, line := range strings.Split(string(data), "\n") {
		k, n, ok, err := meminfoValue(line)
		if err != nil {
			return nil, err
		}
		if ok {
			m[k] = n
		}
	}
	return m, nil
}

// meminfoValue parses "Key: N [kB]". Lines without a value are skipped
// (not ok); a value that is not a number in range is an error, so that a
// forged meminfo cannot overflow the kB → bytes conversion or pass for a
// real size.
func meminfoValue(line string) (key string, n int64, ok bool, err error) {
	fields := strings.Fields(line)
	if len(fields) < 2 {
		return "", 0, false, nil
	}
	key = strings.TrimSuffix(fields[0], ":")
	kB := len(fields) > 2 && fields[2] == "kB"
	limit := int64(MaxPages)
	if kB {
		limit = MaxKB
	}
	n, err = ParseInt("meminfo "+key, fields[1], 0, limit)
	if err != nil {
		return "", 0, false, err
	}
	if kB {
		n *= 1024
	}
	return key, n, true, nil
}

// GatherHost is Gather and Discover in one round trip: the host's facts
// with its cluster (Postgres, PostgresIgnored) or why none was found
// (PostgresError). An error is the gather's own: the host's facts could
// not be read at all.
func GatherHost(ctx context.Context, t transport.Transport, opts Options) (*Facts, error) {
	if err := CheckSets(opts.Sets); err != nil {
		return nil, fmt.Errorf("gather facts: %w", err)
	}
	overrideErr := checkOverrides(opts)
	nonce := discoveryNonce()
	// ask is the request on stdin (empty: no discovery); with owner, the
	// runs as the cluster owner (the topology query, the modules'
	// OwnerRuns) are run ahead too, where the script can tell the
	// configuration file as the controller will (prerun.go).
	ask := func(owner bool) []byte {
		if overrideErr != nil {
			return nil
		}
		return []byte("discover\n" + opts.PGData + "\n" + opts.PGBin + "\n" + nonce + "\n" +
			preRunRequest(opts.Sets, opts.RunAhead, owner) + "\n")
	}
	owner := opts.PGConfigFile == "" && overrideErr == nil
	args := append([]string{"sh", "-c", GatherScript(opts.Sets), "sh"}, SysctlKeys(opts.Sets)...)
	res, err := t.Run(ctx, transport.Command{Args: args, Stdin: ask(owner), Become: opts.Become})
	if err != nil && owner && ctx.Err() == nil &&
		(errors.Is(err, transport.ErrOutputTooLarge) || errors.Is(err, transport.ErrNoResponse)) {
		// The runs as the owner are the cluster owner's code in the
		// gather's session: output past the cap, or a process one left
		// holding the session open, is the owner's doing as likely as the
		// host's. The gather again without them, so that those fail (each
		// then a session of its own, as before) and not the host's facts.
		// (A run that never ends holds the gather as it would hold its
		// own session: no step has a deadline of its own.)
		res, err = t.Run(ctx, transport.Command{Args: args, Stdin: ask(false), Become: opts.Become})
	}
	if err != nil {
		return nil, fmt.Errorf("gather facts: %w", err)
	}
	f, err := ParseGather(gatherPart(res.Stdout, nonce), opts.Sets...)
	if err != nil {
		return nil, fmt.Errorf("gather facts: %w", err)
	}
	if overrideErr != nil {
		f.PostgresError = overrideErr.Error()
		return f, nil
	}
	blocks, ran, answered, err := discoveryAnswer(res.Stdout, nonce, opts.Become)
	if err != nil {
		f.PostgresError = fmt.Errorf("discover postgres: %w", err).Error()
		return f, nil
	}
	var pg *Postgres
	var ignored []string
	if answered {
		pg, ignored, err = choosePostgres(blocks, opts)
		if errors.Is(err, errListClusters) {
			pg, ignored, err = discover(ctx, t, opts, true)
		}
	} else {
		// The answer came without the discovery tail (a host that
		// answers the gather alone, as the tests' fake hosts do): ask
		// on its own, as before the two were one round trip.
		pg, ignored, err = Discover(ctx, t, opts)
	}
	if err != nil {
		f.PostgresError = err.Error()
	}
	f.Postgres, f.PostgresIgnored = pg, ignored
	if pg != nil && pg.Running {
		f.Ran = ran
	}
	return f, nil
}

// gatherPart is the gather's own lines of GatherHost's output: what comes
// before the discovery's "D NONCE" line. The discovery's records are host
// text with line breaks in it (a directory's name, a binary's version):
// parsed as gather lines they could set any fact.
func gatherPart(out []byte, nonce string) []byte {
	start := []byte("D " + nonce + "\n")
	if bytes.HasPrefix(out, start) {
		return nil
	}
	if i := bytes.Index(out, append([]byte("\n"), start...)); i >= 0 {
		return out[:i+1]
	}
	return out
}

// discoveryNonce is the delimiter of one run's discovery answer: 128
// random bits in hex, which no host can guess.
func discoveryNonce() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("discovery nonce: %v", err)) // crypto/rand does not fail on Linux
	}
	return "pgtune-" + hex.EncodeToString(b[:])
}

// discoveryAnswer cuts the discovery's records out of GatherHost's
// output: what is between the "D NONCE" line and the last line, "NONCE
// STATUS"; answered is false when there is no "D NONCE" line. Either line
// appears once, or the answer is refused.
func discoveryAnswer(out []byte, nonce string, become bool) (blocks []block, ran *Ran, answered bool, err error) {
	start := []byte("\nD " + nonce + "\n")
	i := bytes.Index(out, start)
	if i < 0 {
		if bytes.HasPrefix(out, start[1:]) {
			i = -1 // the output starts with it (not from the gather script)
		} else {
			return nil, nil, false, nil
		}
	}
	body := out[i+len(start):]
	if bytes.Contains(body, start[1:]) {
		return nil, nil, true, fmt.Errorf("malformed answer: the discovery's start line twice")
	}
	// The records, the frames of the commands run ahead (prerun.go), and
	// the last line: "NONCE STATUS".
	parts := bytes.Split(body, []byte("\n"+nonce+" "))
	if len(parts) < 2 {
		return nil, nil, true, fmt.Errorf("malformed answer: the discovery's answer was cut short")
	}
	status, rest, _ := bytes.Cut(parts[len(parts)-1], []byte("\n"))
	frames := parts[1 : len(parts)-1]
	if len(bytes.TrimSpace(rest)) != 0 || bytes.Contains(rest, []byte(nonce)) {
		if len(frames) == 0 {
			return nil, nil, true, fmt.Errorf("malformed answer: output after the discovery's answer")
		}
		// After commands run ahead, only a process one of them left
		// behind writes there (it has no nonce): their answers are
		// dropped, the discovery's records stand.
		frames = nil
	}
	if string(status) != "0" {
		return nil, nil, true, fmt.Errorf("the discovery script failed (status %.10q)", status)
	}
	return parseBlocks(parts[0]), parsePreRuns(frames, become), true, nil
}
