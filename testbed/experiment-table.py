#!/usr/bin/env python3
"""Collects the per-run result.json files of the OOM experiment into
state/experiment.json and prints them side by side.
Usage: experiment-table.py STATE_DIR LABEL..."""
import json, sys
state, labels = sys.argv[1], sys.argv[2:]
res = {l: json.load(open(f"{state}/experiment-{l}/result.json")) for l in labels}
# The policy as the box showed it after `pgtune apply` (key=value lines).
try:
    res["policy_after_apply"] = dict(l.rstrip("\n").split("=", 1) for l in open(f"{state}/experiment-policy.txt") if "=" in l)
except FileNotFoundError:
    pass
json.dump(res, open(f"{state}/experiment.json", "w"), indent=2)
rows = [("OOM kills", "oom_kills"), ("postmaster restarted", "postmaster_restarted"),
        ("idle sessions dropped", "sessions_dropped"), ("failed probes", "probe_failures"),
        ("outage (s)", "outage_seconds"), ("server back by itself", "server_recovered"),
        ("postgres unit after", "postgres_unit_after"), ("ERROR: out of memory", "oom_errors"),
        ("loader sessions started", "loader_sessions"), ("CommitLimit (MiB)", "commit_limit_kb"),
        ("peak Committed_AS (MiB)", "peak_committed_as_kb"), ("min MemAvailable (MiB)", "min_mem_available_kb")]
def fmt(k, v):
    return f"{v/1024:.0f}" if k.endswith("_kb") else str(v).lower() if isinstance(v, bool) else str(v)
print(f"{'':26}" + "".join(f"{l:>16}" for l in labels))
for name, k in rows:
    print(f"{name:26}" + "".join(f"{fmt(k, res[l].get(k)):>16}" for l in labels))
