"""Sync policies: when a worker may go on. See :mod:`.base`."""

from psml_core.sync.base import SYNC_POLICIES, SyncPolicy, make_sync_policy
from psml_core.sync.bsp import BSP

__all__ = ["BSP", "SYNC_POLICIES", "SyncPolicy", "make_sync_policy"]
