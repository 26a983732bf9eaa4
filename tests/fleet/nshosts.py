"""Several "hosts" on this machine: network namespaces, each with its own sshd, INNOTIER_HOME and tmpfs tier.

Layout (all addresses in 10.213.0.0/24, used only on the links made here)::

    root namespace: bridge itfbr0 10.213.0.1/24 (the controller: Ansible, Prometheus, the MariaDB under test)
      veth itfvN <-> eth0 in namespace itf-N: 10.213.0.(10+N)/24, lo up, sshd on :22

Every host gets, under one private directory: ``home/`` (its INNOTIER_HOME, named in the inventory's host
vars), ``tier/`` (its own tmpfs mount), ``ssh/`` (host key, authorized key = the test's key, sshd_config),
``root/`` (root's home directory as the host's sshd sees it).  ``ip netns exec`` bind-mounts the files of
/etc/netns/NAME/ over /etc/, so each host has its own /etc/passwd in which root's home is that directory
and its shell /bin/sh: a session on a host never runs this machine's root shell start-up files (which may
do anything, e.g. take a pyenv lock), and Ansible's remote temporary files stay per host.
Ansible reaches the hosts with the test's key only (no password anywhere), and checks their host keys
against a known_hosts file written here.

A lock file serialises sessions on this machine (the addresses and names are fixed); a session that died
without cleaning up leaves names that the next one removes first.  Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

NET = "10.213.0"
BRIDGE = "itfbr0"
NS_PREFIX = "itf-"
VETH_PREFIX = "itfv"
LOCK = Path("/run/innotier-fleet-test.lock")
SSHD = "/usr/sbin/sshd"


def sh(*cmd: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    # cwd /: a host must not see the controller's checkout as its current directory
    return subprocess.run(list(cmd), check=check, timeout=timeout, capture_output=True, text=True, cwd="/")


def innotier_cli(*args: str, timeout: float = 900, env: dict | None = None) -> subprocess.CompletedProcess:
    """The real CLI of the controller (this interpreter's innotier), output captured."""
    return subprocess.run([sys.executable, "-m", "tuner.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def missing_tools() -> list[str]:
    need = {"ip": shutil.which("ip"), "sshd": SSHD if os.path.exists(SSHD) else None,
            "ssh-keygen": shutil.which("ssh-keygen"), "mount": shutil.which("mount")}
    return [k for k, v in need.items() if not v]


@dataclass
class NsHost:
    index: int
    root: Path
    sshd: subprocess.Popen | None = None
    extra_vars: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"h{self.index}"

    @property
    def ns(self) -> str:
        return f"{NS_PREFIX}{self.index}"

    @property
    def addr(self) -> str:
        return f"{NET}.{10 + self.index}"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def tier(self) -> Path:
        return self.root / "tier"

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def ssh_dir(self) -> Path:
        return self.root / "ssh"

    @property
    def root_home(self) -> Path:
        return self.root / "root"

    @property
    def etc(self) -> Path:
        return Path("/etc/netns") / self.ns

    def exec(self, *cmd: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        """Run a command inside this host's namespace."""
        return sh("ip", "netns", "exec", self.ns, *cmd, timeout=timeout, check=check)

    def pids(self) -> list[int]:
        out = sh("ip", "netns", "pids", self.ns, check=False).stdout.split()
        return [int(p) for p in out if p.isdigit()]

    def kill_all(self) -> None:
        """What a host losing power looks like from outside: every process in the namespace dies (SIGKILL)."""
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.sshd is not None:
            self.sshd.wait(timeout=10)
            self.sshd = None
        deadline = time.monotonic() + 20
        while self.pids() and time.monotonic() < deadline:
            time.sleep(0.2)

    def start_sshd(self, timeout: float = 20) -> None:
        cfg = self.ssh_dir / "sshd_config"
        log = open(self.root / "sshd.log", "ab")
        self.sshd = subprocess.Popen(["ip", "netns", "exec", self.ns, SSHD, "-D", "-e", "-f", str(cfg)],
                                     stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.sshd.poll() is not None:
                raise RuntimeError(f"sshd of {self.name} exited: {(self.root / 'sshd.log').read_text()[-800:]}")
            try:
                with socket.create_connection((self.addr, 22), timeout=1) as s:
                    if s.recv(64).startswith(b"SSH-"):
                        return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"sshd of {self.name} did not answer on {self.addr}:22 within {timeout:.0f} s")


@dataclass
class NsFleet:
    root: Path
    hosts: list[NsHost]
    key: Path  # the test's private key
    known_hosts: Path
    controller_addr: str = f"{NET}.1"
    _lock_fd: int | None = None

    def inventory(self, groups: dict[str, list[int]], extra: dict | None = None) -> dict:
        """An Ansible YAML inventory: groups of host indexes; host vars for SSH, home, venv, tiers."""
        hv = {}
        for h in self.hosts:
            hv[h.name] = {
                "ansible_host": h.addr, "ansible_user": "root",
                "ansible_ssh_private_key_file": str(self.key),
                "ansible_ssh_common_args": f"-o UserKnownHostsFile={self.known_hosts} -o StrictHostKeyChecking=yes",
                "ansible_python_interpreter": "/usr/bin/python3",
                "innotier_home": str(h.home), "innotier_venv": str(h.venv), "innotier_stage": str(h.root / "stage"),
                "innotier_tiers": {"fast": str(h.tier)},
                **h.extra_vars,
            }
        children = {g: {"hosts": {self.hosts[i].name: hv[self.hosts[i].name] for i in idx}}
                    for g, idx in groups.items()}
        inv = {"all": {"children": children}}
        if extra:
            inv["all"]["vars"] = extra
        return inv

    def write_inventory(self, path: Path, groups: dict[str, list[int]], extra: dict | None = None) -> Path:
        path.write_text(yaml.safe_dump(self.inventory(groups, extra), sort_keys=False))
        return path


def _cleanup_names(count_hint: int = 16) -> None:
    """Remove bridge, veths and namespaces of this harness (a session that died leaves them)."""
    for line in sh("ip", "netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(NS_PREFIX):
            for pid in sh("ip", "netns", "pids", name, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            sh("ip", "netns", "del", name, check=False)
    for d in Path("/etc/netns").glob(f"{NS_PREFIX}*") if Path("/etc/netns").is_dir() else []:
        shutil.rmtree(d, ignore_errors=True)
    try:
        Path("/etc/netns").rmdir()  # only when empty (ip-netns(8) users may keep files there)
    except OSError:
        pass
    for line in sh("ip", "-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            dev = parts[1].strip().split("@")[0]
            if dev.startswith(VETH_PREFIX) or dev == BRIDGE:
                sh("ip", "link", "del", dev, check=False)


def _passwd_with_root_home(home: Path) -> str:
    """This machine's /etc/passwd with root's home directory and shell replaced."""
    out = []
    for line in Path("/etc/passwd").read_text().splitlines():
        f = line.split(":")
        if len(f) == 7 and f[0] == "root":
            f[5], f[6] = str(home), "/bin/sh"
        out.append(":".join(f))
    return "\n".join(out) + "\n"


def _keygen(path: Path, comment: str) -> None:
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path))


SSHD_CONFIG = """\
ListenAddress {addr}
Port 22
HostKey {host_key}
AuthorizedKeysFile {authorized}
PidFile {root}/sshd.pid
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitUserEnvironment no
LogLevel INFO
MaxStartups 50:30:100
MaxSessions 50
Subsystem sftp internal-sftp
"""


def create_fleet(root: Path, count: int) -> NsFleet:
    """Make ``count`` namespace hosts under ``root``; the caller must call ``destroy_fleet`` (even on failure)."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(LOCK, os.O_CREAT | os.O_RDWR, 0o600)
    deadline = time.monotonic() + 900
    while True:  # another session's fleet holds the addresses: wait for it, bounded
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise RuntimeError(f"{LOCK} stayed locked for 15 min (another fleet test session)")
            time.sleep(1)
    fleet = NsFleet(root=root, hosts=[], key=root / "id_test", known_hosts=root / "known_hosts", _lock_fd=fd)
    _cleanup_names()
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
    _keygen(fleet.key, "innotier-fleet-test")
    sh("ip", "link", "add", BRIDGE, "type", "bridge")
    sh("ip", "addr", "add", f"{fleet.controller_addr}/24", "dev", BRIDGE)
    sh("ip", "link", "set", BRIDGE, "up")
    known = []
    for i in range(1, count + 1):
        h = NsHost(index=i, root=root / f"h{i}")
        fleet.hosts.append(h)
        for d in (h.home, h.tier, h.ssh_dir, h.root_home, h.etc):
            d.mkdir(parents=True, exist_ok=True)
        (h.etc / "passwd").write_text(_passwd_with_root_home(h.root_home))
        sh("mount", "-t", "tmpfs", "-o", "size=1G,mode=0755", f"itf-tier-{i}", str(h.tier))
        sh("ip", "netns", "add", h.ns)
        veth = f"{VETH_PREFIX}{i}"
        sh("ip", "link", "add", veth, "type", "veth", "peer", "name", f"{veth}n")
        sh("ip", "link", "set", veth, "master", BRIDGE)
        sh("ip", "link", "set", veth, "up")
        sh("ip", "link", "set", f"{veth}n", "netns", h.ns)
        h.exec("ip", "link", "set", f"{veth}n", "name", "eth0")
        h.exec("ip", "addr", "add", f"{h.addr}/24", "dev", "eth0")
        h.exec("ip", "link", "set", "eth0", "up")
        h.exec("ip", "link", "set", "lo", "up")
        _keygen(h.ssh_dir / "host_key", h.name)
        shutil.copy(f"{fleet.key}.pub", h.ssh_dir / "authorized_keys")
        (h.ssh_dir / "sshd_config").write_text(SSHD_CONFIG.format(
            addr=h.addr, host_key=h.ssh_dir / "host_key", authorized=h.ssh_dir / "authorized_keys", root=h.root))
        known.append(f"{h.addr} {(h.ssh_dir / 'host_key.pub').read_text().split(' ')[0]} "
                     f"{(h.ssh_dir / 'host_key.pub').read_text().split(' ')[1]}")
        h.start_sshd()
    fleet.known_hosts.write_text("\n".join(known) + "\n")
    return fleet


def destroy_fleet(fleet: NsFleet) -> None:
    """Kill everything in the namespaces, unmount the tiers, delete links and namespaces, release the lock."""
    try:
        for h in fleet.hosts:
            h.kill_all()
            sh("umount", "-l", str(h.tier), check=False)
        _cleanup_names()
    finally:
        if fleet._lock_fd is not None:
            fcntl.flock(fleet._lock_fd, fcntl.LOCK_UN)
            os.close(fleet._lock_fd)
            fleet._lock_fd = None


@contextlib.contextmanager
def bridge_sandbox(fleet: NsFleet, name: str, warehouses: int, buffer_pool: str = "256M"):
    """A MariaDB sandbox listening on the bridge address (the hosts reach it there), TPC-C loaded with
    procedures installed, and an account for the hosts whose password sits only in a 0600 option file.
    Yields (sandbox, ConnectionSpec to tpcc over the socket, option file path, password); destroys it after."""
    from tuner.core import sandbox as sbx
    from tuner.core.optionfile import private_option_file
    from tuner.tpcc import procedures
    from tuner.tpcc.loader import load

    sb = sbx.create(name, page_size="16k",
                    options={"bind_address": fleet.controller_addr, "innodb_buffer_pool_size": buffer_pool})
    sb.start()
    try:
        spec = sb.connection_spec()
        load(spec, warehouses=warehouses, database="tpcc", drop=True, progress=False)
        password = secrets.token_urlsafe(18)
        conn = spec.connect()
        try:
            cur = conn.cursor()
            cur.execute("CREATE USER %s@%s IDENTIFIED BY %s", ("fleet", f"{NET}.%", password))
            cur.execute("GRANT ALL ON tpcc.* TO %s@%s", ("fleet", f"{NET}.%"))
            procedures.install(conn, "tpcc")
        finally:
            conn.close()
        with private_option_file(["[client]", "user = fleet", f"password = {password}"]) as cnf:
            yield sb, spec.with_database("tpcc"), Path(cnf), password
    finally:
        sb.stop("kill")
        sb.destroy(force=True)


def sum_next_o_id(spec) -> int:
    """The server's New-Order count: sum(d_next_o_id) over all districts."""
    conn = spec.with_database(None).connect()
    try:
        cur = conn.cursor()
        cur.execute("SELECT SUM(d_next_o_id) FROM tpcc.district")
        return int(cur.fetchone()[0])
    finally:
        conn.close()
