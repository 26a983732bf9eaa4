# Sourced by the scripts in this folder.

# as_root CMD...: run CMD as root: directly when this is root, through sudo when it is installed,
# else stop with one line saying what needed root and how to get it.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "$(basename "$0"): '$1' needs root and sudo is not installed; fix: run this command as root" >&2
    exit 1
  fi
}
