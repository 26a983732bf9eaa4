"""The papers behind the shipped specs, named as a reader can find them (docs/sources.md).

Specs and comments cite a paper by its seed label ("seed 000"), which means nothing to someone running
`innotier demo`: ``name_papers`` puts the authors and venue in its place wherever a spec's words are
printed (the plan's description, the report's regime note).
"""

from __future__ import annotations

import re

# seed label -> how the paper is named in print (docs/sources.md has the full citations)
PAPERS: dict[str, str] = {
    "000": "Zhu et al., NVM-aware file systems on Optane DCPMM, Electronics 2021",
    "001": "Han et al., multiple Optane SSDs, Electronics 2021",
    "003": "Tehrany, PMDK thesis, VU Amsterdam 2020",
    "004": "Jummah, persistent RAM as storage class memory, dissertation, Universiti Malaya 2022",
}
SEED_LABEL = re.compile(r"\bseed (\d{3})\b")


def paper(label: str) -> str:
    """'000' -> the paper's printed name; an unknown label stays as it is (a spec may cite a newer seed)."""
    return PAPERS.get(label, f"seed {label}")


def name_papers(text: str) -> str:
    """Every 'seed NNN' in ``text`` replaced by the paper's name."""
    return SEED_LABEL.sub(lambda m: paper(m.group(1)), text)
