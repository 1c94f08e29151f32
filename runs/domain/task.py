"""The task contract a run is created under: the versions every run record pins (SPEC §1).

Pure module: standard library only.
"""

from __future__ import annotations

CONTRACT_VERSION = "fieldops-reservation@1.0.0"
POLICY_VERSION = "fieldops-policy@1.0.0"
