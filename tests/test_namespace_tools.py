"""list_variables, inspect_variable and notebook_history against real objects and a real shell."""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from qloop_kernel.messages import ToolCall
from qloop_kernel.policy.permissions import AutoApprover
from qloop_kernel.tools.history import notebook_history
from qloop_kernel.tools.namespace import MAX_ROWS, inspect_variable, list_variables
from qloop_kernel.tools.runtime import Tool, ToolInputError, ToolRuntime
from qloop_kernel.values.summaries import bounded_repr, fit_text
from qloop_kernel.values.summaries.trust import trusting


@pytest.fixture(scope="module")
def ipython() -> Iterator[InteractiveShell]:
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    yield shell
    InteractiveShell.clear_instance()


@pytest.fixture
def shell(ipython: InteractiveShell) -> InteractiveShell:
    """The module's shell with an empty namespace and a new history session."""
    ipython.reset(new_session=True)
    return ipython


def run(shell: InteractiveShell, source: str) -> None:
    result = shell.run_cell(source, store_history=True)
    assert result.success, result.error_in_exec or result.error_before_exec


def listed_names(text: str) -> list[str]:
    """Variable names from list_variables' table (after the title and header lines)."""
    return [line.split()[0] for line in text.splitlines()[2:] if not line.startswith("[")]


def mixed_frame(n_rows: int, n_cols: int = 50) -> pd.DataFrame:
    """Float, int, object (mixed Python values), str and datetime columns in equal shares."""
    rng = np.random.default_rng(7)
    words = np.array(["north", "south", "east", "west", None], dtype=object)
    mixed = np.array(["a", 1, 2.5, None, (1, 2)], dtype=object)
    makers = [
        lambda: rng.normal(size=n_rows),
        lambda: rng.integers(0, 10_000, n_rows),
        lambda: pd.Series(mixed[rng.integers(0, 5, n_rows)], dtype=object),
        lambda: words[rng.integers(0, 5, n_rows)],
        lambda: pd.date_range("2021-01-01", periods=n_rows, freq="s"),
    ]
    return pd.DataFrame({f"col{i}": makers[i % 5]() for i in range(n_cols)})


# ---------------------------------------------------------------------------------------------
# list_variables
# ---------------------------------------------------------------------------------------------


def test_list_variables_keeps_only_user_variables(shell: InteractiveShell) -> None:
    run(
        shell,
        "import os\nimport pandas as pd\nimport numpy as np\n"
        "from math import sqrt\nfrom collections import OrderedDict\n"
        "def helper(x, y=1):\n    return x + y\n"
        "class Thing:\n    pass\n"
        "df = pd.DataFrame({'a': [1, 2, 3], 'b': [0.5, None, 2.5]})\n"
        "arr = np.zeros((2, 3))\n_scratch = 1\ntotal = 42\nopen = 'rebound'\n",
    )
    shell.push({"injected": 1}, interactive=False)
    text = list_variables(shell.user_ns, hidden=shell.user_ns_hidden)

    # IPython hides `open` (its own wrapper) but the user rebound it: listed, as in %who.
    assert listed_names(text) == ["arr", "df", "helper", "open", "Thing", "total"]
    lines = {line.split()[0]: line for line in text.splitlines()[2:]}
    df = shell.user_ns["df"]
    assert re.search(r"pandas\.DataFrame\s+3 x 2\s+", lines["df"])
    assert f"{int(df.memory_usage(deep=False).sum())} B" in lines["df"]
    assert "1 int64, 1 float64" in lines["df"]
    assert re.search(r"numpy\.ndarray\s+2 x 3\s+48 B\s+dtype float64", lines["arr"])
    assert "helper(x, y=1)" in lines["helper"]
    assert lines["total"].rstrip().endswith("42")
    assert text.startswith("6 user variables")


def test_hidden_container_and_mapping() -> None:
    marker = object()
    namespace = {"kept": 1, "dropped": marker, "rebound": 2}
    by_name = list_variables(namespace, hidden={"dropped", "rebound"})
    assert listed_names(by_name) == ["kept"]
    by_identity = list_variables(namespace, hidden={"dropped": marker, "rebound": 1})
    assert listed_names(by_identity) == ["kept", "rebound"]


def test_list_variables_limit_and_max_chars() -> None:
    namespace = {f"v{i:03d}": i for i in range(300)}
    limited = list_variables(namespace, limit=200)
    assert listed_names(limited) == [f"v{i:03d}" for i in range(200)]
    assert limited.splitlines()[-1].startswith("[... 100 more variables omitted")

    short = list_variables(namespace, max_chars=1_000)
    shown = listed_names(short)
    assert len(short) <= 1_000
    assert shown == [f"v{i:03d}" for i in range(len(shown))] and 5 < len(shown) < 200
    assert f"[... {300 - len(shown)} more variables omitted" in short

    assert list_variables({"_private": 1, "In": []}) == "No user variables defined."
    with pytest.raises(ValueError, match="limit"):
        list_variables(namespace, limit=0)
    with pytest.raises(ValueError, match="max_chars"):
        list_variables(namespace, max_chars=10)


# ---------------------------------------------------------------------------------------------
# inspect_variable: names and paging input
# ---------------------------------------------------------------------------------------------


def test_unknown_names_suggest_close_ones() -> None:
    Model = collections.namedtuple("Model", "weights bias")
    namespace = {"sales_df": 1, "sales_2023": 2, "model": Model([1.0], 0.5)}
    with pytest.raises(ToolInputError) as unknown:
        inspect_variable(namespace, "sales_fd")
    assert str(unknown.value).startswith("No variable named 'sales_fd'. Did you mean: sales_df")
    with pytest.raises(ToolInputError, match="has no attribute 'wieghts'. Did you mean: weights"):
        inspect_variable(namespace, "model.wieghts")
    with pytest.raises(ToolInputError, match="Use list_variables"):
        inspect_variable(namespace, "zzz")
    assert inspect_variable(namespace, "model.weights").startswith("model.weights: list, 1 items")


@pytest.mark.parametrize("path", ["df['a']", "f()", "a..b", "", "1x"])
def test_only_names_and_dotted_attributes(path: str) -> None:
    with pytest.raises(ToolInputError, match="not a variable name"):
        inspect_variable({"df": 1}, path)


def test_bad_paging_input() -> None:
    namespace = {"df": pd.DataFrame({"price": [1.0, 2.0], "qty": [1, 2]}), "xs": [1, 2, 3]}
    cases = [
        ({"offset": 2}, "offset 2 is past the end: there are 2 rows"),
        ({"offset": -1}, "offset must be 0 or more"),
        ({"rows": -1}, "rows must be between 0 and 1,000"),
        ({"rows": 5_000}, "rows must be between 0 and 1,000, got 5,000; to see more, call again"),
        ({"columns": ["prize"]}, r"unknown column \['prize'\]; did you mean \['price'\]"),
        ({"columns": []}, "at least one column"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ToolInputError, match=message):
            inspect_variable(namespace, "df", **kwargs)
    with pytest.raises(ValueError, match="max_chars"):  # not a model input: a programming error
        inspect_variable(namespace, "df", max_chars=50)
    with pytest.raises(ToolInputError, match="columns= applies to DataFrames and tables only"):
        inspect_variable(namespace, "xs", columns=["a"])
    with pytest.raises(ToolInputError, match="offset= does not apply"):
        inspect_variable({"f": len}, "f", offset=1)
    assert MAX_ROWS == 1_000


def test_model_mistakes_are_plain_error_results() -> None:
    """Through the tool runtime: the fix, and no traceback."""
    namespace = {"df": pd.DataFrame({"price": [1.0, 2.0]})}

    def inspect(name: str, offset: int = 0, rows: int | None = None) -> str:
        """Inspect."""
        return inspect_variable(namespace, name, offset=offset, rows=rows)

    runtime = ToolRuntime.of([Tool.from_function(inspect)], AutoApprover())

    def run_tool(**arguments: object) -> tuple[bool, str]:
        outcome = runtime.run(ToolCall(id="toolu_1", name="inspect", input=arguments))
        return outcome.is_error, outcome.text

    assert run_tool(name="dff") == (True, "No variable named 'dff'. Did you mean: df?")
    assert run_tool(name="df", offset=5) == (
        True,
        "offset 5 is past the end: there are 2 rows (valid offsets 0-1)",
    )
    is_error, text = run_tool(name="df", rows=2_000)
    assert is_error and "between 0 and 1,000" in text and "offset=" in text
    assert "Traceback" not in text


# ---------------------------------------------------------------------------------------------
# inspect_variable: pandas and numpy
# ---------------------------------------------------------------------------------------------


def test_dataframe_summary() -> None:
    df = pd.DataFrame(
        {
            "price": [1.0, 2.0, None, 5.0],
            "city": ["Oslo", "Rome", "Oslo", None],
            "day": pd.to_datetime(["2024-01-01", "2024-01-02", None, "2024-01-04"]),
        },
        index=pd.Index([10, 20, 30, 40], name="id"),
    )
    text = inspect_variable({"df": df}, "df")
    assert text.startswith("df: pandas.DataFrame, 4 rows x 3 columns")
    assert "dtypes: 1 float64, 1 str, 1 datetime64" in text
    assert "Index: pandas.Index, dtype int64, names ['id'], first 10, last 40" in text
    assert "Rows 0-3 of 4:" in text and "Rome" in text
    assert "statistics computed on all 4 rows" in text
    price = next(line for line in text.splitlines() if line.startswith("price "))
    assert price.split()[2:] == ["1", "(25.0%)", "2.66667", "2.08167", "1", "1.5", "2", "3.5", "5"]
    city = next(line for line in text.splitlines() if line.startswith("city "))
    assert city.split() == ["city", "str", "1", "(25.0%)", "2", "'Oslo'", "(2)"]
    assert "2024-01-01 00:00:00  2024-01-04 00:00:00" in text


def test_dataframe_paging_and_columns() -> None:
    df = pd.DataFrame({"id": range(100), "name": [f"row{i}" for i in range(100)], "x": 0.5})
    text = inspect_variable({"df": df}, "df", columns=["name"], offset=40, rows=3)
    head = text.split("\n\n")[1]
    assert head.startswith("Rows 40-42 of 100; 1 of 3 columns")
    assert all(f"row{i}" in head for i in (40, 41, 42))
    assert "row39" not in head and "row43" not in head and " id" not in head
    assert "Columns (1 of 3 described" in text and "2 more columns not described" in text
    assert re.search(r"^name\s+str\s+0\s+100\s+", text, flags=re.MULTILINE)
    assert not re.search(r"^id\s", text, flags=re.MULTILINE)


@pytest.mark.slow
def test_million_by_fifty_frame_stays_within_budget() -> None:
    df = mixed_frame(1_000_000)
    text = inspect_variable({"df": df}, "df")
    assert len(text) <= 8_000
    assert "characters omitted" not in text
    assert "deterministic random sample of 3,000 of 1,000,000 rows" in text
    assert "~ null share estimated from the sample" in text
    rows = [line.split()[0] for line in text.splitlines() if re.match(r"col\d+ ", line)]
    assert sorted(rows) == sorted(df.columns)  # each column described once
    assert inspect_variable({"df": df}, "df") == text  # the sample is deterministic


def python_cells(n_rows: int) -> pd.Series:
    """Strings (each its own object, as read from a file) among every kind of null and
    values equal across types (1, 1.0 and True)."""
    cells = np.array(["north", None, np.nan, pd.NA, pd.NaT, 1, 1.0, True, "south"], dtype=object)
    picked = cells[np.random.default_rng(1).integers(0, len(cells), n_rows)]
    return pd.Series([f"{cell}"[:5] if isinstance(cell, str) else cell for cell in picked])


def column_row(text: str, name: str) -> list[str]:
    return next(line.split() for line in text.splitlines() if line.startswith(f"{name} "))


def test_python_object_columns_are_counted_as_pandas_counts_them() -> None:
    small = pd.DataFrame({"o": python_cells(9_000), "s": python_cells(9_000).astype("string")})
    text = inspect_variable({"small": small}, "small")
    for name in ("o", "s"):
        counts = small[name].value_counts(dropna=True)
        nulls = int(small[name].isna().sum())
        top, count = counts.index[0], counts.iloc[0]
        assert column_row(text, name)[2:] == [
            f"{nulls:,}", f"({nulls / len(small):.1%})", str(len(counts)), repr(top), f"({count:,})"
        ]  # fmt: skip
    series = inspect_variable({"o": small["o"]}, "o")
    counts = small["o"].value_counts(dropna=True)
    expected = ", ".join(f"{value!r} ({count:,})" for value, count in counts.items())
    assert f"unique {len(counts)}; most frequent: {expected}" in series


def test_python_object_nulls_are_estimated_from_the_sample_as_pandas_would() -> None:
    big = pd.DataFrame({"o": python_cells(1_000_000), "x": np.arange(1_000_000.0)})
    text = inspect_variable({"big": big}, "big")
    assert "deterministic random sample of 10,000 of 1,000,000 rows" in text
    positions = np.random.default_rng(0).choice(len(big), 10_000, replace=False)
    share = big["o"].iloc[np.sort(positions)].isna().mean()
    assert column_row(text, "o")[2] == f"~{share:.1%}"


def test_frame_of_python_strings_takes_a_smaller_sample() -> None:
    words = np.array(["north", "south", "east", "west", None], dtype=object)
    rng = np.random.default_rng(2)
    df = pd.DataFrame(
        {f"w{i}": pd.Series(words[rng.integers(0, 5, 200_000)], dtype=object) for i in range(50)}
    )
    text = inspect_variable({"df": df}, "df")
    assert "deterministic random sample of 2,000 of 200,000 rows" in text  # 3,000 for numbers
    assert len(text) <= 8_000
    assert all(column_row(text, f"w{i}")[1] == "object" for i in range(50))
    assert all(column_row(text, f"w{i}")[3] == "4" for i in range(50))  # None is not a value


def test_unhashable_python_cells_are_still_counted() -> None:
    df = pd.DataFrame({"nested": [[1], [2], None] * 10, "maps": [{"k": 1}, None, 3] * 10})
    text = inspect_variable({"df": df}, "df")
    assert column_row(text, "nested")[2:] == ["10", "(33.3%)", "2", "[1]", "(10)"]
    assert column_row(text, "maps")[4:] == ["2", "{'k':", "1}", "(10)"]


def test_wide_frame_describes_a_bounded_number_of_columns() -> None:
    wide = pd.DataFrame(np.ones((3, 2_000)), columns=[f"c{i}" for i in range(2_000)])
    text = inspect_variable({"wide": wide}, "wide")
    assert len(text) <= 8_000
    assert "12 of 2,000 columns, pass columns=[...]" in text
    assert "1,940 more columns not described" in text


def test_series_summaries() -> None:
    rng = np.random.default_rng(0)
    numbers = pd.Series(rng.normal(10, 2, 50_000), name="temp")
    labels = pd.Series(pd.Categorical(["a", "b", "a", None] * 25))
    text = inspect_variable({"s": numbers}, "s", offset=49_998)
    assert text.startswith("s: pandas.Series 'temp', dtype float64, 50,000 values")
    assert "sample of 10,000 of 50,000 values" in text
    mean = float(re.search(r"mean ([\d.]+)", text).group(1))
    assert abs(mean - 10) < 0.1
    assert "Values 49,998-49,999 of 50,000:" in text
    text = inspect_variable({"labels": labels}, "labels")
    assert "Nulls: 25 (25.0%)" in text
    assert "unique 2; most frequent: 'a' (50), 'b' (25)" in text


def test_ndarray_summaries() -> None:
    grid = np.arange(4_000_000, dtype=float).reshape(2_000, 2_000)
    grid[::2] = np.nan
    text = inspect_variable({"grid": grid}, "grid", offset=1, rows=2)
    assert "shape (2000, 2000), dtype float64, 30.5 MB, C-contiguous" in text
    assert "sample of 100,000 of 4,000,000 elements" in text
    share = float(re.search(r"NaN [\d,]+ \(([\d.]+)%\)", text).group(1))
    assert 48 < share < 52
    assert "Rows 1-2 along axis 0 (of 2,000):" in text and "2000." in text
    days = np.array(["2020-01-01", "NaT", "2021-05-05"], dtype="datetime64[D]")
    assert "min 2020-01-01, max 2021-05-05, NaT 1 (33.3%)" in inspect_variable({"d": days}, "d")
    mixed = np.array([1, "a", None], dtype=object)
    assert "element types int (1), str (1), NoneType (1)" in inspect_variable({"m": mixed}, "m")


# ---------------------------------------------------------------------------------------------
# inspect_variable: everything else
# ---------------------------------------------------------------------------------------------


class Broken:
    def __repr__(self) -> str:
        raise ValueError("boom")


class Loud:
    """An object whose repr is 10 million characters."""

    def __repr__(self) -> str:
        return "x" * 10_000_000


def test_repr_that_raises() -> None:
    namespace = {"b": Broken(), "items": [1, Broken()]}
    broken = f"<{__name__}.Broken object; repr() raised ValueError: boom>"
    with trusting([f"{__name__}.Broken"]):  # its repr is called, as an installed library's
        assert f"Value: {broken}" in inspect_variable(namespace, "b")
        assert f"[1] {broken}" in inspect_variable(namespace, "items")
        assert listed_names(list_variables(namespace)) == ["b", "items"]


@pytest.mark.slow
def test_huge_objects_are_bounded() -> None:
    namespace = {
        "numbers": list(range(1_000_000)),
        "lookup": {f"k{i}": [i] * 3 for i in range(200_000)},
        "seen": set(range(1_000_000)),
        "text": "word " * 2_000_000,
        "blob": bytes(5_000_000),
        "loud": Loud(),
        "nested": [[list(range(100_000))] * 50] * 50,
    }
    for name in namespace:
        text = inspect_variable(namespace, name)
        assert len(text) <= 8_000, name
    assert "numbers: list, 1,000,000 items" in inspect_variable(namespace, "numbers")
    assert "Keys: 'k0', 'k1'" in inspect_variable(namespace, "lookup")
    assert "... (+199,950 more)" in inspect_variable(namespace, "lookup")
    assert "Characters 0-2,999 of 10,000,000" in inspect_variable(namespace, "text")
    assert "Characters 9,999,000-9,999,999" in inspect_variable(namespace, "text", offset=9_999_000)
    with trusting([f"{__name__}.Loud"]):  # its repr is called, as an installed library's
        loud = inspect_variable(namespace, "loud")
    assert re.search(r"^Value: x{990,}\.\.\.$", loud, flags=re.MULTILINE)
    cut = inspect_variable(namespace, "numbers", rows=1_000, max_chars=600)
    assert len(cut) <= 600
    assert re.search(r"\[\.\.\. [\d,]+ of [\d,]+ characters omitted", cut)


def test_function_and_class_defined_in_a_cell(shell: InteractiveShell) -> None:
    run(
        shell,
        "def area(r: float, *, pi: float = 3.14) -> float:\n"
        "    '''Area of a circle.'''\n"
        "    return pi * r * r\n\n"
        "class Circle:\n"
        "    '''A circle.'''\n"
        "    def __init__(self, r):\n"
        "        self.r = r\n"
        "    def grow(self, by):\n"
        "        return Circle(self.r + by)\n\n"
        "c = Circle(2)\n",
    )
    text = inspect_variable(shell.user_ns, "area")
    assert "area: function area defined in the notebook" in text
    assert "Signature: area(r: float, *, pi: float = 3.14) -> float" in text
    assert "Docstring:\nArea of a circle." in text
    assert "Source (3 lines):\ndef area(r: float" in text and "return pi * r * r" in text

    text = inspect_variable(shell.user_ns, "Circle")
    assert "Circle: class Circle defined in the notebook" in text
    assert "Public methods defined here: grow" in text
    assert "Source (6 lines):\nclass Circle:" in text and "return Circle(self.r + by)" in text
    assert "Source (2 lines):\n    def grow(self, by):" in inspect_variable(shell.user_ns, "c.grow")
    text = inspect_variable(shell.user_ns, "c")
    assert "Instance attributes (1):\n  r: int = 2" in text and "Other public names: grow" in text


def test_library_class_and_module() -> None:
    text = inspect_variable({"pd": pd}, "pd.DataFrame")
    assert len(text) <= 8_000
    assert "pd.DataFrame: class DataFrame from module pandas" in text
    assert re.search(r"\[\.\.\. [\d,]+ lines of source omitted \.\.\.\]", text)
    text = inspect_variable({"json": json}, "json")
    assert text.startswith("json: module json")
    assert "Public names (7): JSONDecodeError, JSONDecoder, JSONEncoder, dump, dumps" in text


def test_bounded_repr() -> None:
    Point = collections.namedtuple("Point", "x y")
    assert bounded_repr({"a": [1, (2,)], "b": Point(1, "s")}) == (
        "{'a': [1, (2,)], 'b': Point(x=1, y='s')}"
    )
    assert bounded_repr(list(range(100))) == "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ... (+90 more)]"
    assert bounded_repr(collections.OrderedDict(a=1)) == "OrderedDict({'a': 1})"
    assert bounded_repr(frozenset()) == "frozenset()"
    assert bounded_repr(10**10_000) == "<int with 33,220 bits>"
    assert bounded_repr([[[[1]]]]) == "[[[[...]]]]"
    assert len(bounded_repr("y" * 10**6, limit=50)) == 50
    big = pd.DataFrame(np.zeros((1_000, 3)))
    assert bounded_repr([big]) == "[<pandas.DataFrame shape 1,000 x 3>]"
    assert bounded_repr(pd.DataFrame({"a": [1]})) == "   a\n0  1"


def test_fit_text_reports_what_it_left_out() -> None:
    text = "\n".join(f"line {i}" for i in range(1_000))
    fitted = fit_text(text, 300, "ask for less")
    assert len(fitted) <= 300
    kept, marker = fitted.rsplit("\n", 1)
    omitted = int(re.search(r"\[\.\.\. ([\d,]+) of", marker).group(1).replace(",", ""))
    assert text.startswith(kept) and len(kept) + omitted == len(text)
    assert marker.endswith("; ask for less ...]")


# ---------------------------------------------------------------------------------------------
# notebook_history
# ---------------------------------------------------------------------------------------------


def test_history_shows_cells_and_outputs(shell: InteractiveShell) -> None:
    assert notebook_history(shell) == "No cells have been executed in this session yet."
    run(shell, "a = 1")
    run(shell, "a + 41")
    run(shell, "%%capture\nprint('quiet')")
    run(shell, "list(range(1_000_000))")
    text = notebook_history(shell)
    assert text.startswith("Last 4 of 4 executed cells, oldest first:")
    assert "In [0]" not in text
    assert "In [1]:\na = 1\n\nIn [2]:\na + 41\nOut[2]: 42\n\nIn [3]:\n%%capture" in text
    out = text.split("Out[4]: ")[1]
    assert out.startswith("[0, 1, 2,") and out.endswith("(+999,990 more)]") and len(out) < 200


def test_history_last_and_max_chars(shell: InteractiveShell) -> None:
    for i in range(1, 13):
        run(shell, f"x{i} = {i}")
    run(shell, "s = '" + "z" * 5_000 + "'")
    text = notebook_history(shell, last=3)
    assert text.startswith("Last 3 of 13 executed cells")
    assert [int(n) for n in re.findall(r"In \[(\d+)\]", text)] == [11, 12, 13]
    assert "[... 3,006 characters omitted ...]" in text
    short = notebook_history(shell, max_chars=600)
    assert len(short) <= 600
    assert re.search(r"\[\.\.\. \d+ earlier cells omitted", short)
    with pytest.raises(ValueError, match="last"):
        notebook_history(shell, last=0)


def test_history_marks_the_running_cell(shell: InteractiveShell) -> None:
    shell.push({"notebook_history": notebook_history})
    run(shell, "total = 3")
    run(shell, "seen = notebook_history(get_ipython())")
    seen = shell.user_ns["seen"]
    assert "In [1]:\ntotal = 3" in seen
    assert "In [2] (running now):\nseen = notebook_history(get_ipython())" in seen
    assert "running now" not in notebook_history(shell)  # called from no cell: none is running
