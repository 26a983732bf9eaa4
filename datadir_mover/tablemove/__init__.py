"""Moving one table onto a tier (and back) while clients keep running, under a journal.

MySQL 8+: a general tablespace in a tier root registered in ``innodb_directories``, ``ALTER TABLE ...
TABLESPACE=`` (the server's own DDL copies the table).  MariaDB: ``pt-online-schema-change --data-dir``
fills a shadow table created with ``DATA DIRECTORY``; innotier verifies the two tables equal in one
consistent snapshot and then swaps them itself with one atomic ``RENAME TABLE``.  docs/table-moves.md.
"""
