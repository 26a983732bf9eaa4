"""Profiles and tier costs in the results store (tuner.sweep.results): two tables of JSON documents.

  io_profiles   one row per measured window (IoProfile as JSON), with when, which server, which workload
  tier_costs    one row per tier characterization (TierCost as JSON)
  advices       one row per `placement advise` (StoredAdvice as JSON)
  placement_checks  one row per `placement check` sweep run: predicted beside measured (CheckResult as JSON)

Created on first use with CREATE TABLE IF NOT EXISTS beside the sweep's tables; the sweep's schema
version is untouched, and an older innotier opening the store ignores them.
"""

from __future__ import annotations

import json
import os

from tuner.core.errors import UsageError
from tuner.placement.model import IoProfile, StoredAdvice, TierCost
from tuner.sweep.results import ResultsStore

SCHEMA = """
CREATE TABLE IF NOT EXISTS io_profiles (
    profile_id TEXT PRIMARY KEY,
    taken_at TEXT NOT NULL,
    server TEXT NOT NULL,
    workload TEXT NOT NULL,
    profile_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS advices (
    advice_id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    profile_id TEXT NOT NULL,
    advice_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS placement_checks (
    run_id TEXT PRIMARY KEY,
    advice_id TEXT NOT NULL,
    checked_at TEXT NOT NULL,
    check_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tier_costs (
    tier_id TEXT PRIMARY KEY,
    measured_at TEXT NOT NULL,
    mountpoint TEXT NOT NULL,
    cost_json TEXT NOT NULL
);
"""
PUT_PROFILE = "INSERT OR REPLACE INTO io_profiles VALUES (?, ?, ?, ?, ?)"
PUT_TIER = "INSERT OR REPLACE INTO tier_costs VALUES (?, ?, ?, ?)"
PUT_ADVICE = "INSERT OR REPLACE INTO advices VALUES (?, ?, ?, ?)"
PUT_CHECK = "INSERT OR REPLACE INTO placement_checks VALUES (?, ?, ?, ?)"


class PlacementStore:
    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.results = ResultsStore(path)
        self.conn = self.results.conn
        self.conn.executescript(SCHEMA)

    def close(self) -> None:
        self.results.close()

    def __enter__(self) -> "PlacementStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def put_profile(self, p: IoProfile) -> None:
        server = f"{p.server.get('flavor')} {p.server.get('version')}" + \
            (f" (sandbox {p.server['sandbox']})" if p.server.get("sandbox") else "")
        self.conn.execute(PUT_PROFILE, (p.profile_id, p.taken_at, server, p.workload.get("kind", ""),
                                        json.dumps(p.to_dict(), sort_keys=True)))

    def put_tier(self, t: TierCost) -> None:
        self.conn.execute(PUT_TIER, (t.tier_id, t.measured_at, t.mountpoint, json.dumps(t.to_dict(), sort_keys=True)))

    def profiles(self) -> list[dict]:
        rows = self.conn.execute("SELECT profile_id, taken_at, server, workload FROM io_profiles ORDER BY taken_at")
        return [dict(r) for r in rows]

    def tiers(self) -> list[TierCost]:
        rows = self.conn.execute("SELECT cost_json FROM tier_costs ORDER BY measured_at")
        return [TierCost.from_dict(json.loads(r[0])) for r in rows]

    def profile(self, ref: str | None = None) -> IoProfile:
        """A profile by id (or a unique prefix); the newest when ``ref`` is None."""
        if ref is None:
            row = self.conn.execute("SELECT profile_json FROM io_profiles ORDER BY taken_at DESC, rowid DESC").fetchone()
        else:
            rows = self.conn.execute("SELECT profile_json FROM io_profiles WHERE profile_id = ? OR profile_id LIKE ? "
                                     "ORDER BY taken_at DESC", (ref, ref + "%")).fetchall()
            row = rows[0] if len(rows) == 1 or (rows and json.loads(rows[0][0])["profile_id"] == ref) else None
            if len(rows) > 1 and row is None:
                raise UsageError(f"--profile {ref} matches {len(rows)} profiles; give more of the id "
                                 "(see `innotier placement show`)")
        if row is None:
            raise UsageError("no stored I/O profile" + (f" {ref!r}" if ref else "") +
                             "; measure one with `innotier placement measure --sandbox S --seconds 60`")
        return IoProfile.from_dict(json.loads(row[0]))

    def tier(self, ref: str | None = None) -> TierCost:
        """A tier cost by id, or the newest for a mount point (any tier when ``ref`` is None)."""
        found = [t for t in self.tiers() if ref is None or t.tier_id == ref or
                 t.mountpoint == os.path.realpath(ref)]
        if not found:
            raise UsageError(f"no stored tier costs{f' for {ref}' if ref else ''}; characterize the tier with "
                             f"`innotier placement tier --mount {ref or 'M'}`")
        return found[-1]

    def put_advice(self, a: StoredAdvice) -> None:
        self.conn.execute(PUT_ADVICE, (a.advice_id, a.created_at, a.advice.profile_id,
                                       json.dumps(a.to_dict(), sort_keys=True)))

    def advice(self, ref: str | None = None) -> StoredAdvice:
        """An advice by id (or a unique prefix); the newest when ``ref`` is None."""
        rows = self.conn.execute("SELECT advice_id, advice_json FROM advices WHERE ? IS NULL OR advice_id = ? OR "
                                 "advice_id LIKE ? ORDER BY created_at DESC, rowid DESC",
                                 (ref, ref, f"{ref}%")).fetchall()
        exact = [r for r in rows if r[0] == ref]
        if ref is not None and len(rows) > 1 and not exact:
            raise UsageError(f"--advice {ref} matches {len(rows)} advices; give more of the id "
                             "(see `innotier placement show`)")
        if not rows:
            raise UsageError("no stored advice" + (f" {ref!r}" if ref else "") + "; make one with `innotier "
                             "placement advise --budget B --tier MOUNT --here /` (it is stored)")
        return StoredAdvice.from_dict(json.loads((exact or rows)[0][1]))

    def advices(self) -> list[dict]:
        rows = self.conn.execute("SELECT advice_id, created_at, profile_id FROM advices ORDER BY created_at")
        return [dict(r) for r in rows]

    def put_check(self, run_id: str, advice_id: str, checked_at: str, doc: dict) -> None:
        self.conn.execute(PUT_CHECK, (run_id, advice_id, checked_at, json.dumps(doc, sort_keys=True)))

    def check(self, run_id: str) -> dict | None:
        row = self.conn.execute("SELECT check_json FROM placement_checks WHERE run_id = ?", (run_id,)).fetchone()
        return json.loads(row[0]) if row else None
