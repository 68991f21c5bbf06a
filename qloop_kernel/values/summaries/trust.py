"""Which code a read may run: installed code, and the classes the user opted in by name.

A read (``list_variables``, ``inspect_variable``, a bounded repr) calls the methods of an object only
when every class of its MRO comes from *installed code*:

- a module of Python's standard library (a built-in one, or one whose file is in the standard
  library's folders), ``builtins``, or a C type (not a heap type) whose module is not loaded;
- a module whose file lies in a folder of installed packages (``site-packages``, ``dist-packages``,
  the ``purelib``/``platlib`` folders of ``sysconfig``, the user site folder);
- qloop itself.

Everything else is the user's code: ``__main__`` (the notebook's cells), modules imported from the
notebook's folder or any other folder on ``sys.path``, packages installed in editable mode (their
files stay in the source folder), classes made by ``exec`` of a string, classes without a module.
An object of such a class is described from the outside (``objects.summarize_outside``): its
type, its module, its instance attributes read from the instance's ``__dict__`` and, for
subclasses of Python's containers, strings and numbers, the data read through the built-in
class's own methods.

The ``trusted_reprs`` setting (``%agent set trusted_reprs NAME[,NAME...]``) opts classes in by
name: a qualified class name (``mymodule.Point``; a class of the notebook by its bare name, or as
``__main__.Point``) or an ``fnmatch`` glob (``mylib.*``). Their methods are then called as an
installed library's, and code defined in them may run while a read runs (``readguard``).

Everything here reads classes statically (the slots of ``type``, the classes' own dicts), never
through ``getattr`` on a class whose metaclass may be the user's: a metaclass's ``__getattribute__``,
``__hash__`` or ``__eq__`` is user code too.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import site
import sys
import sysconfig
import threading
import types
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

_MRO = type.__dict__["__mro__"]
_MODULE = type.__dict__["__module__"]
_QUALNAME = type.__dict__["__qualname__"]
_NAME = type.__dict__["__name__"]
_CLASS_DICT = type.__dict__["__dict__"]
_FLAGS = type.__dict__["__flags__"]
_MODULE_DICT = vars(types.ModuleType)["__dict__"]
_HEAPTYPE = 1 << 9

# Python's own classes a class defined elsewhere may extend; its data is read through their methods
BUILTIN_BASES: tuple[type, ...] = (
    dict, list, tuple, set, frozenset, deque, str, bytes, bytearray, int, float, complex,
)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Static reads of classes and modules
# ---------------------------------------------------------------------------------------------


def text_of(value: object) -> str | None:
    """``value`` as an exact ``str`` when it is a string (a subclass's methods are not called)."""
    return str.__str__(cast("str", value)) if issubclass(type(value), str) else None


def static_mro(cls: type) -> tuple[type, ...]:
    """``cls.__mro__`` read from the type's slot (a metaclass's attribute lookup is not run)."""
    mro: tuple[type, ...] = _MRO.__get__(cls, type)
    return mro


def class_module(cls: type) -> str | None:
    """The module name a class gives, or None when it gives no string."""
    try:
        return text_of(_MODULE.__get__(cls, type))
    except AttributeError:
        return None


def class_qualname(cls: type) -> str:
    """The class's ``__qualname__`` (``?`` when it is not a string)."""
    return text_of(_QUALNAME.__get__(cls, type)) or "?"


def class_dict(cls: type) -> types.MappingProxyType[str, Any]:
    """The class's own namespace (a read-only view), read from the type's slot."""
    namespace: types.MappingProxyType[str, Any] = _CLASS_DICT.__get__(cls, type)
    return namespace


def class_name(cls: type) -> str:
    """The class's ``__name__`` (``?`` when it is not a string)."""
    return text_of(_NAME.__get__(cls, type)) or "?"


def static_lookup(cls: type, name: str) -> tuple[bool, object]:
    """Whether a class of ``cls``'s MRO defines ``name`` in its own namespace, and the value."""
    for klass in static_mro(cls):
        namespace = class_dict(klass)
        if name in namespace:
            return True, namespace[name]
    return False, None


def is_subclass(cls: type, base: type) -> bool:
    """Whether ``base`` is in ``cls``'s MRO, by identity (no ``__subclasscheck__`` is run)."""
    return any(klass is base for klass in static_mro(cls))


def builtin_base(cls: type) -> type | None:
    """The first of Python's containers, strings and numbers in ``cls``'s MRO, or None."""
    for klass in static_mro(cls):
        if any(klass is base for base in BUILTIN_BASES):
            return klass
    return None


def instance_attributes(obj: object) -> dict[str, object]:
    """The instance's own attributes, dunder names left out: its ``__dict__`` and its slots, read
    through the descriptors Python made for them (a property or ``__getattr__`` is not run)."""
    cls = type(obj)
    found: dict[str, object] = {}
    for klass in reversed(static_mro(cls)):
        for name, member in class_dict(klass).items():
            if type(member) is types.MemberDescriptorType and not name.startswith("__"):
                with contextlib.suppress(AttributeError):  # an empty slot
                    found[name] = member.__get__(obj, cls)
    namespace = _instance_dict(obj)
    if namespace is not None:
        for key, value in dict.items(namespace):
            text = text_of(key)
            if text is not None and not text.startswith("__"):
                found[text] = value
    return found


def _instance_dict(obj: object) -> dict[Any, object] | None:
    found, descriptor = static_lookup(type(obj), "__dict__")
    if not found or type(descriptor) is not types.GetSetDescriptorType:
        return None
    namespace = descriptor.__get__(obj, type(obj))
    return namespace if issubclass(type(namespace), dict) else None


def module_namespace(module: object) -> dict[str, Any] | None:
    """The namespace of a module object (None for anything else found in ``sys.modules``)."""
    if not issubclass(type(module), types.ModuleType):
        return None
    namespace = _MODULE_DICT.__get__(module, types.ModuleType)
    return namespace if type(namespace) is dict else None


def module_file(name: str) -> str | None:
    """The file of the loaded module ``name``, or None (not loaded, built in, no file)."""
    namespace = module_namespace(sys.modules.get(name))
    return None if namespace is None else text_of(namespace.get("__file__"))


# ---------------------------------------------------------------------------------------------
# Installed code
# ---------------------------------------------------------------------------------------------


def _roots() -> tuple[str, ...]:
    """Folders whose files are installed code: the standard library, installed packages, qloop."""
    paths = {**sysconfig.get_paths()}
    folders = [paths.get(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")]
    folders += [*site.getsitepackages(), site.getusersitepackages()]
    folders += [
        entry
        for entry in sys.path
        if Path(entry).name in ("site-packages", "dist-packages")
        or (entry.endswith(".zip") and entry.startswith((sys.base_prefix, sys.prefix)))
    ]
    folders.append(str(Path(__file__).resolve().parents[2]))  # the qloop_kernel package
    return tuple(sorted({os.path.join(os.path.realpath(f), "") for f in folders if f}))


_ROOTS: tuple[str, ...] | None = None
FILE_VERDICTS: dict[str, bool | None] = {}  # by file name: installed_file's answers


def installed_file(filename: str) -> bool | None:
    """Whether code compiled from ``filename`` is installed code: True or False for a file,
    None for code without one (``<string>``: decided by the module it runs in)."""
    verdict = FILE_VERDICTS.get(filename, ...)
    if verdict is ...:
        verdict = FILE_VERDICTS[filename] = _file_verdict(filename)
    return verdict


def count_as_installed(filename: str) -> None:
    """Take code compiled from ``filename`` for installed code: a file of the environment that is
    no package (a site's ``sitecustomize``, a test harness's socket guard) that libraries reach."""
    FILE_VERDICTS[filename] = True


def _file_verdict(filename: str) -> bool | None:
    global _ROOTS
    if filename.startswith("<"):
        return True if filename.startswith("<frozen ") else None
    if _ROOTS is None:
        _ROOTS = _roots()
    return os.path.realpath(filename).startswith(_ROOTS)


_MODULE_VERDICTS: dict[str, tuple[object, bool]] = {}


def installed_module(name: str | None) -> bool:
    """Whether the module ``name`` is installed code (see the module's docstring)."""
    if name is None or name == "__main__":
        return False
    if name == "builtins":
        return True
    module = sys.modules.get(name)
    cached = _MODULE_VERDICTS.get(name)
    if cached is not None and cached[0] is module:
        return cached[1]
    verdict = _module_verdict(name, module)
    _MODULE_VERDICTS[name] = (module, verdict)
    return verdict


def _module_verdict(name: str, module: object) -> bool:
    namespace = module_namespace(module)
    if namespace is None:
        return False
    filename = text_of(namespace.get("__file__"))
    if filename is None:  # built into the interpreter, or made in memory
        return name.partition(".")[0] in sys.stdlib_module_names
    return bool(installed_file(filename))


def installed_class(cls: type) -> bool:
    """Whether every class of ``cls``'s MRO is installed code's (or a C type of no loaded module)."""
    return all(_installed_one(klass) for klass in static_mro(cls))


def _installed_one(cls: type) -> bool:
    name = class_module(cls)
    if installed_module(name):
        return True
    static = not _FLAGS.__get__(cls, type) & _HEAPTYPE  # C code: never the notebook's
    return static and name is not None and name != "__main__" and name not in sys.modules


def readable(cls: type) -> bool:
    """Whether a read may call the methods of ``cls``'s objects: installed, or opted in."""
    return installed_class(cls) or opted_in(cls)


def origin(cls: type) -> str:
    """Where a class that is not installed code comes from, for a summary's first line."""
    name = class_module(cls)
    if name == "__main__":
        return "defined in the notebook"
    if name is None:
        return "defined without a module"
    filename = module_file(name)
    if filename is None:
        return f"from module {name} (not an installed package)"
    return f"from {filename} (not an installed package)"


# ---------------------------------------------------------------------------------------------
# Opt-in by name (the trusted_reprs setting)
# ---------------------------------------------------------------------------------------------

NAME_PATTERN = re.compile(r"[A-Za-z_*?\[][\w.*?\[\]!-]*")


def _no_patterns() -> Sequence[str]:
    return ()


_source: Callable[[], Sequence[str]] = _no_patterns
_override = threading.local()


def follow(source: Callable[[], Sequence[str]]) -> None:
    """Read the opted-in names from ``source`` at each check (the kernel agent's settings)."""
    global _source
    _source = source


@contextlib.contextmanager
def trusting(patterns: Sequence[str]) -> Iterator[None]:
    """Reads in this thread take ``patterns`` as the opted-in names meanwhile."""
    previous = getattr(_override, "patterns", None)
    _override.patterns = tuple(patterns)
    try:
        yield
    finally:
        _override.patterns = previous


def patterns() -> tuple[str, ...]:
    """The names opted in now: a ``trusting`` block's, else the followed settings'."""
    found = getattr(_override, "patterns", None)
    if found is None:
        try:
            found = tuple(_source())
        except Exception:  # settings not made yet, or being replaced
            found = ()
    return found


def opted_in(cls: type) -> bool:
    """Whether ``cls`` is named by the ``trusted_reprs`` setting."""
    names = patterns()
    return bool(names) and matches(names, class_module(cls) or "", class_qualname(cls))


def matches(names: tuple[str, ...], module: str, qualname: str) -> bool:
    """Whether ``module.qualname`` (code of a class: ``module.Class.method``) is opted in."""
    return _compiled(names).match(f"{module}.{qualname}") is not None


_COMPILED: dict[tuple[str, ...], re.Pattern[str]] = {}


def _compiled(names: tuple[str, ...]) -> re.Pattern[str]:
    found = _COMPILED.get(names)
    if found is None:
        full = [name if "." in name else f"__main__.{name}" for name in names]
        # a name covers itself and what is defined in it (a class's methods, a module's classes)
        parts = [fnmatch.translate(name).removesuffix(r"\Z") + r"(?:\..*)?\Z" for name in full]
        found = _COMPILED[names] = re.compile("|".join(f"(?s:{part})" for part in parts))
    return found
