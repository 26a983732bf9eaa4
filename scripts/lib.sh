# Sourced by the scripts in this folder.

# require_root WHAT: return when this is root or sudo is installed; else stop with one line naming WHAT.
require_root() {
  if [ "$(id -u)" -eq 0 ] || command -v sudo >/dev/null 2>&1; then
    return 0
  fi
  echo "$(basename "$0"): $1 needs root and sudo is not installed; fix: run this command as root" >&2
  exit 1
}

# as_root CMD...: run CMD as root: directly when this is root, through sudo when it is installed, else stop
# with one line naming the command (CMD may start with `env VAR=value ...`).
as_root() {
  local name
  for name in "$@"; do
    case "$name" in env|*=*) continue ;; *) break ;; esac
  done
  require_root "'$name'"
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  else
    sudo "$@"
  fi
}
