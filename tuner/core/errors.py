"""One small error hierarchy.  Every error a user can cause is one of these.

The message is one sentence that names the problem and the fix.  The CLI prints
``innotier: <message>`` and exits with the class's ``exit_code``; anything else
is a bug and gets a traceback.
"""


class InnotierError(Exception):
    """Base class; the message is what the user reads."""

    exit_code = 1


class UsageError(InnotierError):
    """The command's arguments are wrong."""

    exit_code = 2


class ServerError(InnotierError):
    """A server could not be reached, or answered something we cannot use."""

    exit_code = 3


class SandboxError(InnotierError):
    """A sandbox operation cannot proceed in the sandbox's current state."""

    exit_code = 4


class ProfileError(InnotierError):
    """A profile or option file is invalid for its target."""

    exit_code = 5


class TierError(InnotierError):
    """A storage tier cannot be detected, created or used as asked."""

    exit_code = 6


class MoveError(InnotierError):
    """A relocation cannot proceed; nothing unsafe was done."""

    exit_code = 7


class WorkloadError(InnotierError):
    """The TPC-C workload cannot run or failed."""

    exit_code = 8


class SweepError(InnotierError):
    """A sweep spec or run is invalid."""

    exit_code = 9


class ToolMissing(InnotierError):
    """An external tool is not installed."""

    exit_code = 10


class CliWiringError(InnotierError):
    """A CLI module listed for start-up could not be wired in (import failed, no register())."""

    exit_code = 70  # EX_SOFTWARE: the installation is broken, not the user's input


class FleetError(InnotierError):
    """A fleet operation (Ansible over SSH) cannot start, or hosts failed."""

    exit_code = 11


class LabError(InnotierError):
    """The lab VM (emulated PMEM and md RAID) cannot be built or run."""

    exit_code = 12
