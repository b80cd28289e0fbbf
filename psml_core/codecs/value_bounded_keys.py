"""The value-bounded filter's key mode (MXNet's per-key mean) and the checks both modes share.

See :class:`~psml_core.codecs.value_bounded.ValueBoundedCodec` for the algorithm and the wire
format: whole keys whose mean ``|v|`` is at least the bound are sent as MXNet's kvstore sends
dense keys, one uint64 key number per sent key and its values whole.
"""

from __future__ import annotations

import numpy as np

__all__ = ["check_decoded", "check_sent", "decode_keys", "filter_keys", "key_bounds"]

_F32 = np.dtype("<f4")
_U64 = np.dtype("<u8")
_U32 = np.dtype("<u4")
_CHUNK = 1 << 16  # elements per pass: temporaries stay in cache


def filter_keys(
    r: np.ndarray, u: np.ndarray, theta: float, bounds: np.ndarray
) -> tuple[bytes, int]:
    """Key mode: whole keys whose mean |v| >= theta; returns (wire buffer, elements sent).

    The pass runs over chunks of whole keys of about ``_CHUNK`` elements (a longer key is a
    chunk of its own), so ``|v|`` never needs a vector-sized temporary.
    """
    n = int(u.size)
    sizes = np.diff(bounds)
    if n == 0:  # no key: the message is its (zero) count
        return bytes(4), 0
    th = r.dtype.type(theta)
    with np.errstate(over="ignore"):
        if th == 0:  # every mean is >= 0: every key is sent
            np.add(r, u, out=r)
            sent = np.arange(sizes.size)
        else:
            # chunk j covers keys [cuts[j], cuts[j + 1]): the first key starting at or after
            # each multiple of _CHUNK opens a chunk
            cuts = np.unique(np.searchsorted(bounds[:-1], np.arange(0, n, _CHUNK)))
            cuts = np.append(cuts, sizes.size)
            widths = bounds[cuts[1:]] - bounds[cuts[:-1]]
            absbuf = np.empty(int(widths.max()), dtype=r.dtype)
            sums = np.empty(sizes.size, dtype=np.float64)
            for k0, k1 in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
                s, e = int(bounds[k0]), int(bounds[k1])
                rc = r[s:e]
                np.add(rc, u[s:e], out=rc)
                a = np.abs(rc, out=absbuf[: e - s])
                sums[k0:k1] = np.add.reduceat(a, bounds[k0:k1] - s, dtype=np.float64)
            sent = np.flatnonzero(sums / sizes >= th)
    z = sizes[sent]
    m = int(z.sum())
    # element indices of the sent keys: each key's range, back to back
    idx = np.arange(m, dtype=np.int64)
    if sent.size:
        idx += np.repeat(bounds[sent] - (np.cumsum(z) - z), z)
    s_keys = int(sent.size)
    out = np.empty(4 + 8 * s_keys + 4 * m, dtype=np.uint8)
    out[:4].view(_U32)[0] = s_keys
    out[4 : 4 + 8 * s_keys].view(_U64)[:] = sent
    vals = out[4 + 8 * s_keys :].view(_F32)
    v = r[idx]
    vals[:] = v
    check_sent(vals)
    r[idx] = v - vals if r.dtype == np.float64 else 0
    return out.tobytes(), m


def key_bounds(n: int, key_size: int, given: object) -> np.ndarray:
    """Key boundaries ``0 = b_0 < ... < b_K = n``: ``given``, or every ``key_size`` elements.

    ``given`` is ``ctx.extra["key_bounds"]`` (None when absent).
    """
    if given is None:
        return np.append(np.arange(0, n, key_size, dtype=np.int64), n)
    b = np.asarray(given)
    if (
        b.ndim != 1
        or b.size < 1
        or not np.issubdtype(b.dtype, np.integer)
        or b[0] != 0
        or b[-1] != n
        or np.any(np.diff(b) <= 0)
    ):
        raise ValueError(
            f'ctx.extra["key_bounds"] must be integers 0 = b_0 < b_1 < ... < b_K = n = {n}'
        )
    return b.astype(np.int64)


def decode_keys(buf: bytes | memoryview, n: int, bounds: np.ndarray) -> np.ndarray:
    """Parse a key-mode buffer of an ``n``-vector into a dense float32 vector (strict)."""
    length = len(buf)
    sizes = np.diff(bounds)
    if length < 4:
        raise ValueError(f"key-mode payload of {length} bytes has no key count (4 bytes)")
    s_keys = int(np.frombuffer(buf, dtype=_U32, count=1)[0])
    if s_keys > sizes.size or length < 4 + 8 * s_keys:
        raise ValueError(
            f"key-mode payload of {length} bytes names {s_keys} keys of a vector with "
            f"{sizes.size} keys"
        )
    keys = np.frombuffer(buf, dtype=_U64, count=s_keys, offset=4).astype(np.int64)
    if s_keys and (keys[-1] >= sizes.size or keys[0] < 0 or np.any(keys[1:] <= keys[:-1])):
        raise ValueError(f"key-mode key numbers must be ascending and in [0, {sizes.size})")
    z = sizes[keys]
    m = int(z.sum())
    if length != 4 + 8 * s_keys + 4 * m:
        raise ValueError(
            f"key-mode payload of {length} bytes does not hold its {s_keys} keys' {m} values "
            f"({4 + 8 * s_keys + 4 * m} bytes)"
        )
    vals = np.frombuffer(buf, dtype=_F32, offset=4 + 8 * s_keys)
    check_decoded(vals)
    idx = np.arange(m, dtype=np.int64)
    if s_keys:
        idx += np.repeat(bounds[keys] - (np.cumsum(z) - z), z)
    out = np.zeros(n, dtype=np.float32)
    out[idx] = vals
    return out


def check_sent(v32: np.ndarray) -> None:
    """ValueError unless every value about to be sent is finite (the residual overflowed)."""
    if not np.isfinite(v32).all():
        raise ValueError(
            "value_bounded: the accumulated update overflowed float32 (input + residual is not "
            "finite); the codec's residual is no longer usable"
        )


def check_decoded(vals: np.ndarray) -> None:
    """ValueError unless every decoded value is finite."""
    if not np.isfinite(vals).all():
        raise ValueError("value_bounded payload holds a non-finite value: it is corrupted")
