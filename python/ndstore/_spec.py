"""Building the spec ``ndstore.open`` hands to nds_array_open.

The schema options go where the command line puts them (cli/spec_build.c, docs/cli.md "Specs, URLs and
regions"): the spec's ``"schema"`` member in TensorStore's shape,
``{"dtype": "uint16", "domain": {"shape": [..]}, "chunk_layout": {"chunk": {"shape": [..]}},
"fill_value": V, "codec": "zstd:1"}``, so ``ndstore.open(url, create=True, shape=, chunks=, dtype=,
codec=)`` writes the same metadata as ``ndstore create URL --shape --chunks --dtype --codec``. A URL is
split by the C library (nds_spec_url_split) into ``{"driver": FORMAT, "kvstore": KVURL}``; a URL without
``|FORMAT:`` is zarr (v2) when creating and detected from the stored metadata when only opening.
"""
import json
import math
import numbers

import numpy as np

from . import _ndstore
from ._dtypes import dtype_name

MODE_OPEN = _ndstore.OPEN_EXISTING
MODE_CREATE = _ndstore.OPEN_CREATE
MODE_DELETE = _ndstore.OPEN_DELETE_EXISTING


def _shape_list(value, what):
    if isinstance(value, numbers.Integral):
        value = (value,)
    try:
        out = [int(v) for v in value]
        ok = all(isinstance(v, (numbers.Integral, np.integer)) for v in value)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise TypeError("%s: expected a sequence of integers, got %r" % (what, value))
    bad = [v for v in out if v < 0 or (what == "chunks" and v == 0)]
    if bad:
        raise ValueError("%s: %r has %s" % (what, tuple(out), "a negative size" if what == "shape" or bad[0] < 0
                                             else "a zero chunk size"))
    return out


def _fill_json(value):
    """A fill value as the JSON the formats take (NaN and infinities as the strings zarr writes)."""
    if isinstance(value, (np.datetime64, np.timedelta64)):  # as the int64 count of its unit; NaT as "NaT"
        return "NaT" if np.isnat(value) else int(value.astype("i8"))
    if isinstance(value, str):  # "NaT", or a string array's fill element (issue 20)
        return value
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        v = float(value)
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return v
    if isinstance(value, numbers.Complex):
        return [_fill_json(value.real), _fill_json(value.imag)]
    raise TypeError("fill_value: expected a number, bool, str or None, got %r" % (value,))


def _load(spec_or_url):
    """(spec dict or None, url or None) from a URL, JSON text, "@file.json" or a dict."""
    if isinstance(spec_or_url, dict):
        return json.loads(json.dumps(spec_or_url)), None
    if isinstance(spec_or_url, bytes):
        spec_or_url = spec_or_url.decode()
    if hasattr(spec_or_url, "__fspath__"):
        spec_or_url = str(spec_or_url.__fspath__())
    if not isinstance(spec_or_url, str):
        raise TypeError("spec_or_url: expected a URL, JSON text or a dict, got %s" % type(spec_or_url).__name__)
    text = spec_or_url.strip()
    if not text:
        raise ValueError("spec_or_url: is empty")
    if text.startswith("@"):
        with open(text[1:]) as f:
            text = f.read().strip()
    if text.startswith("{"):
        try:
            spec = json.loads(text)
        except ValueError as e:
            raise ValueError("spec_or_url: invalid JSON: %s" % e) from None
        if not isinstance(spec, dict):
            raise ValueError("spec_or_url: the JSON spec must be an object")
        return spec, None
    return None, text


def build(spec_or_url, create, open_, delete_existing, shape, dtype, chunks, codec, fill_value, fmt):
    """(text for nds_array_open, mode bits, url or None)."""
    if not (open_ or create):
        raise ValueError("open, create: at least one must be True")
    if delete_existing and not create:
        raise ValueError("delete_existing: needs create=True")
    mode = (MODE_OPEN if open_ else 0) | (MODE_CREATE if create else 0) | (MODE_DELETE if delete_existing else 0)
    spec, url = _load(spec_or_url)
    schema = {}
    if dtype is not None:
        schema["dtype"] = dtype_name(dtype)
    if shape is not None:
        schema["domain"] = {"shape": _shape_list(shape, "shape")}
    if chunks is not None:
        schema["chunk_layout"] = {"chunk": {"shape": _shape_list(chunks, "chunks")}}
        if shape is not None and len(schema["chunk_layout"]["chunk"]["shape"]) != len(schema["domain"]["shape"]):
            raise ValueError("chunks: %d dimensions, but shape has %d" % (
                len(schema["chunk_layout"]["chunk"]["shape"]), len(schema["domain"]["shape"])))
    if codec is not None:
        if not isinstance(codec, str):
            raise TypeError("codec: expected a codec string such as 'zstd:1', 'blosc:lz4:5' or 'none', got %r"
                            % (codec,))
        schema["codec"] = codec
    if fill_value is not None:
        schema["fill_value"] = _fill_json(fill_value)
    if spec is None:
        if fmt is None and (not schema or not create):
            # Opening a URL: the library detects the format from the stored metadata (the caller checks
            # shape, dtype and chunks given with it against what opened).
            return url, mode, url
        kvurl, url_format = _ndstore.url_split(url)
        if fmt is not None and url_format is not None and fmt != url_format:
            raise ValueError("format: %r conflicts with the URL's format %r" % (fmt, url_format))
        spec = {"driver": fmt or url_format or "zarr", "kvstore": kvurl}
    elif fmt is not None:
        if spec.get("driver") not in (None, fmt):
            raise ValueError("format: %r conflicts with the spec's driver %r" % (fmt, spec.get("driver")))
        spec["driver"] = fmt
    if schema:
        existing = spec.setdefault("schema", {})
        if not isinstance(existing, dict):
            raise ValueError("spec_or_url: member \"schema\" must be an object")
        for key, value in schema.items():
            existing[key] = value
    return json.dumps(spec), mode, url
