"""Whether two runs of a tier give the same verdict for every claim (a CPU and a GPU smoke run).

Usage: python benchmarks/gpu/compare_verdicts.py CPU_CLAIMS.csv OTHER_CLAIMS.csv

Prints one line per claim (its verdict in each run and its effect in each), then ``same
verdicts: yes`` or ``same verdicts: NO`` with the claims that differ. Exit status 0 when every
claim of the first file has the same verdict in the second, 1 otherwise (2: a file is missing
or has no ``claim``/``verdict`` columns).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

KEYS = ("paper", "claim")


def load(path: str) -> pd.DataFrame:
    """A claims table indexed by paper and claim."""
    if not Path(path).is_file():
        print(f"{path}: no such file (did the run reach its claims?)")
        raise SystemExit(2)
    table = pd.read_csv(path)
    keys = [k for k in KEYS if k in table.columns]
    if "verdict" not in table.columns or "claim" not in keys:
        print(f"{path}: no claim and verdict columns (has {list(table.columns)})")
        raise SystemExit(2)
    return table.set_index(keys)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    ref, other = load(argv[0]), load(argv[1])
    effect = next((c for c in ("ours", "effect", "measured") if c in ref.columns), None)
    differ = []
    for key, row in ref.iterrows():
        got = other.loc[key, "verdict"] if key in other.index else "(missing)"
        mark = "" if got == row["verdict"] else "   <-- differs"
        extra = ""
        if effect is not None and key in other.index:
            extra = f"   effect {row[effect]} vs {other.loc[key, effect]}"
        print(f"{key}: {row['verdict']} | {got}{extra}{mark}")
        if mark:
            differ.append(key)
    print(
        f"same verdicts: {'yes' if not differ else 'NO'} ({len(ref)} claims, {len(differ)} differ)"
    )
    return 0 if not differ else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
