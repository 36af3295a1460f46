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
//   - run_how PATH prints how run_bin would run PATH, with the least
//     privilege that works: "owner" (we are root: drop to the cluster owner
//     $owner, never uid 0), "self" (we are the owner; or PATH is in the
//     inventory's pg_bin), "trusted" (as ourselves, root included, only
//     when bin_trusted); it fails when PATH may not run at all.
//   - run_bin PATH ARGS... runs it that way, or refuses (status 126, the
//     reason on stderr).
//
// The script defines $owner (a user name) before calling run_bin; a
// directory named in $trusted_dir (the inventory's pg_bin) skips the
// ownership check, since the controller vouches for it.
const RunBinFn = `bin_trusted() {
  bt_r=$(readlink -f -- "$1" 2>/dev/null) || return 1
  case $bt_r in /*) ;; *) return 1;; esac
  [ -f "$bt_r" ] || return 1
  bt_p=$bt_r
  while :; do
    bt_s=$(stat -c '%u %A' -- "$bt_p" 2>/dev/null) || return 1
    case $bt_s in
    "0 "?????w*|"0 "????????w*) return 1;;
    "0 "*) ;;
    *) return 1;;
    esac
    [ "$bt_p" = / ] && break
    bt_p=${bt_p%/*}
    [ -n "$bt_p" ] || bt_p=/
  done
  printf '%s\n' "$bt_r"
}
# uids: rh_me is ours, rh_uid $owner's (rh_for says whose), each asked
# of id once per script, not once per run.
# Call rh_ids in the main shell before $(run_how ...) or $(run_bin ...):
# what a command substitution's subshell learns dies with it.
rh_me= rh_for=- rh_uid=
rh_ids() {
  [ -n "$rh_me" ] || rh_me=$(id -u)
  if [ "$rh_for" != "$owner" ]; then
    rh_uid= rh_for=$owner
    if [ -n "$owner" ]; then rh_uid=$(id -u -- "$owner" 2>/dev/null) || rh_uid=; fi
  fi
}
run_how() {
  rh_ids
  case $rh_uid in
  ''|0) ;;
  *)
    if [ "$rh_me" = "$rh_uid" ]; then echo self; return 0; fi
    if [ "$rh_me" = 0 ] && command -v runuser >/dev/null 2>&1; then echo owner; return 0; fi;;
  esac
  if [ -n "$trusted_dir" ] && [ "${1%/*}" = "${trusted_dir%/}" ]; then echo self; return 0; fi
  if bin_trusted "$1" >/dev/null; then echo trusted; return 0; fi
  return 1
}
run_bin() {
  rb_bin=$1
  shift
  case $(run_how "$rb_bin") in
  self) "$rb_bin" "$@";;
  owner) runuser -u "$owner" -- "$rb_bin" "$@";;
  trusted) rb_real=$(bin_trusted "$rb_bin") && "$rb_real" "$@";;
  *)
    printf 'pgtune: not running %s: it or a directory above it may be changed by a user other than root, and it cannot run as the cluster owner (%s)\n' "$rb_bin" "${owner:-unknown}" >&2
    return 126;;
  esac
}
`
