"""Lab tests: the host side boots the lab VM once and runs every guest group in it (one pytest session);
the guest side (tests/lab/guest/) runs inside.

On the host the guest modules are not collected at all (they need the VM's md and pmem drivers); inside
the VM the lab init sets INNOTIER_IN_LAB=1 and the host test runs them with pytest there.
"""

import os

collect_ignore_glob = [] if os.environ.get("INNOTIER_IN_LAB") == "1" else ["guest/*"]
