"""High availability: two ``up`` processes on one PostgreSQL, one leading (see :mod:`ha.elector`).

Modules: ``schema`` (the lease table) → ``lease`` (acquire, renew, read; database time) →
``elector`` (the role of this process, a thread renewing or trying) → ``fence`` (leader-only
transactions check the lease they run under).
"""
