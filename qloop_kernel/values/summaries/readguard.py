"""While a read runs, code that is not installed code is stopped before its first line.

The summaries call no method of a class defined outside installed code (``trust``), but an
installed library's method may still call the user's code: pandas renders the Python objects in
an object column with their own ``repr``, ``functools.partial`` shows its arguments', an ABC's
``isinstance`` check asks a subclass's metaclass. Inside :func:`reading`, every Python function that
starts in this thread is checked (a trace function, ``sys.settrace``): one compiled from a file
outside installed code, or from a string in a module that is not installed code, raises
:class:`UserCodeStopped` at its first line, so none of its code runs. Allowed: installed code,
code of the classes and modules opted in by name (``trusted_reprs``), ``__del__`` (a finalizer the
garbage collector runs; the collector is paused meanwhile so that none is due), and any code inside
an :func:`allowing` block (a repr the user opted in).

Other threads are not watched: a library may run the user's code on its own threads (a dask
scheduler's workers run a collection's tasks when its rows are read with ``rows=``).

Python removes a thread's trace function when it raises, so each nested block puts it back on
entry and on exit: the code a library runs after catching the stop is unwatched until then.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, NoReturn

from .trust import (
    FILE_VERDICTS,
    installed_class,
    installed_file,
    installed_module,
    matches,
    module_namespace,
    opted_in,
    patterns,
    text_of,
)

_settrace = sys.settrace  # as loaded: a debugger may wrap sys.settrace later
_setprofile = sys.setprofile
_state = threading.local()


class UserCodeStopped(BaseException):
    """A read reached code that is not installed code; it was stopped before its first line.

    A BaseException, so that a library's ``except Exception`` does not take it for its own error
    and go on to call more of the user's code.
    """

    def __init__(self, where: str) -> None:
        super().__init__(f"it would run {where}, which is not installed code")
        self.where = where


class _Reading:
    """The context manager :func:`reading` gives (one for all threads: its state is per thread)."""

    def __enter__(self) -> None:
        if not _blocks():
            previous = sys.gettrace()
            _state.previous = None if any(previous is t for t in _TRACERS) else previous
            _state.tracer = _check if _state.previous is None else _check_and_hand_on
            _state.profile = sys.getprofile()
            _state.stops = _state.reported = 0
            _state.collecting = gc.isenabled()
            gc.disable()  # no finalizer or weakref callback of the user's comes due meanwhile
        _blocks().append(_state.stops)
        _settrace(_state.tracer)

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        entered = _blocks().pop()
        stopped = _state.stops > max(entered, _state.reported)
        if kind is not None or stopped:
            _state.reported = _state.stops  # the stop reaches the caller (raised again below)
        if _blocks():
            _settrace(_state.tracer)  # a stop inside removed it
            _setprofile(_state.profile)
        else:
            _settrace(_state.previous)
            _setprofile(_state.profile)
            _state.previous = _state.profile = None
            if _state.collecting:
                gc.enable()
        if stopped and kind is None:  # a library swallowed the stop: what it made is not kept
            raise UserCodeStopped(_state.where)


_READING = _Reading()


def _blocks() -> list[int]:
    """The stop count at the entry of each open block of this thread, outermost first."""
    blocks: list[int] | None = getattr(_state, "blocks", None)
    if blocks is None:
        blocks = _state.blocks = []
    return blocks


def reading() -> _Reading:
    """Stop code that is not installed code from starting in this thread meanwhile (nestable).

    A block whose code swallowed a stop (a library catching the exception) raises
    UserCodeStopped as it ends, so the result made meanwhile is not taken for a good one.
    """
    return _READING


@contextlib.contextmanager
def allowing() -> Iterator[None]:
    """Let any code run meanwhile (a repr the user opted in), inside a :func:`reading` block."""
    if not _blocks():
        yield
        return
    _settrace(_state.previous)
    try:
        yield
    finally:
        _settrace(_state.tracer)


def _check(
    frame: FrameType, event: str, arg: Any, _known: Callable[[str], object] = FILE_VERDICTS.get
) -> None:
    """The trace function: stop the frame when its code may not run (called at the start of every
    function in the thread: an installed file's code is let through by one dictionary lookup)."""
    if _known(frame.f_code.co_filename) is not True and not _allowed(frame):
        _stop(frame)  # Python removes this trace function: the watch puts it back


# Any: the trace function's return value, whatever the previous trace function returned
def _check_and_hand_on(frame: FrameType, event: str, arg: Any) -> Any:
    """The trace function when one was set before the read (a debugger's): checks, then hands on."""
    _check(frame, event, arg)
    return _state.previous(frame, event, arg)


_TRACERS = (_check, _check_and_hand_on)


def _watch(frame: FrameType, event: str, arg: Any) -> None:
    """The profile function set while the trace function is away (after a stop): it puts the
    trace function back, and stops a frame the trace function did not see."""
    _settrace(_state.tracer)
    if event == "call" and not _allowed(frame):
        _stop(frame)  # Python removes this profile function: the trace function is back
    _setprofile(_state.profile)


def _stop(frame: FrameType) -> NoReturn:
    _state.stops += 1
    _state.where = _code_name(frame)
    _setprofile(_watch)
    raise UserCodeStopped(_state.where)


def _allowed(frame: FrameType) -> bool:
    code = frame.f_code
    verdict = installed_file(code.co_filename)
    if verdict:
        return True
    if verdict is None and _generated_for_installed_code(frame):
        return True
    if code.co_name == "__del__":
        return True
    names = patterns()
    if not names:
        return False
    cls = _first_class(frame)
    return matches(names, _module_name(frame), _qualname(frame)) or (
        cls is not None and opted_in(cls)
    )


def _runs_in_installed_module(frame: FrameType) -> bool:
    name = _module_name(frame)
    return installed_module(name) and module_namespace(sys.modules.get(name)) is frame.f_globals


def _generated_for_installed_code(frame: FrameType) -> bool:
    """Whether code compiled from a string was made by installed code for installed code:
    code run in an installed module's namespace (dataclass methods), the template of
    ``collections.namedtuple``, or a method of an installed class (``_serves_installed_class``)."""
    namespace = frame.f_globals
    template = dict.get(namespace, "_tuple_new") is tuple.__new__
    builtins = dict.get(namespace, "__builtins__")
    if template and type(builtins) is dict and not builtins:  # namedtuple's: no builtins at all
        return True
    return _runs_in_installed_module(frame) or _serves_installed_class(frame)


def _serves_installed_class(frame: FrameType) -> bool:
    """Whether code compiled from a string is a method of an installed class: its first argument
    (``self``, or ``cls`` of ``__new__``) is such a class or an instance of one."""
    cls = _first_class(frame)
    return cls is not None and installed_class(cls)


def _first_class(frame: FrameType) -> type | None:
    """The class of the frame's first argument (itself when it is a class), None without one."""
    code = frame.f_code
    if not code.co_argcount:
        return None
    first = frame.f_locals.get(code.co_varnames[0])
    return first if issubclass(type(first), type) else type(first)


def _module_name(frame: FrameType) -> str:
    return text_of(dict.get(frame.f_globals, "__name__")) or ""


def _qualname(frame: FrameType) -> str:
    code = frame.f_code
    return str(getattr(code, "co_qualname", code.co_name))  # co_qualname: Python 3.11+


def _code_name(frame: FrameType) -> str:
    module = _module_name(frame)
    where = "the notebook" if module == "__main__" else module or frame.f_code.co_filename
    return f"{_qualname(frame)} (defined in {where})"
