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
# The conda environment of every rule (snakemake --sdm conda), written by
# `python scripts/lock_env.py > workflow/envs/psml.yaml` on Python {py}, {platform}: the exact
# versions of psml-core's runtime dependencies, then psml_core itself from the checkout Snakemake
# runs in (`-e ../..` is resolved from .snakemake/conda/, where Snakemake copies this file).
# torch is pinned as {torch}: pip's default build (CUDA on Linux); the CUDA libraries it brings
# (nvidia-*, triton) are not pinned, as this lock was written where torch is the CPU build.
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
    print("      - -e ../..")


if __name__ == "__main__":
    main()
