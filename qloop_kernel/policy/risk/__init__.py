"""Risk classes for code the model asks to run, from static analysis of its source.

:func:`classify` reads Python source with :mod:`ast` and executes nothing. The source is what IPython
runs: magics and ``!`` commands arrive transformed, as ``get_ipython().run_line_magic('pip', ...)``,
``get_ipython().system(...)`` and ``get_ipython().run_cell_magic(...)`` calls. The result is an
:class:`Assessment`: the class of the most severe finding, every finding with its line, and the
names of the user's namespace the code may change.

Classes, in ascending severity (:data:`RISKS`): ``read`` < ``write`` < ``compute`` < ``unknown`` <
``destructive`` < ``external``. The rules are data in :mod:`.tables`; :func:`rules_markdown` renders
them as the table in docs/approval.md, and a test keeps the two equal.

What the analysis assumes: the special methods of objects (``__repr__``, ``__len__``, iteration,
operators, properties, ``__exit__``) do not change state, and an object made in an earlier cell is
judged by the names of the methods called on it, since its type is not known here.

The modules, from the bottom up: ``assessment`` (the classes and the result types), ``tables`` (the
rules as data), ``lookup`` (a qualified name's effect from the tables), ``strings`` (SQL, URLs, file
modes, expression strings), ``nodes`` and ``scopes`` (readers of AST nodes and of the names a block
binds); then the walk, one class per layer: ``names`` (findings, bindings, the names the code may
change), ``walk`` (statements), ``magics`` (magics and ``!`` commands), ``calls`` (calls); on top,
``classifier`` (:func:`classify`) and ``docs`` (:func:`rules_markdown`).
"""

from .assessment import RISKS, Assessment, Reason, Risk, most_severe, severity
from .classifier import classify
from .docs import rules, rules_markdown
from .tables import (
    ARGUMENT_MUTATORS,
    BUILTINS,
    CALLABLE_FIRST,
    CALLABLE_KEY,
    CELL_MAGICS,
    COMPUTE_METHODS,
    EXTERNAL_METHODS,
    FUNCTIONS,
    LINE_MAGICS,
    MODULES,
    MUTATING_METHODS,
    OPTIONAL_PATH_WRITERS,
    READ_METHODS,
    SQL_FUNCTIONS,
    SQL_METHODS,
)

__all__ = [
    "ARGUMENT_MUTATORS",
    "BUILTINS",
    "CALLABLE_FIRST",
    "CALLABLE_KEY",
    "CELL_MAGICS",
    "COMPUTE_METHODS",
    "EXTERNAL_METHODS",
    "FUNCTIONS",
    "LINE_MAGICS",
    "MODULES",
    "MUTATING_METHODS",
    "OPTIONAL_PATH_WRITERS",
    "READ_METHODS",
    "RISKS",
    "SQL_FUNCTIONS",
    "SQL_METHODS",
    "Assessment",
    "Reason",
    "Risk",
    "classify",
    "most_severe",
    "rules",
    "rules_markdown",
    "severity",
]
