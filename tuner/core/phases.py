"""The phases of one sweep cell, in order: one enum shared by the sweep runner, its progress
display, the results store (phase timings) and the exporter (``innotier_sweep_phase{phase}``)."""

from __future__ import annotations

import enum


class SweepPhase(enum.StrEnum):
    PREPARE = "prepare"      # clear what an interrupted attempt left
    TIER_BENCH = "tier-bench"  # `tiers bench` of the cell's tiers (a spec's tier_bench:), before the clone
    GOLDEN = "golden"        # build the golden copy (first cell of its key only)
    CLONE = "clone"          # clone the golden datadir into the cell's sandbox
    PLACE = "place"          # move InnoDB files to their tiers
    CONFIGURE = "configure"  # write the cell's profile
    START = "start"          # start the server
    WAIT_QUIET = "wait-quiet"  # --wait-quiet: wait (with a limit) until other processes leave the CPU
    WARMUP = "warmup"        # driver running, not yet counted
    MEASURE = "measure"      # driver running, counted
    CHECK = "check"          # TPC-C consistency checks
    COLLECT = "collect"      # server facts and reports
    STOP = "stop"            # clean shutdown
    RECORD = "record"        # store the cell's record
    BETWEEN_CELLS = "between cells"  # a cell is recorded, the next not started
