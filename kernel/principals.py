"""How long a principal reference may be.

A principal acting in the console is ``user:<user name>`` (``access.roles.principal_ref_of``),
and Django allows user names of 150 characters, so every column that records who acted
(a decision, a vote, an operation, a catalog review, a fault-lab run) holds 160. A run's
own principal is the exception: the capability contracts carry it to every tool as
``principal_ref`` of at most 64 characters (``capabilities.common``), so ``run_create``
refuses a longer one with a clear error rather than start a run no tool would accept.
"""

PRINCIPAL_REF_MAX = 160
