"""The same set of files on both sides: the target's list taken at the switch, compared with the copy's both ways.

A move's copy is proven file by file, but only the files it copied; a file the source no longer
has (a table dropped while an interrupted move waited) or one put into the target by someone
else would be carried into the server's datadir unseen.  At the switch (VERIFY, server stopped,
before the server writes its own files into the target) the target's entries under the moved
names are listed and saved (``side_files.TARGET_LIST``); the proof then names every entry that is on one
side only, or of another kind on each:

- the source now (stopped) against the copy's manifest: files created or removed on the source;
- the target at the switch against the manifest: files the target holds that the source did not
  have (extras), files the copy wrote that are gone, and entries of another kind;
- on both sides, where each symbolic link points (read, never followed: the target's as saved at
  the switch, ``side_files.TARGET_LINKS``) against where the source's pointed when copied: a link
  retargeted on either side is named with both destinations.  A move recorded before the links
  were kept has its kinds compared only on the target's side.
"""

from __future__ import annotations

import os
import stat

from datadir_mover.move import components, side_files
from datadir_mover.move.copy import Manifest, Tree, walk
from datadir_mover.move.journal import Journal
from datadir_mover.move.plan import Plan
from datadir_mover.move.stepbase import model_stub



def moved_entries(plan: Plan, directory: str) -> list[tuple[str, os.stat_result]]:
    """The entries of ``directory`` under the names the move copies (preflight: in a target, all of them the
    move's own)."""
    names = components.top_names(plan.component, model_stub(plan), directory)
    if plan.target_exists and directory == plan.target_dir:
        names = [n for n in names if n != components.BUFFER_POOL_DUMP]  # preflight lets a target keep its own
    return walk(directory, names)


def _kind(mode: int) -> str:
    return "dir" if stat.S_ISDIR(mode) else "symlink" if stat.S_ISLNK(mode) else "file"


def _links(directory: str, listed: dict[str, str]) -> dict[str, str]:
    """rel -> where each symbolic link of ``listed`` points (read through checked descriptors, never followed)."""
    rels = [rel for rel, kind in listed.items() if kind == "symlink"]
    out: dict[str, str] = {}
    if rels:
        with Tree(directory) as tree:
            for rel in rels:
                try:
                    out[rel] = tree.readlink(rel)
                except FileNotFoundError:
                    continue  # gone since listed: named as missing if the copy had it
    return out


def record(journal: Journal, plan: Plan, manifest: Manifest) -> list[tuple[str, str]]:
    """Save the target's list and links now (the switch); their differences from the manifest, (rel, why)."""
    listed = {rel: _kind(st.st_mode) for rel, st in moved_entries(plan, plan.target_dir)}
    links = _links(plan.target_dir, listed)
    journal.save_json(side_files.TARGET_LIST, listed)
    journal.save_json(side_files.TARGET_LINKS, links)
    return _target_differences(listed, links, plan, manifest)


def differences(journal: Journal, plan: Plan, manifest: Manifest) -> list[tuple[str, str]]:
    """Entries on one side only (or of another kind): the stopped source now, and the target as listed at the
    switch (a move recorded before the list was kept has only the source's side), against the manifest."""
    source = {rel: _kind(st.st_mode) for rel, st in moved_entries(plan, plan.source_dir)}
    out = _compare(source, _links(plan.source_dir, source), manifest, "the source")
    target = journal.load_json(side_files.TARGET_LIST)
    if target is not None:
        links = journal.load_json(side_files.TARGET_LINKS)  # None: recorded by an innotier that kept no links
        out += [d for d in _target_differences(target, links, plan, manifest) if d not in out]
    return out


def _target_differences(listed: dict[str, str], links: dict[str, str] | None, plan: Plan,
                        manifest: Manifest) -> list[tuple[str, str]]:
    """A target that existed keeps its own buffer-pool dump out of the listing (preflight lets it), so a dump the
    copy wrote there is not missing from it: the dump is a list of page numbers, not data."""
    differences = _compare(listed, links, manifest, "the target")
    if plan.target_exists:
        differences = [d for d in differences if d[0] != components.BUFFER_POOL_DUMP]
    return differences


def _compare(listed: dict[str, str], links: dict[str, str] | None, manifest: Manifest,
             side: str) -> list[tuple[str, str]]:
    copied = {rel: r.kind for rel, r in manifest.records.items()}
    when = "at the switch" if side == "the target" else "now"
    both = sorted(set(listed) & set(copied))
    return ([(rel, f"in {side} {when} but not copied from the source") for rel in sorted(set(listed) - set(copied))]
            + [(rel, f"copied but missing from {side} {when}") for rel in sorted(set(copied) - set(listed))]
            + [(rel, f"a {listed[rel]} in {side} {when}, a {copied[rel]} when copied")
               for rel in both if listed[rel] != copied[rel]]
            + [(rel, f"a link to {links[rel]!r} in {side} {when}, a link to {manifest.records[rel].link!r} when "
                     "copied")
               for rel in both if links is not None and rel in links and listed[rel] == copied[rel] == "symlink"
               and links[rel] != manifest.records[rel].link])
