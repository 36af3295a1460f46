// Package facts gathers, in one round trip per host, what pgtune knows of a
// host: its core memory facts, the kernel keys and module facts the modules
// declare (Set), and its PostgreSQL cluster.
package facts

// Facts is what pgtune knows about one host. Sizes are in bytes.
//
// The core fields are every module's concern (memory, the kernel keys the
// modules declare, the cluster they all size against); Modules holds the
// facts each module declared for itself.
//
// Fields tagged expr:"text" are strings that are never a number: validate
// checks expressions as if they held a word (expr.UnknownOf).
type Facts struct {
	Hostname string `json:"hostname" expr:"text"`
	Kernel   string `json:"kernel" expr:"text"`
	User     string `json:"user" expr:"text"` // login user
	IsRoot   bool   `json:"is_root"`

	MemTotal       int64 `json:"mem_total"`
	MemAvailable   int64 `json:"mem_available"`
	HugePageSize   int64 `json:"hugepage_size"`
	HugePagesTotal int64 `json:"hugepages_total"` // pages
	HugePagesFree  int64 `json:"hugepages_free"`  // pages
	HugePagesRsvd  int64 `json:"hugepages_rsvd"`  // pages
	HugePagesSurp  int64 `json:"hugepages_surp"`  // pages
	SwapTotal      int64 `json:"swap_total"`
	CommitLimit    int64 `json:"commit_limit"`
	CommittedAS    int64 `json:"committed_as"`
	PageTables     int64 `json:"page_tables"`
	// MinFree is vm.min_free_kbytes in bytes and SUnreclaim the slab the
	// kernel cannot reclaim: memory outside the commit budget that no
	// process can have (see reserve.go).
	MinFree    int64 `json:"min_free"`
	SUnreclaim int64 `json:"sunreclaim"`

	// Sysctl holds the live value of each kernel key a module declares
	// (Set.Sysctls), as the kernel prints it.
	Sysctl map[string]string `json:"sysctl"`
	// SysctlWritable is false where those keys cannot be written: a
	// read-only /proc/sys (containers) or no privileges.
	SysctlWritable bool `json:"sysctl_writable"`
	// SysctlFiles lists every assignment of a declared key found in the
	// sysctl configuration directories, in the order systemd-sysctl applies
	// them (the last one wins at boot).
	SysctlFiles []SysctlSetting `json:"sysctl_files"`

	NUMANodes int `json:"numa_nodes"`
	// NodeHugePages is nr_hugepages per NUMA node (by node number) for the
	// default huge page size; empty on single-node hosts.
	NodeHugePages map[int]int64 `json:"node_hugepages,omitempty"`
	// HugePagePools is every huge page size the kernel offers
	// (/sys/kernel/mm/hugepages), smallest first; NodePools is each NUMA
	// node's share of each, by size then node (see pools.go).
	HugePagePools []HugePagePool `json:"hugepage_pools,omitempty"`
	NodePools     []NodePool     `json:"node_pools,omitempty"`

	// Postgres is the cluster pgtune manages on this host; nil when none
	// was found (PostgresError says why). It is a core fact, not one
	// module's: every module sizes against the cluster (the pool under its
	// shared memory, its configuration, the commit budget around it), and
	// discovery decides which binaries pgtune will run as root, so it is
	// done once, by the engine, with the inventory's overrides.
	Postgres      *Postgres `json:"postgres"`
	PostgresError string    `json:"postgres_error,omitempty"`
	// PostgresIgnored has a note for each process named postgres that
	// discovery ignored as not a postmaster (and did not run).
	PostgresIgnored []string `json:"postgres_ignored,omitempty"`

	// Modules holds each module's declared facts (Set) by module name.
	// They encode beside the core fields, so that expressions read them
	// as facts.<module>.<fact>.
	Modules map[string]any `json:"-"`

	// Files holds the declared files (Set.Files) the gather read, by
	// path (files.go). Never shown: it is only a cache for check.
	Files map[string]PrefetchedFile `json:"-"`

	// Ran holds the answers of the commands the gather ran ahead for the
	// running postmaster (prerun.go): a cache for the check, never shown.
	Ran *Ran `json:"-"`

	// Topology is the running cluster's place in replication (role,
	// upstream, standbys, Patroni); nil when no server runs or it could
	// not be asked (TopologyError says why). See topology.go.
	Topology      *Topology `json:"topology,omitempty"`
	TopologyError string    `json:"topology_error,omitempty"`
}

// Module returns the facts module name declared, nil when none.
func (f *Facts) Module(name string) any {
	if f == nil {
		return nil
	}
	return f.Modules[name]
}

// SysctlSetting is one `key = value` line in a sysctl configuration file.
type SysctlSetting struct {
	File  string `json:"file"`
	Line  int    `json:"line"`
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Postgres describes one cluster.
type Postgres struct {
	// Source says how the cluster was found: inventory, postmaster,
	// pg_lsclusters.
	Source     string `json:"source"`
	DataDir    string `json:"data_dir"`
	BinDir     string `json:"bin_dir"`     // directory holding postgres, pg_ctl
	ConfigFile string `json:"config_file"` // active postgresql.conf
	Version    string `json:"version"`     // full, e.g. "15.18"
	Major      int    `json:"major"`       // e.g. 15
	Owner      string `json:"owner"`       // owner of the data directory
	Running    bool   `json:"running"`
	PID        int    `json:"pid,omitempty"` // postmaster
	Port       int    `json:"port,omitempty"`
	// SocketDir is the first unix_socket_directories entry of the running
	// server (postmaster.pid), where psql connects as the owner.
	SocketDir string `json:"socket_dir,omitempty"`
	// HugetlbPages is HugetlbPages from the postmaster's /proc/PID/status
	// (bytes): > 0 means its shared memory sits on huge pages.
	HugetlbPages int64 `json:"hugetlb_pages"`
	// StartTime is the postmaster's start time in clock ticks since boot
	// (/proc/PID/stat field 22): it changes exactly when postgres restarts.
	StartTime int64 `json:"start_time,omitempty"`
	// WALReceiver are the established TCP connections of a running
	// standby's WAL receiver, read as root from the kernel (walrecv.go),
	// and WALReceiverRead whether they could be read: they tie the
	// standby to its upstream's WAL sender (topology.Match).
	WALReceiver     []Conn `json:"wal_receiver,omitempty"`
	WALReceiverRead bool   `json:"wal_receiver_read,omitempty"`
	// WALReceiverSockets are the inodes of the sockets its WAL receiver
	// holds, read with them: one that is the other end of a WAL sender's
	// unix socket ties the standby to that sender (walsend.go).
	WALReceiverSockets []uint64 `json:"wal_receiver_sockets,omitempty"`
	// Cluster is Debian's cluster name (e.g. "main") when known.
	Cluster string `json:"cluster,omitempty"`
	// BinFromInventory says BinDir is the inventory's pg_bin, whose
	// binaries are trusted as the controller's choice (RefreshPostgres).
	BinFromInventory bool `json:"-"`
}

// Options are the inventory's say in gathering.
type Options struct {
	// Become reads privileged files through sudo -n.
	Become bool
	// PGData, PGBin and PGConfigFile override cluster discovery
	// (inventory keys pg_data, pg_bin, pg_config_file).
	PGData, PGBin, PGConfigFile string
	// Sets are the modules' declared facts, gathered in the same round
	// trip.
	Sets []Set
	// RunAhead names the sets whose PostmasterRuns GatherHost runs ahead
	// (prerun.go): the modules the play runs. The topology query is
	// always run ahead.
	RunAhead []string
}
