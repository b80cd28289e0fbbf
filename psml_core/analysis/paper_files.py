"""Reading the paper files (``config/papers/<id>.yaml``): the schema, then the rules it cannot say.

Beyond ``workflow/schemas/paper.schema.yaml``, :func:`load_papers` refuses, with one line that
names the file, the claim and the key:

* a claim of a number (any kind but ``qualitative``) without ``reported.value``, or one judged
  against a baseline (any kind but ``value`` and ``qualitative``) without ``measure.baseline``;
* an explanation that does not name its cause's class: every text but ``reproduced``'s must
  start with one of :data:`~psml_core.analysis.claim_result.CAUSE_CLASSES` and a colon
  (``method:``, ``regime:``, ``bound:``, ``ours:``), so that a sentence about our own setting
  never reads as the method's fault;
* a claim judged on a time, bytes or samples to target whose ``metrics`` lack
  ``final_test_accuracy`` (an accuracy cost must show beside the gain);
* a qualitative claim without ``measure.min_effect`` on its primary metric, a ``min_effect``
  on any other metric or on a claim of a number, and an ``oracle_share`` on a metric other
  than ``remote_bytes_total`` (the oracle bounds remote traffic only).
"""

from __future__ import annotations

import glob
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from psml_core.analysis.claim_result import CAUSE_CLASSES
from psml_core.analysis.resolution import TO_TARGET
from psml_core.config import load_yaml, validate
from psml_core.errors import ConfigError

__all__ = ["CLASS_PREFIX", "load_papers"]

CLASS_PREFIX = re.compile(rf"^\s*({'|'.join(CAUSE_CLASSES)}):\s")
"""An explanation's required start: its cause's class and a colon."""


def load_papers(
    directory: str | Path, extra: Sequence[str | Path] = ()
) -> dict[str, dict[str, Any]]:
    """Every paper file, validated, by id.

    The files are ``<id>.yaml`` under ``directory``, then ``extra`` (plugins' paper files); a
    file's name must match its id, and an id defined twice is an error.

    Raises:
        ConfigError: A file fails its schema or one of the module docstring's rules (one line
            naming the file, the claim and the key).
    """
    papers: dict[str, dict[str, Any]] = {}
    paths = [*sorted(glob.glob(str(Path(directory) / "*.yaml"))), *map(str, extra)]
    for path in paths:
        raw = load_yaml(path, "paper file")
        data = validate(raw, "paper", source=f"paper file {path!r}")
        if Path(path).stem != data["id"]:
            raise ConfigError(
                f"invalid paper file {path!r}: id {data['id']!r} must match the file name"
            )
        for claim in data["claims"]:
            _check_claim(claim, f"invalid paper file {path!r}: claim {claim['id']!r}")
        if data["id"] in papers:
            raise ConfigError(
                f"invalid paper file {path!r}: paper {data['id']!r} is defined twice (a "
                "plugin's paper file has the id of another paper); rename one"
            )
        papers[data["id"]] = data
    return papers


def _check_claim(claim: dict[str, Any], where: str) -> None:
    """The rules of the module docstring for one claim (``where`` starts each error)."""
    kind = claim["reported"]["kind"]
    meas = claim["measure"]
    metrics = list(meas["metrics"])
    if kind != "qualitative" and "value" not in claim["reported"]:
        raise ConfigError(f"{where} of kind {kind!r} needs reported.value")
    if kind not in ("value", "qualitative") and not meas.get("baseline"):
        raise ConfigError(f"{where} of kind {kind!r} needs measure.baseline")
    for key, text in (claim.get("explanation") or {}).items():
        if key != "reproduced" and not CLASS_PREFIX.match(str(text)):
            raise ConfigError(
                f"{where}: explanation.{key} must start with its cause's class and a colon "
                f"({', '.join(c + ':' for c in CAUSE_CLASSES)}), not {str(text).strip()[:40]!r}"
            )
    if metrics[0] in TO_TARGET and "final_test_accuracy" not in metrics:
        raise ConfigError(
            f"{where}: measure.metrics starts with {metrics[0]} (a to-target metric) and must "
            "list final_test_accuracy, so that an accuracy cost shows beside the gain"
        )
    _check_min_effect(claim, where)


def _check_min_effect(claim: dict[str, Any], where: str) -> None:
    """``measure.min_effect``: on a qualitative claim's primary metric, and only there."""
    meas = claim["measure"]
    primary = meas["metrics"][0]
    stated = meas.get("min_effect") or {}
    if claim["reported"]["kind"] != "qualitative":
        if stated:
            raise ConfigError(
                f"{where}: measure.min_effect is for qualitative claims (a claim of a number "
                "has its tolerance and partial floor)"
            )
        return
    if primary not in stated:
        raise ConfigError(
            f"{where}: measure.min_effect needs a floor for the primary metric {primary} (a "
            "qualitative claim is REPRODUCED only beyond a minimum effect fixed in advance)"
        )
    for metric, floor in stated.items():
        if metric != primary:
            raise ConfigError(
                f"{where}: measure.min_effect.{metric}: only the primary metric {primary} has "
                "a minimum effect (the others are held to measure.margins)"
            )
        if isinstance(floor, dict) and "oracle_share" in floor and metric != "remote_bytes_total":
            raise ConfigError(
                f"{where}: measure.min_effect.{metric}.oracle_share: the oracle bounds "
                "remote_bytes_total only"
            )
