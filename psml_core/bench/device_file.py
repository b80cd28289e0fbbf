"""Writing a device file: the calibrated profile as YAML, cost lines inline, validated first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from psml_core.atomic import write_text
from psml_core.devices.device import device_from_dict

__all__ = [
    "device_yaml",
    "write_device",
]


class _Flow(dict):  # type: ignore[type-arg]
    """A mapping written inline (``{times: [1.0e-06, 2.0e-06], spread: 0.1}``)."""


class _Dumper(yaml.SafeDumper):
    """Block style, except :class:`_Flow` mappings and lists of scalars (inline)."""


_Dumper.add_representer(
    _Flow, lambda d, data: d.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True)
)


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, bool | int | float)


def _styled(data: Any) -> Any:
    """Mark the mappings of scalars (fit points) and the cost curves for inline style."""
    if isinstance(data, dict):
        if data and all(
            _scalar(v) or (k == "what" and isinstance(v, str)) for k, v in data.items()
        ):
            return _Flow(data)
        if "times" in data and all(
            _scalar(v) or (k == "times" and isinstance(v, list)) for k, v in data.items()
        ):
            return _Flow(data)
        return {k: _styled(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_styled(v) for v in data]
    return data


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = all(_scalar(v) for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _represent_list)


def device_yaml(content: dict[str, Any], header: str) -> str:
    """The device file's text: ``header`` as comments, then the YAML (cost lines inline)."""
    body = yaml.dump(
        _styled(content),
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        width=100,
        allow_unicode=True,
    )
    comments = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return comments + body


def write_device(path: str | Path, content: dict[str, Any], header: str) -> None:
    """Validate ``content`` as a device file and write it atomically."""
    device_from_dict(content, Path(path).stem, source=f"device file {str(path)!r} (to write)")
    write_text(path, device_yaml(content, header))
