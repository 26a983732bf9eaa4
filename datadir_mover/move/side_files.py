"""The files of a move's journal directory (``$INNOTIER_HOME/moves/<move id>/``), named in one place.

Their names are on disk: a journal written by an older innotier is resumed, rolled back and
finalized by a newer one, so a name here never changes (add a new one instead).  Who writes
each, and when, is said beside it; ``journal.py`` states the journal's own rules.
"""

from __future__ import annotations

# the journal itself (journal.py)
PLAN = "plan.json"  # the plan, written once before the first record
JOURNAL = "journal.log"  # one record a line, each fsynced
WORK_LOCK = "lock"  # flock of the one process working on the move
OPTIONS = "options.json"  # how the move was asked to run beyond its plan (--max-write-block)

# PLAN, for ROLLBACK
BEFORE = "before.json"  # the placement, record files and AppArmor local include SWITCH overwrites

# PRECOPY and SHUTDOWN
FLUSH_SETTINGS = "flush-settings.json"  # the server's own flush settings, saved before the pre-flush lowers them
PRECOPY_MANIFEST = "precopy-manifest.json"  # the last pre-copy pass's manifest
PRECOPY_BLOCKS = "precopy-blocks.json"  # and its block digests (a restarted mover's delta rewrites changed ones)
CHECKSUMS_BEFORE = "checksums-before.json"  # table checksums or samples under the commit block before the stop

# COPY and VERIFY (the switch)
COPY_MANIFEST = "copy-manifest.json"  # every copied entry, its digest and the target's stat after the read-back
TARGET_BLOCKS = "target-blocks.json"  # the target's block digests at the switch (proof.py)
TARGET_LIST = "target-list.json"  # rel -> kind ("file", "dir", "symlink") of the target at the switch (file_lists)
TARGET_LINKS = "target-links.json"  # rel -> where each symbolic link of the target pointed at the switch
SOURCE_FINGERPRINT = "source-fingerprint.json"  # what a server run on the source cannot leave untouched

# START and after
TARGET_STARTED = "target-started.json"  # written right before the first start on the target
SINCE_START = "since-start.json"  # the server's counters when it first accepted connections on the target
PROOF = "proof.json"  # the proof's state and progress
PROOF_LOCK = "proof.lock"  # flock of the one process running the proof
PROOF_LOG = "proof.log"  # the detached prover's output
