"""Sync policies: when a worker may go on. See :mod:`.base`."""

from psml_core.sync.asp import ASP
from psml_core.sync.base import SYNC_POLICIES, SyncPolicy
from psml_core.sync.bsp import BSP
from psml_core.sync.dssp import DSSP
from psml_core.sync.pcp import PCP
from psml_core.sync.rounds import RoundPolicy, RoundReport
from psml_core.sync.ssp import SSP

__all__ = [
    "ASP",
    "BSP",
    "DSSP",
    "PCP",
    "RoundPolicy",
    "RoundReport",
    "SSP",
    "SYNC_POLICIES",
    "SyncPolicy",
]
