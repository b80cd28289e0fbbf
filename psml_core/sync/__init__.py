"""Sync policies: when a worker may go on. See :mod:`.base`."""

from psml_core.sync.asp import ASP
from psml_core.sync.base import SYNC_POLICIES, SyncPolicy, make_sync_policy
from psml_core.sync.bsp import BSP
from psml_core.sync.ssp import SSP

__all__ = ["ASP", "BSP", "SSP", "SYNC_POLICIES", "SyncPolicy", "make_sync_policy"]
