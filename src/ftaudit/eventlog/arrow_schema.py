"""Pydantic annotations to Arrow types, and a columnar converter for lists of values.

The converter reads model field values column by column (no ``model_dump``, no per-value
Python code), which is what keeps ``EventWriter`` flushes cheap. Supported: ``int``,
``float`` (NaN and inf kept), ``bool``, ``str``, UTC ``datetime``, string enums and
literals, ``X | None``, ``list[X]``, ``dict[K, V]`` (int or str keys) and nested models
(structs).
"""

from __future__ import annotations

import datetime as dt
import enum
import itertools
import operator
import types
import typing
from operator import itemgetter
from typing import Any, Literal, Union, get_args, get_origin

import numpy as np
import pyarrow as pa
from pydantic import BaseModel

from ftaudit.errors import UnsupportedAnnotation
from ftaudit.eventlog.arrays import concat_ranges, consecutive_repeats
from ftaudit.eventlog.hotpath import runs_buffers
from ftaudit.eventlog.intruns import IntRuns

_PRIMITIVES: dict[Any, pa.DataType] = {
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
    str: pa.string(),
    dt.datetime: pa.timestamp("us", tz="UTC"),
}


def is_optional(annotation: Any) -> bool:
    """Whether ``annotation`` is a union with ``None`` (``X | None``, ``Optional[X]``)."""
    origin = get_origin(annotation)
    return origin in (Union, types.UnionType) and type(None) in get_args(annotation)


def strip_optional(annotation: Any) -> Any:
    """``X`` of ``X | None`` and of ``Annotated[X, ...]``, at any nesting; anything else as
    it is. Raises :class:`UnsupportedAnnotation` for another union (not storable)."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return strip_optional(args[0])
        raise UnsupportedAnnotation(f"unions other than X | None are not storable: {annotation}")
    if origin is typing.Annotated:
        return strip_optional(get_args(annotation)[0])
    return annotation


RUNS_FIELDS: list[tuple[str, Any]] = [("starts", list[int]), ("lengths", list[int])]
"""The stored fields of :class:`IntRuns` (a plain class, stored as a struct as models are)."""


def is_struct(annotation: Any) -> bool:
    """Whether values of ``annotation`` are stored as a struct: a model, or ``IntRuns``."""
    return annotation is IntRuns or (
        isinstance(annotation, type) and issubclass(annotation, BaseModel)
    )


def model_fields(
    model: type[BaseModel] | type[IntRuns], skip: frozenset[str] = frozenset()
) -> list[tuple[str, Any]]:
    """``(name, annotation)`` of a model's (or ``IntRuns``') stored fields, in order."""
    if model is IntRuns:
        return RUNS_FIELDS
    return [(n, f.annotation) for n, f in model.model_fields.items() if n not in skip]


def arrow_type(annotation: Any) -> pa.DataType:
    """The Arrow type that stores values of ``annotation``."""
    ann = strip_optional(annotation)
    if ann in _PRIMITIVES:
        return _PRIMITIVES[ann]
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return pa.string()
    origin = get_origin(ann)
    if origin is Literal:
        return pa.string()
    if origin in (list, tuple):
        args = get_args(ann)
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            raise UnsupportedAnnotation(f"only homogeneous tuples are storable: {ann}")
        return pa.list_(arrow_type(args[0]))
    if origin is dict:
        key, value = get_args(ann)
        if key not in (int, str):
            raise UnsupportedAnnotation(f"map keys must be int or str: {ann}")
        return pa.map_(arrow_type(key), arrow_type(value))
    if is_struct(ann):
        return pa.struct([pa.field(n, arrow_type(a)) for n, a in model_fields(ann)])
    raise UnsupportedAnnotation(f"no Arrow mapping for {annotation!r}")


def _mask(values: list[Any]) -> pa.Array | None:
    # identity tests in C: `None in values` would call each model's Python-level __eq__
    nulls = list(map(operator.is_, values, itertools.repeat(None)))
    return pa.array(nulls, type=pa.bool_()) if any(nulls) else None


def _plain(annotation: Any) -> bool:
    """Whether Arrow converts values of ``annotation`` as they are: numbers, strings, lists
    of them (an enum, a datetime, a dict or a model needs the field-by-field path)."""
    ann = strip_optional(annotation)
    if ann in (int, float, bool, str):
        return True
    return get_origin(ann) is list and _plain(get_args(ann)[0])


def _plain_model(model: type[BaseModel] | type[IntRuns]) -> bool:
    return all(_plain(annotation) for _, annotation in model_fields(model))


def _offsets(items: list[Any]) -> pa.Array:
    return pa.array(list(itertools.accumulate(map(len, items), initial=0)), type=pa.int32())


def to_arrow(values: list[Any], annotation: Any) -> pa.Array:
    """Convert a column of Python values of type ``annotation`` to an Arrow array.

    A composite value (an id-run set, a map) logged in several rows in a row, as the hooks
    log one stale set with each witness instance's snapshot, is converted once and
    repeated by Arrow (``take``).
    """
    ann = strip_optional(annotation)
    typ = arrow_type(ann)
    if ann in _PRIMITIVES:
        return pa.array(values, type=typ)
    repeats = consecutive_repeats(values)
    if repeats is not None:
        heads, index = repeats
        return _composite(heads, ann, typ).take(pa.array(index))
    return _composite(values, ann, typ)


def pairs_to_arrow(
    keys_column: list[tuple], values_column: list[tuple], annotation: Any
) -> pa.Array:
    """``to_arrow`` of a column of maps given as each row's keys and values, two tuples of
    one length (no NULLs).

    A key sequence repeated in consecutive rows as one shared tuple (a metric's names,
    every step) is converted once; Arrow then copies its keys into each row (``take``).
    """
    ann = strip_optional(annotation)
    key_ann, value_ann = get_args(ann)
    n = len(values_column)
    lengths = np.fromiter(map(len, values_column), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    values = to_arrow(list(itertools.chain.from_iterable(values_column)), value_ann)
    repeats = consecutive_repeats(keys_column)
    if repeats is None:
        keys = to_arrow(list(itertools.chain.from_iterable(keys_column)), key_ann)
    else:
        heads, index = repeats
        head_keys = to_arrow(list(itertools.chain.from_iterable(heads)), key_ann)
        head_starts = np.zeros(len(heads), dtype=np.int64)
        np.cumsum(
            np.fromiter(map(len, heads), dtype=np.int64, count=len(heads))[:-1], out=head_starts[1:]
        )
        # row i's keys are its head's, from where that head's keys start
        keys = head_keys.take(pa.array(concat_ranges(head_starts[index], lengths)))
    return pa.MapArray.from_arrays(pa.array(offsets), keys, values, type=arrow_type(ann))


def _composite(values: list[Any], ann: Any, typ: pa.DataType) -> pa.Array:
    """``to_arrow`` of values of a type that is not a primitive."""
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return pa.array([None if v is None else v.value for v in values], type=typ)
    origin = get_origin(ann)
    if origin is Literal:
        return pa.array(values, type=typ)
    if origin in (list, tuple):
        if strip_optional(get_args(ann)[0]) in _PRIMITIVES:
            # lists of numbers or strings (IntRuns' starts and lengths): Arrow's C++
            # converter walks them, NULLs included, 3x faster than flattening in Python
            return pa.array(values, type=typ)
        mask = _mask(values)
        items = values if mask is None else [() if v is None else v for v in values]
        flat = to_arrow(list(itertools.chain.from_iterable(items)), get_args(ann)[0])
        return pa.ListArray.from_arrays(_offsets(items), flat, type=typ, mask=mask)
    if origin is dict:
        key_ann, value_ann = get_args(ann)
        mask = _mask(values)
        items = values if mask is None else [{} if v is None else v for v in values]
        keys = to_arrow(list(itertools.chain.from_iterable(map(dict.keys, items))), key_ann)
        vals = to_arrow(list(itertools.chain.from_iterable(map(dict.values, items))), value_ann)
        return pa.MapArray.from_arrays(_offsets(items), keys, vals, type=typ, mask=mask)
    if ann is IntRuns:
        laid = runs_buffers(values)
        if laid is not None:
            return _runs_array(laid, len(values), typ)
    # a nested model; a pydantic model keeps its field values in its __dict__ (vars), which
    # is read 3x faster than its attributes
    mask = _mask(values)
    if mask is None and _plain_model(ann):
        # Arrow's converter reads the models' field values in one pass, as tuples: a
        # fifth faster than their value dicts, whose keys it would look up row by row
        names = [name for name, _ in model_fields(ann)]
        if len(names) == 1:
            return pa.array(list(map(vars, values)), type=typ)
        return pa.array(list(map(itemgetter(*names), map(vars, values))), type=typ)
    if mask is None:
        columns = list(map(vars, values))
        children = [
            to_arrow(list(map(itemgetter(name), columns)), field_ann)
            for name, field_ann in model_fields(ann)
        ]
    else:
        children = [
            to_arrow([None if v is None else getattr(v, name) for v in values], field_ann)
            for name, field_ann in model_fields(ann)
        ]
    return pa.StructArray.from_arrays(children, fields=list(typ), mask=mask)


def _runs_array(laid: tuple[bytes, bytes, bytes, bytes], n: int, typ: pa.DataType) -> pa.Array:
    """``n`` id runs laid out by ``hotpath.runs_buffers`` as the struct array ``typ``:
    Arrow's converter would walk each object's two lists, 5-10x slower."""
    starts_at, starts, lengths_at, lengths = map(pa.py_buffer, laid)
    item = typ.field(0).type

    def as_list(offsets: pa.Buffer, values: pa.Buffer) -> pa.Array:
        flat = pa.Array.from_buffers(pa.int64(), values.size // 8, [None, values])
        return pa.Array.from_buffers(item, n, [None, offsets], children=[flat])

    return pa.StructArray.from_arrays(
        [as_list(starts_at, starts), as_list(lengths_at, lengths)], fields=list(typ)
    )


def from_arrow(value: Any, annotation: Any) -> Any:
    """Undo what ``Array.to_pylist`` changed: maps come back as lists of pairs."""
    if value is None:
        return None
    ann = strip_optional(annotation)
    origin = get_origin(ann)
    if origin in (list, tuple):
        (item_ann,) = get_args(ann)[:1]
        return [from_arrow(v, item_ann) for v in value]
    if origin is dict:
        value_ann = get_args(ann)[1]
        return {k: from_arrow(v, value_ann) for k, v in value}
    if is_struct(ann):
        return {n: from_arrow(value.get(n), a) for n, a in model_fields(ann) if n in value}
    return value
