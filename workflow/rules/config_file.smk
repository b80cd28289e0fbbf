# The config files, checked before Snakemake reads config/config.yaml: Snakemake's own messages
# for a YAML error, an empty file or a top-level list name neither the file nor the line, and
# it reads a non-UTF-8 file with a traceback and a key written twice as its last value. A
# --configfile given on the command line was read by Snakemake already; it is checked here too
# (its duplicate keys, which Snakemake accepted), and `psml config --configfile FILE` checks one.
#
# Each file is read bounded (psml_core/config/reading.py: size, nesting, aliases expanded), so an
# alias bomb stops here before validation could walk it. Snakemake's own reader (JSON, else
# PyYAML's FullLoader via yte: YAML 1.1) shares an alias's node rather than copying it, so a bomb
# costs it nothing; but a --configfile nested thousands of levels deep ends in a RecursionError
# inside Snakemake's command line, before any workflow code runs: only `psml config` names it.
import sys

from psml_core.config import load_yaml
from psml_core.errors import ConfigError


def _check_config_file(path):
    """The file as psml reads it (bounded, YAML 1.2), or one line naming the file, line and
    problem, before Snakemake's own message (no file); None where it does not exist."""
    try:
        data = load_yaml(path, empty_ok=False)
    except ConfigError as exc:
        if "does not exist" in str(exc):
            return None  # Snakemake's own error names a missing file
        sys.exit(f"error: {exc}")
    if not isinstance(data, dict):
        sys.exit(f"error: {path}: expected `key: value` lines at the top level, got a list")
    return data


# In Snakemake's order (config/config.yaml, then each --configfile): common.smk re-types the
# numbers Snakemake's YAML 1.1 reader left as strings (1e-3) from these.
CONFIG_FILES = {}
for _path in ["config/config.yaml", *workflow.overwrite_configfiles]:
    _data = _check_config_file(str(_path))
    if _data is not None:
        CONFIG_FILES[str(_path)] = _data
