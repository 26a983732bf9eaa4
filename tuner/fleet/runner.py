"""Run the shipped playbooks through ansible-runner and say what happened on each host.

ansible-runner drives ``ansible-playbook`` (from the same environment as innotier) in a private data
directory; each event comes back to ``on_event``, which turns the ones that matter into per-host progress
lines.  The outcome is per host (ok, failed, unreachable) with the message Ansible gave, never a bare
exit code: a fleet operation where one host failed is still a result for the others.

Secrets never go into extravars (ansible-runner writes those to ``env/extravars`` in the data directory):
a playbook that needs the database password reads it on the controller with a ``file`` lookup from a 0600
file and copies it with ``no_log: true``.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tuner.core.errors import FleetError

PLAYBOOKS = Path(__file__).resolve().parent / "playbooks"
PROGRESS_TASK_PREFIX = "progress"  # tasks whose retries carry a progress line in stdout


def playbook_path(name: str) -> Path:
    p = PLAYBOOKS / (name if name.endswith(".yml") else f"{name}.yml")
    if not p.is_file():
        known = ", ".join(sorted(q.stem for q in PLAYBOOKS.glob("*.yml")))
        raise FleetError(f"no shipped playbook {name!r}; use one of {known}")
    return p


@dataclass
class HostOutcome:
    host: str
    status: str  # ok | failed | unreachable
    message: str = ""

    def to_dict(self) -> dict[str, str]:
        return dict(self.__dict__)


@dataclass
class PlaybookRun:
    playbook: str
    status: str  # ansible-runner's: successful | failed | timeout | canceled
    rc: int
    hosts: dict[str, HostOutcome]
    artifacts: Path
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def ok_hosts(self) -> list[str]:
        return [h for h, o in self.hosts.items() if o.status == "ok"]

    @property
    def failed_hosts(self) -> list[HostOutcome]:
        return [o for o in self.hosts.values() if o.status != "ok"]


def _event_message(data: dict) -> str:
    res = data.get("res") or {}
    if res.get("censored"):
        return f"task {data.get('task', '?')!r} failed (its output is hidden: no_log)"
    parts = [str(res.get(k)).strip() for k in ("msg", "stderr", "module_stderr") if res.get(k)]
    if not parts and res.get("stdout"):
        parts.append(str(res["stdout"]).strip()[-400:])
    msg = " | ".join(p for p in parts if p)[:800]
    return f"task {data.get('task', '?')!r}: {msg}" if msg else f"task {data.get('task', '?')!r} failed"


class Progress:
    """Prints per-host lines from ansible events: task starts (once per task), progress lines, failures."""

    def __init__(self, echo: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True)) -> None:
        self.echo = echo
        self.lock = threading.Lock()
        self.errors: dict[str, str] = {}
        self.last_line: dict[str, str] = {}
        self.facts: dict[str, dict] = {}  # what setup tasks returned, per host

    def __call__(self, event: dict) -> bool:
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        host = data.get("host") or data.get("remote_addr") or ""
        with self.lock:
            if kind == "runner_on_ok" and (data.get("res") or {}).get("ansible_facts"):
                self.facts.setdefault(host, {}).update(data["res"]["ansible_facts"])
            if kind == "playbook_on_task_start":
                self.echo(f"fleet: task {data.get('task', '')}")
            elif kind == "runner_retry" and str(data.get("task", "")).startswith(PROGRESS_TASK_PREFIX):
                out = ((data.get("res") or {}).get("stdout") or "").strip().splitlines()
                line = out[-1] if out else ""
                if line and line != self.last_line.get(host):
                    self.last_line[host] = line
                    self.echo(f"[{host}] {line}")
            elif kind in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
                msg = _event_message(data)
                self.errors[host] = msg
                self.echo(f"[{host}] {'UNREACHABLE' if kind == 'runner_on_unreachable' else 'FAILED'}: {msg}")
        return True  # keep the event in the artifacts


_RUN_SEQ = itertools.count(1)


def ansible_env(workdir: Path, control_dir: Path) -> dict[str, str]:
    """Environment for ansible-playbook: this interpreter's bin first, host keys checked, no retry files.

    ``control_dir`` is a fresh SSH ControlMaster directory for this playbook run: a master left from an
    earlier run to a host that has since restarted its sshd would otherwise answer the first task with a
    dead connection ("unreachable").  It sits in the temp dir, not under workdir: a Unix socket path must
    stay under 108 bytes."""
    bindir = str(Path(sys.executable).parent)
    workdir.mkdir(parents=True, exist_ok=True)
    cp = control_dir
    return {
        "PATH": bindir + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(cp),
        "ANSIBLE_LOCAL_TEMP": str(workdir / "tmp"),
        "ANSIBLE_DEPRECATION_WARNINGS": "False",
        "ANSIBLE_TIMEOUT": "20",
        # a transient SSH failure (exit 255: a connection reset, an sshd just restarted) is retried, not taken as
        # the host being gone
        "ANSIBLE_SSH_RETRIES": "3",
        # one SSH round trip per task instead of four (mkdir, put, exec, rm): the progress loops poll often
        "ANSIBLE_PIPELINING": "True",
    }


def check_ansible() -> None:
    """Make this interpreter's bin directory (where pip put ansible-playbook) the first on PATH, and check."""
    bindir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "/usr/bin:/bin")
    if path.split(os.pathsep)[0] != bindir:
        os.environ["PATH"] = bindir + os.pathsep + path  # ansible-runner looks its executables up on PATH
    if not shutil.which("ansible-playbook"):
        raise FleetError("ansible-playbook is not installed next to innotier; reinstall innotier "
                         "(its dependencies include ansible-core and ansible-runner)")


def run_playbook(name: str, inventory: str | Path, extravars: dict[str, Any], workdir: Path, *,
                 limit: str | None = None, on_event: Callable[[dict], bool] | None = None,
                 timeout: int | None = None, forks: int = 20) -> PlaybookRun:
    """Run a shipped playbook against the inventory; return the per-host outcome.  Blocks until it ends."""
    check_ansible()
    path = playbook_path(name)
    workdir.mkdir(parents=True, exist_ok=True)
    control_dir = tempfile.TemporaryDirectory(prefix="innotier-cp-")  # removed when the run ends (0700)
    kw: dict[str, Any] = dict(private_data_dir=str(workdir), playbook=str(path), inventory=str(Path(inventory).resolve()),
                              extravars=extravars, envvars=ansible_env(workdir, Path(control_dir.name)), quiet=True,
                              forks=forks,
                              event_handler=on_event or Progress(),
                              # a fresh artifacts folder per run: ansible-runner reads its stats from the events in it,
                              # and a re-run under the same ident would see the last run's unreachable hosts
                              ident=f"{path.stem}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{next(_RUN_SEQ)}")
    if limit:
        kw["limit"] = limit
    if timeout:
        kw["timeout"] = timeout
    import ansible_runner  # deferred: importing it adds ~0.3 s to every `innotier` start (measured)

    with control_dir:
        r = ansible_runner.run(**kw)
    return _outcome(path.stem, r, on_event)


def _outcome(name: str, r, handler) -> PlaybookRun:
    stats = r.stats or {}
    errors = getattr(handler, "errors", {}) if handler else {}
    hosts: dict[str, HostOutcome] = {}
    seen = set()
    for k in ("ok", "changed", "skipped", "failures", "dark", "processed", "rescued", "ignored"):
        seen.update((stats.get(k) or {}).keys())
    for h in sorted(seen):
        if h in (stats.get("dark") or {}):
            hosts[h] = HostOutcome(h, "unreachable", errors.get(h, "unreachable over SSH"))
        elif h in (stats.get("failures") or {}):
            hosts[h] = HostOutcome(h, "failed", errors.get(h, "a task failed"))
        else:
            hosts[h] = HostOutcome(h, "ok")
    facts = {h: dict(f) for h, f in (getattr(handler, "facts", None) or {}).items()}
    if r.status in ("timeout", "canceled") and not hosts:
        raise FleetError(f"playbook {name} stopped ({r.status}) before any host reported; "
                         f"see {r.config.artifact_dir}")
    if not hosts and r.rc != 0:
        tail = ""
        try:
            tail = r.stdout.read()[-600:]
        except Exception:
            pass
        raise FleetError(f"playbook {name} failed before reaching any host (rc {r.rc}): {tail.strip()}; "
                         "check the inventory and the playbook variables")
    return PlaybookRun(playbook=name, status=r.status, rc=r.rc, hosts=hosts, artifacts=Path(r.config.artifact_dir),
                       facts=facts)
