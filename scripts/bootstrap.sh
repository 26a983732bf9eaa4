#!/usr/bin/env bash
# Installs what innotier needs on a fresh Debian 12 machine, and nothing that is already there.
#   - apt packages (needs root): MariaDB server/client/backup, sysbench, fio, Prometheus and two exporters,
#     percona-toolkit, apparmor (apparmor_parser), systemd (systemd-analyze), file-system tools, python3-venv,
#     openssh-server + iproute2 (the fleet tests start their own sshd in network namespaces they make),
#     and for the lab VM (`innotier lab`: real PMEM and md RAID drivers) qemu, busybox, cpio
#   - a virtualenv in .venv with innotier and its Python dependencies (no root needed)
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  mariadb-server mariadb-client mariadb-backup
  sysbench fio percona-toolkit
  prometheus prometheus-node-exporter prometheus-mysqld-exporter
  apparmor systemd
  openssh-server openssh-client iproute2
  e2fsprogs xfsprogs btrfs-progs f2fs-tools util-linux kmod
  python3 python3-venv python3-pip
  debootstrap zstd   # server trees of MySQL 9.7 / MariaDB 11.8 from Debian sid/trixie (innotier server install)
  qemu-system-x86 qemu-utils busybox-static cpio   # the lab VM (innotier lab: real PMEM and md RAID drivers)
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "bootstrap: these Debian packages are missing and installing them needs root: ${missing[*]}" >&2
    echo "bootstrap: run this command again with sudo" >&2
    exit 1
  fi
  echo "bootstrap: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # the packages' own services are not needed (innotier starts private servers, the fleet tests their own
  # sshd): without systemd, a temporary policy-rc.d keeps the maintainer scripts from starting them
  policy=""
  if [ ! -d /run/systemd/system ] && [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && policy=1
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  [ -n "$policy" ] && rm -f /usr/sbin/policy-rc.d
  if [ -d /run/systemd/system ]; then
    systemctl disable --now mariadb prometheus prometheus-node-exporter prometheus-mysqld-exporter ssh >/dev/null 2>&1 || true
  fi
fi

PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "bootstrap: innotier needs Python 3.11 or newer; $("$PY" --version 2>&1) found (Debian 12 ships 3.11)" >&2
  exit 1
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.innotier-installed
if [ ! -f "$stamp" ] || [ setup.cfg -nt "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "bootstrap: installing innotier and its Python dependencies into .venv"
  .venv/bin/python -m pip install -q --upgrade pip setuptools wheel
  .venv/bin/python -m pip install -q -e '.[test]'
  touch "$stamp"
fi
