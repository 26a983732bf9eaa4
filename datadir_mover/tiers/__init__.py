"""Storage tiers: detect (detect.py), provision (provision.py, one module per kind behind base.TierProvider,
registered in registry.py) and characterize (fio.py).  Other areas call ``detect_tiers`` and ``tier_for_path``."""

from datadir_mover.tiers.model import KINDS, PmemInfo, RaidInfo, Tier, ZramInfo
from datadir_mover.tiers import detect

__all__ = ["KINDS", "PmemInfo", "RaidInfo", "Tier", "ZramInfo", "detect_tiers", "tier_for_path"]


def __getattr__(name):  # keep `import datadir_mover.tiers` light; detection pulls in every provider
    if name in ("detect_tiers", "tier_for_path"):
        return getattr(detect, name)
    raise AttributeError(name)
