"""What calling, or changing, a qualified name does, looked up in :mod:`.tables`: the longest dotted
prefix of a name that a table lists decides, a method of an object a module holds is judged by the
method tables, and changing an object a module holds changes the environment, builtins or a library
setting."""

from __future__ import annotations

from .assessment import Effect
from .tables import (
    AMBIGUOUS_COMPUTE,
    BUILTINS,
    COMPUTE_METHODS,
    ENVIRONMENT,
    EXTERNAL_METHODS,
    FUNCTIONS,
    MODULES,
    MUTATING_METHODS,
    OPTIONAL_PATH_WRITERS,
    READS,
    UNCHECKED,
    WRITES_FILES,
)


def _module_effect(module: str) -> Effect | None:
    """The default effect of a module's functions, or None when its import is not known pure."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        effect = MODULES.get(".".join(parts[:end]))
        if effect is not None:
            return effect
    return None


def _call_effect(qualified: str) -> Effect:
    """What calling a qualified name does, from BUILTINS, FUNCTIONS and MODULES."""
    if qualified.startswith("builtins."):
        return BUILTINS.get(qualified.removeprefix("builtins."), UNCHECKED)
    parts = qualified.split(".")
    holder = ".".join(parts[:-1])
    if parts[-1] in MUTATING_METHODS and holder not in MODULES and len(parts) > 2:
        return _module_state_effect(holder)  # a method of an object a module holds: sys.path.append
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in FUNCTIONS:
            return FUNCTIONS[prefix]
        if prefix in MODULES:
            default = MODULES[prefix]
            if end < len(parts) - 1 and default.risk == "read":
                return _held_method_effect(parts[-1])
            return default
    return UNCHECKED


def _held_method_effect(method: str) -> Effect:
    """A method of an object a module holds (``SparkSession.builder.getOrCreate``)."""
    if method in EXTERNAL_METHODS:
        return EXTERNAL_METHODS[method]
    if method in OPTIONAL_PATH_WRITERS:
        return WRITES_FILES
    if method in COMPUTE_METHODS and method not in AMBIGUOUS_COMPUTE:
        return COMPUTE_METHODS[method]
    return READS


def _module_state_effect(qualified: str) -> Effect:
    """Changing an object a module holds: the environment, builtins, or a library setting."""
    shown = _shown(qualified)
    if qualified.startswith("os.environ"):
        return Effect("external", f"{ENVIRONMENT.text} ({shown})")
    if qualified.startswith(("builtins", "sys.modules")):
        return Effect("unknown", f"changes {shown}, which can change anything")
    return Effect("write", f"changes a setting ({shown})")


def _shown(qualified: str) -> str:
    return qualified.removeprefix("builtins.")
