"""The ``psml`` command line as a newcomer meets it: help on every option, suggestions."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from psml_core.cli import _parser, main


def _parsers(
    parser: argparse.ArgumentParser, path: str = "psml"
) -> list[tuple[str, argparse.ArgumentParser]]:
    """``parser`` and every sub-command's parser under it, each with its command line."""
    out = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _parsers(sub, f"{path} {name}")
    return out


def test_every_option_of_every_subcommand_has_help():
    missing = [
        f"{path} {'/'.join(a.option_strings) or a.dest}"
        for path, parser in _parsers(_parser())
        for a in parser._actions
        if not a.help and not isinstance(a, argparse._SubParsersAction)
    ]
    assert len(_parsers(_parser())) > 10  # the walk reached the sub-commands
    assert missing == []


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [(["trian"], "'train'"), (["bench", "codec"], "'codecs'"), (["shw", "x"], "'show'")],
)
def test_a_misspelt_choice_gets_a_suggestion(argv, suggestion, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    # argparse's usage, then the one error line ending with the suggestion; no traceback.
    assert err.strip().splitlines()[-1].endswith(f"did you mean {suggestion}?")
    assert "Traceback" not in err


def test_a_choice_far_from_every_command_gets_no_guess(capsys):
    with pytest.raises(SystemExit):
        main(["zzzzzz"])
    assert "did you mean" not in capsys.readouterr().err


def test_the_two_calibrations_have_names_that_say_which(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "calibrate-sweep" in text and "bench calibrate" in text
    with pytest.raises(SystemExit):
        main(["calibrate", "--spec", "x"])
    assert "did you mean 'calibrate-sweep'?" in capsys.readouterr().err


# What `psml runs` and `psml show` may import: config and registries, not the engine's,
# the analysis' or the report's heavy libraries (measured: pandas alone was 0.6 s of 7 s).
_REPO = Path(__file__).resolve().parents[2]
_HEAVY = ("torch", "pandas", "matplotlib", "seaborn", "typst", "pyarrow", "numba", "sklearn")


@pytest.mark.parametrize(
    "argv", [["runs", "--tier", "smoke"], ["show", "nosuch/run", "--tier", "smoke"]]
)
def test_runs_and_show_import_no_heavy_library(argv):
    code = (
        "import json, sys\n"
        "from psml_core.cli import main\n"
        f"rc = main({argv!r})\n"
        f"print(json.dumps([rc, [m for m in {_HEAVY!r} if m in sys.modules]]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=_REPO
    )
    rc, heavy = json.loads(proc.stdout.splitlines()[-1])
    # runs lists the tier; show of an unknown run says so after loading the tier.
    assert rc == (0 if argv[0] == "runs" else 2), proc.stderr
    assert argv[0] == "runs" or "neither a run of tier 'smoke'" in proc.stderr
    assert heavy == []
