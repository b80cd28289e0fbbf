"""Write workflow/envs/psml.lock.txt: exact versions of psml-core's runtime dependencies.

The lock is the closure of ``psml-core``'s runtime requirements (no extras) as installed in the
running environment, one ``name==version`` line each; torch is pinned without its local build
label (``2.13.0``, not ``2.13.0+cpu``) so that the rules' environment can take either build.
workflow/envs/psml.yaml installs psml-core with it as pip constraints (``-c``).

Usage (in the environment to lock, after ``bash scripts/install.sh``):
    python scripts/lock_env.py > workflow/envs/psml.lock.txt
"""

from __future__ import annotations

import sys
from importlib import metadata

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = "psml-core"


def closure(root: str = ROOT) -> dict[str, str]:
    """Canonical name -> installed version of every runtime requirement of ``root``."""
    env = {**default_environment(), "extra": ""}
    seen: dict[str, str] = {}
    todo = [root]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        dist = metadata.distribution(name)
        seen[name] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(env):
                todo.append(req.name)
    del seen[canonicalize_name(root)]
    return seen


def main() -> None:
    """Print the lock file."""
    py = ".".join(map(str, sys.version_info[:2]))
    print("# Exact versions of psml-core's runtime dependencies (pip constraints), written by")
    print(f"# `python scripts/lock_env.py` on Python {py}, {sys.platform}. Used by psml.yaml.")
    for name, version in sorted(closure().items()):
        print(f"{name}=={version.split('+')[0]}")


if __name__ == "__main__":
    main()
