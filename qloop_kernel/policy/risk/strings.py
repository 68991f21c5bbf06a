"""What the text given to a call says, read without running it: SQL (a query reads, DROP, TRUNCATE
or DELETE is destructive, any other change is external), a path that is a URL, a file mode, and a
pandas ``eval``/``query`` expression (read unless it can reach code). ``_PLACEHOLDER`` stands for
each part of a string that the analysis cannot read."""

from __future__ import annotations

import re

from .assessment import Effect
from .tables import READS

_SQL_DESTRUCTIVE = re.compile(r"\b(DROP|TRUNCATE|DELETE)\b", re.IGNORECASE)
_SQL_CHANGES = re.compile(
    r"\b(INSERT|UPDATE|CREATE|ALTER|MERGE|REPLACE|UPSERT|INTO|GRANT|REVOKE|COPY|ATTACH|DETACH|"
    r"VACUUM|LOAD|UNLOAD|EXPORT|IMPORT|CALL|EXEC|EXECUTE|SET|PRAGMA|INSTALL|RENAME|COMMENT|"
    r"REFRESH|MSCK|OPTIMIZE|LOCK)\b",
    re.IGNORECASE,
)
_SQL_QUERY = re.compile(r"^\s*\(*\s*(SELECT|WITH|SHOW|DESCRIBE|DESC|EXPLAIN|VALUES|TABLE)\b", re.I)
_SQL_NOISE = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'", re.DOTALL)
_SQL_TARGET = re.compile(
    r"\b(?:DROP\s+(?:TABLE|VIEW|DATABASE|SCHEMA|INDEX)|TRUNCATE(?:\s+TABLE)?|DELETE\s+FROM)"
    r"\s+(?:IF\s+EXISTS\s+)?([\w.\"`\[\]]+)",
    re.IGNORECASE,
)
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_MAYBE_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*(:/?)?$")  # could still become "s3://"
_PLACEHOLDER = "\x00"
_QUOTES = '"`[]'
_MODE = re.compile(r"[rwaxbtU+]{1,5}")
_SQL_STATEMENT = re.compile(
    r"^\s*(DROP|TRUNCATE|DELETE|INSERT|UPDATE|CREATE|ALTER|MERGE|GRANT|ATTACH|COPY)\b", re.I
)


def sql_effect(text: str) -> Effect:
    """The class of a SQL text: dropping or deleting is destructive, changing a database external."""
    bare = _SQL_NOISE.sub(" ", text)
    if _SQL_DESTRUCTIVE.search(bare):
        target = _SQL_TARGET.search(bare)
        what = f" ({target.group(1).strip(_QUOTES)})" if target else ""
        return Effect("destructive", f"drops or deletes database data{what}")
    if _SQL_CHANGES.search(bare):
        return Effect("external", "changes a database")
    if _SQL_QUERY.match(bare):
        return READS
    return Effect("unknown", "runs SQL it cannot classify")


def expression_effect(text: str) -> Effect:
    """The class of a pandas ``eval``/``query`` expression (read unless it can reach code)."""
    if "@" in text:
        return Effect("unknown", "refers to local variables with @ in an expression string")
    if re.search(r"\w\s*\(|__|`", text):
        return Effect("unknown", "calls functions inside an expression string")
    return READS
