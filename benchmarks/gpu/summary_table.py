"""One table of ``scripts/gpu_check.sh``'s measurements, each against its target.

Reads what the check's steps wrote into its output folder and prints one Markdown table:

* **gradients** (``batch_grad.json``, ``bench_batch_grad.py``): each path of P replicas'
  gradients in milliseconds per iteration, beside the one-model floor (x floor);
* **codecs** (``codecs_torch.json``, ``bench_codecs_torch.py``): each codec's encode (with its
  copy to the host) and decode beside its GRACE peer, or dense and fp16 beside a copy of their
  wire bytes, with the ratio and its target;
* **paper tier** (``paper_dfs.json``, ``bench_paper_dfs.py``): each method's mean iteration
  beside the same run's floor, and the DFS experiment's projected hours (targets: DFS within
  2.5x the floor, at most 2 h).

A step that did not write its file gets one line saying so. Times are wall-clock.

Usage: python benchmarks/gpu/summary_table.py OUTDIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def _load(folder: Path, name: str) -> dict[str, Any] | None:
    try:
        return json.loads((folder / name).read_text())
    except (OSError, ValueError):
        return None


def _met(ok: bool | None) -> str:
    return "" if ok is None else ("met" if ok else "NOT met")


def gradients(data: dict[str, Any]) -> list[str]:
    """Rows of the gradient paths (ms per iteration, x floor)."""
    s = data.get("setting", {})
    where = f"{s.get('model')}, P = {s.get('replicas')} x B = {s.get('batch')}"
    return [
        f"| {'' if i else f'gradients ({where})'} | {r['path']} | {r['ms']:.1f} ms | "
        f"{r['x_floor']:.2f}x floor | | |"
        for i, r in enumerate(data["rows"])
    ]


def codecs(data: dict[str, Any]) -> list[str]:
    """Rows of the codecs against their peers (encode with copy, decode)."""
    out = []
    for r in data["rows"]:
        if r.get("encode_ratio") is None:
            continue
        out.append(
            f"| codecs (n = {data['n']:,}) | {r['codec']} vs {r['peer']} | "
            f"enc {r['encode_ms']:.2f} / {r['peer_encode_ms']:.2f} ms | "
            f"{r['encode_ratio']:.2f}x | <= {r['encode_target']}x | {_met(r['encode_met'])} |"
        )
        out.append(
            f"| | decode | {r['decode_ms']:.2f} / {r['peer_decode_ms']:.2f} ms | "
            f"{r['decode_ratio']:.2f}x | <= {r['decode_target']}x | {_met(r['decode_met'])} |"
        )
    return out


def paper(data: dict[str, Any]) -> list[str]:
    """Rows of the paper tier's methods against the floor, and the projection."""
    floor = data["gradient_paths_s"]["floor"]
    where = f"P = {data['workers']} x B = {data['batch']}"
    out = [f"| paper tier ({where}) | one-model floor | {1e3 * floor:.1f} ms | 1.00x | | |"]
    goal = data["goal_x_floor"]
    for r in data["methods"]:
        judged = r["method"] == "dfs"
        soft = r.get("software_s")
        out.append(
            f"| | {r['method']} mean iteration"
            + ("" if soft is None else f" (software alone {1e3 * soft:.0f} ms)")
            + f" | {1e3 * r['mean_iteration_s']:.1f} ms | "
            f"{r['x_floor']:.2f}x floor | {f'<= {goal}x' if judged else ''} | "
            f"{_met(r['x_floor'] <= goal) if judged else ''} |"
        )
    hours, goal_h = data["projected_h"], data["goal_h"]
    out.append(
        f"| | the DFS experiment, projected | {hours:.2f} h | | <= {goal_h} h | "
        f"{_met(hours <= goal_h)} |"
    )
    return out


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: summary_table.py OUTDIR", file=sys.stderr)
        return 2
    folder = Path(sys.argv[1])
    lines = ["| measurement | what | time | ratio | target | |", "|---|---|---|---|---|---|"]
    missing = []
    for name, rows in (
        ("batch_grad.json", gradients),
        ("codecs_torch.json", codecs),
        ("paper_dfs.json", paper),
    ):
        data = _load(folder, name)
        if data is None:
            missing.append(name)
            continue
        try:
            lines += rows(data)
        except (KeyError, TypeError) as exc:
            missing.append(f"{name} (no field {exc})")
    print("\n".join(lines))
    for name in missing:
        print(f"not in the table: {folder / name} was not written or is incomplete")
    return 0


if __name__ == "__main__":
    sys.exit(main())
