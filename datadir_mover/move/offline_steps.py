"""The offline steps, the server stopped: COPY (the delta, or everything), VERIFY (read back), SWITCH (placement)."""

from __future__ import annotations

import stat
import time
from pathlib import Path
from typing import Any, Callable

from tuner.core.durable import fsync_dir, write_atomic
from tuner.core.sandbox import SandboxState
from tuner.core.errors import MoveError

from datadir_mover import apparmor, unit_sandbox
from datadir_mover.move import components, file_lists, good_copy, side_files, source_fingerprint
from datadir_mover.move import proof as proofmod
from datadir_mover.move.copy import Manifest, Tree, copy_tree, recheck_sources, verify_tree, walk
from datadir_mover.move.journal import State, crash_point
from datadir_mover.move.stepbase import MoveHalted, model_stub


class OfflineSteps:
    """COPY, VERIFY and SWITCH, and what they share (mixed into ``Executor``)."""

    def _do_copy(self) -> dict[str, Any]:
        self._require_stopped(State.COPY)
        self._ensure_target()
        if not components.get(self.plan.component).copies_files:
            self.journal.save_json(side_files.COPY_MANIFEST, Manifest(self.plan.source_dir, self.plan.target_dir).to_dict())
            return {"files": 0, "bytes": 0}
        prev = None
        if self.plan.precopy:  # the last pass's block digests: in memory, or as journaled after a restart
            prev = self._precopy or self._saved_precopy()
        entries = self._entries()
        total = sum(st.st_size for _, st in entries if stat.S_ISREG(st.st_mode))
        advance = self.progress("copy (server stopped)", total)
        read = [0]

        def progress(n: int) -> None:
            read[0] += n
            advance(n)

        manifest, st = copy_tree(self.plan.source_dir, self.plan.target_dir, entries, previous=prev,
                                 progress=progress,
                                 after_file=self._mid(State.COPY), verify=True,
                                 page_size=int(self.plan.server["page_size"]), stable=True,
                                 owned=self._moved_in_target())
        self.journal.save_json(side_files.COPY_MANIFEST, manifest.to_dict())
        self._copied = manifest
        return {"files": st.files_copied, "bytes": st.bytes_copied, "files_delta": st.files_delta,
                "bytes_read": read[0] - st.bytes_skipped,
                "files_unchanged_since_precopy": st.files_skipped,
                "bytes_unchanged_since_precopy": st.bytes_skipped, "seconds": round(st.seconds, 3)}

    def _do_verify(self) -> dict[str, Any]:
        self._require_stopped(State.VERIFY)
        manifest = Manifest.from_dict(self.journal.load_json(side_files.COPY_MANIFEST))
        changed = recheck_sources(manifest)
        if changed:
            raise MoveError(f"{len(changed)} source files changed while the server was stopped "
                            f"({', '.join(changed[:3])}); something else writes to {self.plan.source_dir}")
        t0 = time.monotonic()
        verify_tree(manifest)
        self.journal.save_json(side_files.COPY_MANIFEST, manifest.to_dict())
        if self._copied is not None:  # the block digests the copy verified (memory only: a restart reads the target)
            manifest.blocks = self._copied.blocks
        proof = proofmod.record_at_switch(self.journal, self.plan, manifest)
        source_fingerprint.record(self.journal, self.plan)
        self._verified_here = True  # until START, this process can vouch for what it read back
        return {"files": sum(1 for r in manifest.records.values() if r.kind == "file"),
                "seconds": round(time.monotonic() - t0, 3), "proof": proof.status}

    def _do_switch(self) -> dict[str, Any]:
        self._require_stopped(State.SWITCH)
        good_copy.for_resume(self.journal, self.plan, self.echo)
        if components.get(self.plan.component).copies_files and not Path(self.plan.target_dir).is_dir():
            raise MoveHalted(f"the target {self.plan.target_dir} vanished after the copy was verified (a tier that "
                             "did not come back?); nothing was switched: bring it back and run `innotier move resume "
                             f"--id {self.plan.move_id}`, or go back with `innotier move rollback --id "
                             f"{self.plan.move_id}`")
        self._ensure_target()  # a tmpdir move copies nothing: its directory is simply made again
        if self.plan.placement_after is not None:
            write_atomic(self.plan.placement_file, self.plan.placement_after, mode=0o644)
        elif Path(self.plan.placement_file).exists():   # a move back home: the drop-in held only its placements
            Path(self.plan.placement_file).unlink()
            fsync_dir(Path(self.plan.placement_file).parent)
        crash_point("SWITCH:mid")
        if self.plan.component == "datadir" and self.plan.control["kind"] == "sandbox":
            sb = self.control.sandbox()
            sb.datadir = self.plan.target_dir  # the sandbox record follows, so start() and destroy() see it
            sb.save()
            sb.write_cnf()
        apparmor.apply(self.plan.apparmor_change())
        unit_sandbox.apply(self.plan.unit_change())
        return {"placement_file": self.plan.placement_file, "unit_dropin": self.plan.unit_change().dropin_path}

    def _entries(self):
        names = components.top_names(self.plan.component, model_stub(self.plan), self.plan.source_dir)
        return walk(self.plan.source_dir, names)

    def _moved_in_target(self) -> list[str]:
        """What the target holds under the moved names (all of it the move's: preflight): a pass removes what of
        it the source no longer has, such as an interrupted run's copy of a table dropped since."""
        return [rel for rel, _ in file_lists.moved_entries(self.plan, self.plan.target_dir)]

    def _ensure_target(self) -> None:
        """Create the target with the server's owner and mode; a directory that existed before the plan is not
        the move's to change (preflight.check_owner made sure the server can write into it)."""
        t = Path(self.plan.target_dir)
        if self.plan.target_exists:
            return
        if not t.exists():
            t.mkdir(mode=0o700)
            fsync_dir(t.parent)
        o = self.plan.owner
        with Tree(t, follow_root=False) as made:  # the directory made above, not a link put in its place
            made.set_owner_and_mode(o["uid"], o["gid"], o["mode"])

    def _mid(self, state: str) -> Callable[[str], None]:
        fired = {"done": False}

        def hook(_: str) -> None:
            if not fired["done"]:
                fired["done"] = True
                crash_point(f"{state}:mid")
        return hook

    def _require_stopped(self, state: str) -> None:
        now = self.control.state()
        if now != SandboxState.STOPPED:
            raise MoveHalted(f"{self.control.describe()} is {now.value} during the offline {state} step, where it "
                             f"must be stopped (something restarted it?); stop it "
                             f"({self.plan.control['stop_hint']}) and run "
                             f"`innotier move resume --id {self.plan.move_id}`")

