"""Lab tests: the host side boots the lab VM once per group; the guest side (tests/lab/guest/) runs inside it.

On the host the guest modules are not collected at all (they need the VM's md and pmem drivers); inside
the VM the lab init sets INNOTIER_IN_LAB=1 and the host test runs them with pytest there.
"""

import os

collect_ignore_glob = [] if os.environ.get("INNOTIER_IN_LAB") == "1" else ["guest/*"]
