"""Write workflow/envs/psml.yaml: the rules' conda environment, every dependency pinned.

The pins are the closure of ``psml-core``'s runtime requirements (no extras) as installed in the
running environment, one ``name==version`` each; torch is pinned without its local build label
(``2.13.0``, not ``2.13.0+cpu``) so that the environment can take either build. They sit in the
environment file itself, because Snakemake builds an environment from a copy of that one file
(a file beside it would not be found) and rebuilds it when that file's hash changes.

Usage (in the environment to lock, after ``bash scripts/install.sh``):
    python scripts/lock_env.py > workflow/envs/psml.yaml
"""

from __future__ import annotations

import sys
from importlib import metadata

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = "psml-core"


def closure(root: str = ROOT) -> dict[str, str]:
    """Canonical name -> installed version of every runtime requirement of ``root``.

    A requirement's extras are followed (``snakemake[reports]`` brings pygments).
    """
    base = default_environment()
    seen: dict[str, str] = {}
    done: set[tuple[str, str]] = set()
    todo: list[tuple[str, frozenset[str]]] = [(root, frozenset())]
    while todo:
        raw, extras = todo.pop()
        name = canonicalize_name(raw)
        wanted = {(name, e) for e in {"", *extras}} - done
        if not wanted:
            continue
        done |= wanted
        dist = metadata.distribution(name)
        seen[name] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or any(
                req.marker.evaluate({**base, "extra": e}) for _, e in wanted
            ):
                todo.append((req.name, frozenset(req.extras)))
    del seen[canonicalize_name(root)]
    return seen


HEADER = """\
# The lock of the rules' conda environments (snakemake --sdm conda), written by
# `python scripts/lock_env.py > workflow/envs/psml.yaml` on Python {py}, {platform}: the exact
# versions of psml-core's runtime dependencies. The workflow derives two environments from it
# (psml_core/deploy.py, written under .snakemake/psml/envs/): `cpu`, torch {torch}+cpu from the
# PyTorch CPU index, for every rule but GPU training; `cuda`, pip's default torch {torch} (CUDA on
# Linux; its nvidia-* and triton libraries are not pinned, as this lock was written where torch
# is the CPU build), for training with device cuda or auto. Both end by installing psml-core
# from where the workflow came: the checkout's absolute path, or the github(...) module's
# repository at its tag or commit.
channels:
  - conda-forge
  - nodefaults
dependencies:
  - python={py}
  - pip
  - pip:
"""


def main() -> None:
    """Print the environment file."""
    pins = {name: version.split("+")[0] for name, version in closure().items()}
    py = ".".join(map(str, sys.version_info[:2]))
    print(HEADER.format(py=py, platform=sys.platform, torch=pins.get("torch", "?")), end="")
    for name, version in sorted(pins.items()):
        print(f"      - {name}=={version}")


if __name__ == "__main__":
    main()
