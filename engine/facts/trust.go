package facts

// RunBinFn is shell text, for pgtune's fixed scripts, defining how a
// binary found on a host (postgres, pg_isready, pg_config, ...) may be run.
// A host's binaries are input like any other host data: whoever can change
// the file, or rename any directory above it, chooses what runs. So:
//
//   - bin_trusted PATH succeeds when PATH resolves (every symlink
//     followed) to a regular file that, with every directory of its real
//     path up to /, is owned by root and writable by neither group nor
//     others (a group write bit also stands for an ACL granting writes:
//     the ACL mask shows there). It prints the real path: exec that, not
//     PATH, so a link swapped after the check is never followed.
//   - how_of PATH sets rh_how to how run_bin would run PATH, with the least
//     privilege that works: "owner" (we are root: drop to the cluster owner
//     $owner, never uid 0), "self" (we are the owner; or PATH is in the
//     inventory's pg_bin), "trusted" (as ourselves, root included, only
//     when bin_trusted); it fails when PATH may not run at all. It
//     needs no subshell.
//   - run_bin PATH ARGS... runs it that way, or refuses (status 126, the
//     reason on stderr). Inside a command substitution, with
//     sw_exec=exec, the subshell becomes the binary (or the switch to
//     the owner) instead of forking it.
//
// The script defines $owner (a user name) before calling run_bin; a
// directory named in $trusted_dir (the inventory's pg_bin) skips the
// ownership check, since the controller vouches for it. It brings
// SwitchOwnerFn (rh_ids, sw_owner) with it: how_of without rh_ids
// would take every binary for root's.
const RunBinFn = SwitchOwnerFn + `bin_trusted() {
  bt_r=$(readlink -f -- "$1" 2>/dev/null) || return 1
  case $bt_r in /*) ;; *) return 1;; esac
  [ -f "$bt_r" ] || return 1
  # The file and every directory up to /: one stat for all, a line each
  # (no name in it: a path cannot forge one).
  set -- "$bt_r"
  bt_p=$bt_r
  while [ "$bt_p" != / ]; do
    bt_p=${bt_p%/*}
    [ -n "$bt_p" ] || bt_p=/
    set -- "$@" "$bt_p"
  done
  bt_n=$#
  bt_s=$(stat -c '%u %A' -- "$@" 2>/dev/null) || return 1
  while IFS= read -r bt_l; do
    case $bt_l in
    "0 "?????w*|"0 "????????w*) return 1;;
    "0 "*) ;;
    *) return 1;;
    esac
    bt_n=$((bt_n-1))
  done <<BTSTAT
$bt_s
BTSTAT
  [ "$bt_n" = 0 ] || return 1
  printf '%s\n' "$bt_r"
}
how_of() {
  rh_ids
  rh_how=
  case $rh_uid in
  ''|0) ;;
  *)
    if [ "$rh_me" = "$rh_uid" ]; then rh_how=self; return 0; fi
    if [ "$rh_me" = 0 ] && command -v runuser >/dev/null 2>&1; then rh_how=owner; return 0; fi;;
  esac
  if [ -n "$trusted_dir" ] && [ "${1%/*}" = "${trusted_dir%/}" ]; then rh_how=self; return 0; fi
  if bin_trusted "$1" >/dev/null; then rh_how=trusted; return 0; fi
  return 1
}
run_bin() {
  rb_bin=$1
  shift
  how_of "$rb_bin"
  case $rh_how in
  self) $sw_exec "$rb_bin" "$@";;
  owner) sw_owner "$rb_bin" "$@";;
  trusted) rb_real=$(bin_trusted "$rb_bin") && $sw_exec "$rb_real" "$@";;
  *)
    printf 'pgtune: not running %s: it or a directory above it may be changed by a user other than root, and it cannot run as the cluster owner (%s)\n' "$rb_bin" "${owner:-unknown}" >&2
    return 126;;
  esac
}
`

// OwnerIDsFn is shell text defining rh_ids, which sets rh_me (our
// effective uid, from /proc/self/status) and, for $owner, rh_uid and,
// from the same /etc/passwd line, rh_gid and rh_home (rh_for says whose).
// Each is found once per script, not once per use, without a process
// where the shell can read it; id answers for what the files do not say
// (rh_gid and rh_home then stay empty). Call rh_ids in the main shell
// before $(run_bin ...): what a command substitution's subshell learns
// dies with it.
const OwnerIDsFn = `rh_me= rh_for=- rh_uid= rh_gid= rh_home=
rh_ids() {
  if [ -z "$rh_me" ]; then
    while read -r rh_k rh_r rh_e rh_rest; do
      if [ "$rh_k" = Uid: ]; then rh_me=$rh_e; break; fi
    done 2>/dev/null < /proc/self/status
    case $rh_me in ''|*[!0-9]*) rh_me=$(id -u);; esac
  fi
  if [ "$rh_for" != "$owner" ]; then
    rh_uid= rh_gid= rh_home= rh_for=$owner
    if [ -n "$owner" ]; then
      while IFS=: read -r rh_n rh_x rh_u rh_g rh_c rh_h rh_rest; do
        if [ "$rh_n" = "$owner" ]; then rh_uid=$rh_u rh_gid=$rh_g rh_home=$rh_h; break; fi
      done 2>/dev/null < /etc/passwd
      case $rh_uid in ''|*[!0-9]*) rh_uid=$(id -u -- "$owner" 2>/dev/null) || rh_uid=; rh_gid= rh_home=;; esac
    fi
  fi
}
`

// SwitchOwnerFn is shell text defining rh_ids (OwnerIDsFn) and sw_owner
// CMD ARGS...: root runs CMD as the cluster owner $owner with setpriv,
// with the owner's group and supplementary groups and the HOME, USER and
// LOGNAME runuser would give it, when /etc/passwd lists the owner and
// setpriv is there; else with runuser. setpriv opens no PAM session
// (runuser's costs about three times as much), so it is for commands that
// start nothing that outlives them: a server started so would miss the
// session's limits (restarts keep runuser). A script whose last command
// is the switch sets sw_exec=exec just before it: the shell then becomes
// the switch instead of forking it and waiting.
const SwitchOwnerFn = OwnerIDsFn + `sw_exec=
sw_owner() {
  rh_ids
  # By number, from the passwd line rh_ids read (a name could resolve
  # elsewhere through NSS): a decimal uid other than 0, a decimal gid.
  sw_ok=1
  case $rh_uid in ''|0*|*[!0-9]*) sw_ok=;; esac
  case $rh_gid in ''|*[!0-9]*) sw_ok=;; esac
  case $rh_home in /*) ;; *) sw_ok=;; esac
  if [ -n "$sw_ok" ] && command -v setpriv >/dev/null 2>&1; then
    HOME=$rh_home USER=$owner LOGNAME=$owner $sw_exec setpriv --reuid="$rh_uid" --regid="$rh_gid" --init-groups -- "$@"
  else $sw_exec runuser -u "$owner" -- "$@"; fi
}
`
