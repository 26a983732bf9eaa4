#!/usr/bin/env bash
# Installs what innotier needs on a fresh Debian 12 machine, and nothing that is already there.
#   - apt packages (needs root; through sudo when not root): MariaDB server/client/backup, sysbench, fio,
#     Prometheus and two exporters, percona-toolkit, apparmor (apparmor_parser), systemd (systemd-analyze),
#     file-system tools, python3-venv, openssh-server + iproute2 (the fleet tests start their own sshd in
#     network namespaces they make), debootstrap + zstd (`innotier server install`: MySQL 9.7 and MariaDB 11.8
#     trees), and for the lab VM (`innotier lab`: real PMEM and md RAID drivers) qemu, busybox, cpio
#   - a virtualenv in .venv with innotier and its Python dependencies (no root needed), installed from a
#     per-machine wheel cache ($INNOTIER_CACHE/wheels; /var/cache/innotier for root, else ~/.cache/innotier)
#     that the first run fills, so later set-ups (fresh checkouts, CI copies) do not download again
# Safe to run again: it only installs what is missing.  Prints a short summary; apt's and pip's output goes
# to the log file it names.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib.sh

started=$(date +%s)
mkdir -p out
LOG=$PWD/out/bootstrap.log
: > "$LOG"
installed=()

# step DESCRIPTION CMD...: run CMD with its output in the log; on failure show the log's tail and stop
step() {
  local what=$1; shift
  echo "== $what: $*" >> "$LOG"
  if ! "$@" >> "$LOG" 2>&1; then
    echo "bootstrap: $what failed; the last lines of $LOG:" >&2
    tail -n 15 "$LOG" >&2
    exit 1
  fi
}

APT_PACKAGES=(
  mariadb-server mariadb-client mariadb-backup
  sysbench fio percona-toolkit
  prometheus prometheus-node-exporter prometheus-mysqld-exporter
  apparmor systemd
  openssh-server openssh-client iproute2
  e2fsprogs xfsprogs btrfs-progs f2fs-tools util-linux kmod
  python3 python3-venv python3-pip
  debootstrap zstd   # server trees of MySQL 9.7 / MariaDB 11.8 from Debian sid/trixie (innotier server install)
  qemu-system-x86 qemu-utils mmdebstrap busybox-static cpio   # the lab VM (innotier lab: real PMEM and md RAID drivers)
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  require_root "installing the Debian packages ${missing[*]}"
  echo "bootstrap: installing Debian packages: ${missing[*]}"
  step "apt-get update" as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  # the packages' own services are not needed (innotier starts private servers, the fleet tests their own
  # sshd): without systemd, a temporary policy-rc.d keeps the maintainer scripts from starting them
  if [ ! -d /run/systemd/system ] && [ ! -e /usr/sbin/policy-rc.d ]; then
    as_root sh -c 'printf "#!/bin/sh\nexit 101\n" > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d'
    trap 'as_root rm -f /usr/sbin/policy-rc.d' EXIT
  fi
  step "apt-get install" as_root env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
  if [ -d /run/systemd/system ]; then
    as_root systemctl disable --now mariadb prometheus prometheus-node-exporter prometheus-mysqld-exporter ssh \
      >> "$LOG" 2>&1 || true
  fi
  installed+=("${#missing[@]} Debian packages")
fi

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "bootstrap: innotier needs Python 3.11 or newer; $("$PY" --version 2>&1) found (Debian 12 ships 3.11)" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  step "python3 -m venv" "$PY" -m venv .venv
  installed+=("a virtualenv in .venv")
fi

if [ -n "${INNOTIER_CACHE:-}" ]; then
  cache=$INNOTIER_CACHE
elif [ "$(id -u)" -eq 0 ]; then
  cache=/var/cache/innotier
else
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/innotier
fi
WHEELS=$cache/wheels
stamp=.venv/.innotier-installed
if [ ! -f "$stamp" ] || [ setup.cfg -nt "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "bootstrap: installing innotier and its Python dependencies into .venv (wheels cached in $WHEELS)"
  mkdir -p "$WHEELS"
  pip=(.venv/bin/python -m pip --disable-pip-version-check)
  before=$("${pip[@]}" list --format=freeze 2>/dev/null | wc -l)
  # offline from the wheel cache when it has everything; otherwise fill it from the index first (the
  # project's own wheel is not kept: it is installed editable from this checkout)
  if ! "${pip[@]}" install --no-index --find-links "$WHEELS" --upgrade pip setuptools wheel >> "$LOG" 2>&1 \
     || ! "${pip[@]}" install --no-index --find-links "$WHEELS" -e '.[test]' >> "$LOG" 2>&1; then
    echo "bootstrap: the wheel cache lacks some packages; downloading them once"
    step "pip download" "${pip[@]}" download -d "$WHEELS" pip setuptools wheel
    step "pip wheel" "${pip[@]}" wheel -w "$WHEELS" '.[test]'
    rm -f "$WHEELS"/innotier-*.whl
    step "pip install pip" "${pip[@]}" install --no-index --find-links "$WHEELS" --upgrade pip setuptools wheel
    step "pip install innotier" "${pip[@]}" install --no-index --find-links "$WHEELS" -e '.[test]'
  fi
  after=$("${pip[@]}" list --format=freeze 2>/dev/null | wc -l)
  what="innotier $(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("innotier"))')"
  if [ $((after - before)) -gt 0 ]; then what="$what and $((after - before)) other Python packages"; fi
  installed+=("$what")
  touch "$stamp"
fi

took=$(( $(date +%s) - started ))
if [ ${#installed[@]} -eq 0 ]; then
  echo "bootstrap: nothing was missing (${took} s)"
else
  summary=$(printf '%s, ' "${installed[@]}")
  echo "bootstrap: installed ${summary%, } in ${took} s; full log: $LOG"
fi
