"""The horovod backend (optional extra): dense and compressed allreduce over Horovod's Gloo.

Importing this package registers ``"horovod"`` in
:data:`~psml_core.engine.backend.BACKENDS`; it never imports Horovod itself, which is loaded
when a run starts (install it with ``scripts/install_horovod.sh``).
"""

from psml_core.engine.horovod.backend import HorovodBackend, HorovodResult
from psml_core.engine.horovod.runtime import HorovodOptions, import_horovod

__all__ = ["HorovodBackend", "HorovodOptions", "HorovodResult", "import_horovod"]
