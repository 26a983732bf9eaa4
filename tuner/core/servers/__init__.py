"""Server distributions: MySQL 9.7 and MariaDB 11.8 as minimal Debian trees, MariaDB 10.11 from the host.

``distributions`` says what each one is, ``build`` obtains it (debootstrap + apt, or a cache archive),
``tree`` runs and verifies what is installed under ``innotier_cache()/servers``.
"""
