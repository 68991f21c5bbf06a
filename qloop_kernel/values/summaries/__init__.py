"""Type-aware, size-bounded text summaries of live Python objects, one module per kind.

Nothing here imports pandas, numpy, dask, pyspark, polars, pyarrow, xarray, torch or jax:
their objects are recognised through the modules of their classes and ``sys.modules``, so the
summaries cost nothing at kernel start and work where those libraries are not installed. Every
summary is bounded in size and in work: big in-memory data is summarised from a deterministic
sample, no full ``repr()`` of a big container, string or array is built, and lazy or
distributed collections are described from their metadata without computing them.

Modules: ``common`` (limits, paging, detection, text), ``reprs`` (bounded repr),
``containers``, ``pandas``, ``numpy``, ``polars``, ``arrow``, ``xarray``, ``tensors``,
``device`` (CuPy and other device arrays), ``stored`` (h5py and zarr arrays in files), ``lazy`` (dask, Spark, polars LazyFrame),
``databases`` (connections and their tables, from the catalog), ``callables`` (functions,
classes, modules) and ``objects`` (everything else). ``trust`` says whose methods a read may call
(installed code's, and the classes opted in by name), ``readguard`` stops any other code that a
read reaches.
"""

from __future__ import annotations

from qloop_kernel.errors import ToolInputError

from . import (
    arrow,
    callables,
    containers,
    databases,
    device,
    lazy,
    numpy,
    objects,
    pandas,
    polars,
    stored,
    tensors,
    xarray,
)
from .callables import is_function_like
from .common import (
    DEFAULT_ROWS,
    MAX_ROWS,
    SUMMARY_SECONDS,
    Brief,
    Kind,
    Paging,
    TookTooLong,
    cut,
    fit_text,
    format_bytes,
    format_shape,
    format_table,
    libraries_of,
    qualified_name,
    shape_of,
    time_limit,
)
from .numpy import is_ndarray
from .pandas import is_dataframe, is_series
from .readguard import UserCodeStopped, reading
from .reprs import bounded_repr
from .trust import readable

# Most specific first: library kinds, then Python's own types, then the generic summary.
KINDS: list[Kind] = [
    *pandas.KINDS,
    *numpy.KINDS,
    *lazy.KINDS,
    *polars.KINDS,
    *arrow.KINDS,
    *xarray.KINDS,
    *stored.KINDS,
    *tensors.KINDS,
    *device.KINDS,
    *databases.KINDS,
    *callables.KINDS,
    *containers.KINDS,
]


def kind_of(obj: object) -> Kind | None:
    """The kind that summarises ``obj``, or None for the generic summary (always for an object
    whose class is not installed code: its methods are not called, ``objects.summarize_outside``)."""
    if not readable(type(obj)):
        return None
    libraries = libraries_of(type(obj))
    for kind in KINDS:
        if (not kind.libraries or kind.libraries & libraries) and kind.matches(obj):
            return kind
    return None


def summarize(obj: object, label: str, paging: Paging) -> str:
    """Type-aware text summary of ``obj`` titled ``label`` (not yet cut to a size limit).

    Never raises on the object's type: a summary that fails, or runs past ``SUMMARY_SECONDS``,
    gives a bounded description saying so. Code that is not installed code is stopped meanwhile
    (``readguard``): a summary that reaches it gives that description too. Raises
    ToolInputError when ``paging`` does not apply to the object or points past its end.
    """
    with reading():
        try:
            with reading():  # a stop caught here is handled: the outer block does not raise it
                kind = kind_of(obj)
        except UserCodeStopped as stop:  # an ABC's check asked a metaclass of the user's
            return _fallback(obj, label, f"its type could not be told ({stop})", None)
        return _summarize_kind(obj, label, paging, kind)


def _summarize_kind(obj: object, label: str, paging: Paging, kind: Kind | None) -> str:
    if paging.columns is not None and (kind is None or not kind.takes_columns):
        raise ToolInputError(
            f"columns= applies to DataFrames and tables only; {label!r} is a "
            f"{qualified_name(type(obj))}"
        )
    name = "generic" if kind is None else kind.name
    try:
        with reading(), time_limit(SUMMARY_SECONDS):
            if kind is None:
                return objects.summarize_object(obj, label, paging)
            return kind.summarize(obj, label, paging)
    except ToolInputError:
        raise
    except TookTooLong as late:
        return _fallback(obj, label, f"its {name} summary {late} and was cut off", kind)
    except UserCodeStopped as stop:
        return _fallback(obj, label, f"its {name} summary was stopped: {stop}", kind)
    except Exception as exc:
        why = cut(f"{type(exc).__name__}: {exc}", 200)
        return _fallback(obj, label, f"its {name} summary failed ({why})", kind)


def _fallback(obj: object, label: str, why: str, kind: Kind | None) -> str:
    """A bounded description from what is cheap to read: type, shape, dtype, a bounded repr (of
    a lazy kind, the type alone: its shape may run the query)."""
    lines = [f"{label}: {qualified_name(type(obj))}", f"Note: {why}; described briefly instead."]
    shape = None if kind is not None and kind.lazy else shape_of(obj)
    if shape is not None:
        lines.append(f"Shape: {format_shape(shape)}")
    lines.append(f"Value: {bounded_repr(obj, 300)}")
    return "\n".join(lines)


def brief(obj: object) -> Brief:
    """The shape or length, memory and details of ``obj`` for one row of ``list_variables``.

    Raises UserCodeStopped when it reaches code that is not installed code (``readguard``).
    """
    with reading():
        kind = kind_of(obj)
        return objects.brief_object(obj) if kind is None else kind.brief(obj)


__all__ = [
    "DEFAULT_ROWS",
    "KINDS",
    "MAX_ROWS",
    "Brief",
    "Kind",
    "Paging",
    "UserCodeStopped",
    "bounded_repr",
    "brief",
    "cut",
    "fit_text",
    "format_bytes",
    "format_shape",
    "format_table",
    "is_dataframe",
    "is_function_like",
    "is_ndarray",
    "is_series",
    "kind_of",
    "qualified_name",
    "reading",
    "shape_of",
    "summarize",
]
