"""Journaled relocation of InnoDB components: plan -> preflight -> executor (copy, switch, verify) -> finalize.

Modules: ``components`` (what each component is), ``preflight`` (checks), ``plan`` (the
printable plan), ``journal`` (the fsynced state file and its semantics), ``copy``
(verified, durable, sparse-aware copies), ``control`` (stop/start, option-file location),
``placement`` (the option file), ``verify`` (table checksums, TPC-C checks), ``executor``.
"""
