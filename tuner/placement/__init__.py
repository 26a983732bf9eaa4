"""Which files and tables belong on the fast tier (issue 31, items 1-3).

measure (performance_schema, per file and per table, in intervals) -> candidates (tables, partitions and
the mover's components with their sizes) -> a tier priced in the same terms (fio: page-size random read,
synchronous write and fsync, sequential bandwidth) -> advice under a byte budget (exact 0/1 knapsack, or
greedy by gain per byte), with a bootstrap interval over the measured intervals, the curve of gain
against budget and naive picks of the same size beside it.  Stored in the results store; docs/placement.md.
"""
