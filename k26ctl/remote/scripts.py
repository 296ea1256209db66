"""Small POSIX sh programs run on the host with `sh -c SCRIPT k26ctl ARG...`.

Arguments are passed as positional parameters, never spliced into the script text, so no value needs
quoting beyond what shlex does for the argv. Only coreutils, util-linux flock and sh are assumed.
"""

from __future__ import annotations

MISSING = 44  # exit code meaning "the file does not exist"
INCOMPLETE = 65  # the upload's checksum did not match: the transfer was cut short
LOCK_BUSY = 75

READ = r"""
[ -e "$1" ] || exit 44
exec cat -- "$1"
"""

SHA256 = r"""
[ -e "$1" ] || exit 44
sha256sum -- "$1" | cut -d' ' -f1
"""

# $1 path, $2 temp path (same directory), $3 expected sha256, $4 backup path or "", $5 octal mode or ""
# stdin: the new content. The rename happens only after the whole content arrived and was fsynced.
# Prints what it did: "unchanged" (the file already holds that content and mode; nothing written),
# "created" or "replaced" (then the backup, if asked for, was made).
WRITE = r"""
set -eu
path=$1 tmp=$2 want=$3 backup=$4 mode=$5
trap 'rm -f -- "$tmp"' EXIT
trap 'exit 143' HUP INT TERM
# a client that died leaves closed pipes: report by exit status, not by dying of SIGPIPE (which
# would skip the cleanup above)
trap '' PIPE
if [ -f "$path" ] && [ "$(sha256sum -- "$path" | cut -d' ' -f1)" = "$want" ] &&
  { [ -z "$mode" ] || [ "$(stat -c %a -- "$path")" = "$mode" ]; }; then
  cat > /dev/null
  echo unchanged
  exit 0
fi
umask 077
cat > "$tmp"
got=$(sha256sum -- "$tmp" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
  echo "k26ctl: upload of $path incomplete (checksum mismatch); old file left as it was" >&2
  exit 65
fi
outcome=created
if [ -e "$path" ]; then
  outcome=replaced
  chown --reference="$path" -- "$tmp" 2>/dev/null || true
  chmod --reference="$path" -- "$tmp"
  if [ -n "$backup" ]; then
    ln -- "$path" "$backup" 2>/dev/null || cp -p -- "$path" "$backup"
  fi
else
  chmod 0644 -- "$tmp"
fi
if [ -n "$mode" ]; then chmod "$mode" -- "$tmp"; fi
sync -- "$tmp"
mv -f -- "$tmp" "$path"
trap - EXIT
sync -- "$(dirname -- "$path")" 2>/dev/null || true
echo "$outcome"
"""

# $1 lock file, $2 info file, $3 holder text, $4 wait seconds ("0": do not wait), $5 lease seconds
# Prints LOCKED + since/pid/login/lease and holds the flock while the client keeps talking: each line
# on stdin is a heartbeat that renews the lease. EOF (a release, or a connection that closed) frees it
# at once; `lease` seconds without a line (the client or its link died while sshd keeps the session
# open) free it too. fd 9 is closed in the reader so nothing but this shell holds the flock.
LOCK = r"""
lock=$1 info=$2 holder=$3 wait=$4 lease=$5
exec 9>>"$lock" || exit 1
if [ "$wait" = 0 ]; then flock -n 9; else flock -w "$wait" 9; fi
if [ $? -ne 0 ]; then
  echo BUSY
  cat -- "$info" 2>/dev/null
  exit 75
fi
since=$(date -u +%Y-%m-%dT%H:%M:%SZ)
login="$(id -un)@$(hostname)"
fields=$(printf 'since=%s\npid=%s\nlogin=%s\nlease=%s' "$since" "$$" "$login" "$lease")
printf 'holder=%s\n%s\n' "$holder" "$fields" > "$info.$$"
mv -f -- "$info.$$" "$info"
printf 'LOCKED\n%s\n' "$fields"
while beat=$(timeout "$lease" head -n 1 9>&-) && [ -n "$beat" ]; do :; done
rm -f -- "$info"
"""

# Runs "$@" and kills it when our stdin reaches EOF, so closing the stream stops e.g. `journalctl -f`
# at once instead of at its next write.
UNTIL_STDIN_EOF = r"""
exec 3<&0
"$@" < /dev/null &
child=$!
{ cat <&3 > /dev/null 2>&1; kill "$child" 2>/dev/null; } 2>/dev/null &
watcher=$!
wait "$child"
rc=$?
kill "$watcher" 2>/dev/null
exit $rc
"""


def sh(script: str, *args: str) -> list[str]:
    """argv running `script` with positional parameters `args`."""
    return ["sh", "-c", script, "k26ctl", *args]
