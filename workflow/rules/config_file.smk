# The config file, checked before Snakemake reads it: Snakemake's own message for a YAML error
# or a top-level list names neither the file nor the line. A --configfile given on the command
# line is read before this runs; `psml config --configfile FILE` checks one (README).
import os
import sys


def _check_config_file(path):
    """One line naming the file, line and problem, before Snakemake's own message (no file)."""
    import yaml

    if not os.path.isfile(path):
        return  # Snakemake's own error names a missing file
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        sys.exit(f"error: {path}{where}: not valid YAML ({problem}); fix the file")
    if data is not None and not isinstance(data, dict):
        sys.exit(f"error: {path}: expected `key: value` lines at the top level, got a list")


_check_config_file("config/config.yaml")
