"""Lab tests: the host side boots the lab VM and runs the guest groups in it; the guest side (tests/lab/guest/)
runs inside.

On the host the guest modules are not collected at all (they need the VM's md and pmem drivers), and the
fixtures that build the image and boot come from labvm.py; inside the VM the lab init sets INNOTIER_IN_LAB=1,
pytest collects only the guest modules there, and this file imports nothing (each import costs under emulation).
"""

import os

if os.environ.get("INNOTIER_IN_LAB") == "1":
    collect_ignore_glob: list[str] = []
else:
    collect_ignore_glob = ["guest/*"]
    from labvm import fast_init_vm, lab_image_built  # noqa: F401 (fixtures)
