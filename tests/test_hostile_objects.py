"""A read runs no code the user did not write into an installed library.

``list_variables``, ``inspect_variable`` and bounded reprs describe an object of a class that is
not installed code (the notebook's, a module of the notebook's folder, this tests folder) from
the outside, and stop any such code an installed library reaches while a read runs. The classes
here are defined in this test module, which is not installed code: each one's methods leave a
trace when they run, and the tests assert none is left. In a real kernel the same holds for
classes defined in cells, through the in-notebook agent's tools and the outside agent's probe.
"""

from __future__ import annotations

import ast
import functools
import gc
import importlib.util
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pydantic import ValidationError

from qloop_kernel.settings import Settings
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from qloop_kernel.tools.namespace import inspect_variable, list_variables
from qloop_kernel.tools.runtime import ToolInputError
from qloop_kernel.values.summaries import UserCodeStopped, bounded_repr, reading
from qloop_kernel.values.summaries.trust import installed_class, trusting
from tests.agent_outputs import result_text, tool_results
from tests.kernel_client import LabKernel

ran: list[str] = []  # what the hostile methods did: a test asserts it stays empty


@pytest.fixture(autouse=True)
def nothing_ran() -> Iterator[None]:
    ran.clear()
    yield
    ran.clear()


class DeletesFile:
    """Its repr deletes a file."""

    victim: Path | None = None

    def __init__(self) -> None:
        self.owner = "ana"

    def __repr__(self) -> str:
        ran.append("repr")
        if self.victim is not None:
            self.victim.unlink()
        return "DeletesFile()"


class Sleeps:
    """Its repr sleeps for a minute."""

    def __repr__(self) -> str:
        ran.append("repr")
        time.sleep(60)
        return "late"


class Raises:
    def __repr__(self) -> str:
        ran.append("repr")
        raise RuntimeError("boom")


class Huge:
    def __repr__(self) -> str:
        ran.append("repr")
        return "x" * 10_000_000


class Everything:
    """Answers every attribute, and has every method a read might be tempted to call."""

    def __init__(self) -> None:
        self.rows = 3
        self._cache = [1, 2]

    @property
    def total(self) -> int:
        ran.append("property")
        return 1

    def __getattr__(self, name: str) -> int:
        ran.append(f"getattr {name}")
        return 42

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # what isinstance reads when the type check fails
        ran.append("__class__")
        return dict

    def __len__(self) -> int:
        ran.append("len")
        return 3

    def __iter__(self) -> Iterator[int]:
        ran.append("iter")
        return iter([])

    def __dir__(self) -> list[str]:
        ran.append("dir")
        return ["zz"]

    def __sizeof__(self) -> int:
        ran.append("sizeof")
        return 1

    def __bool__(self) -> bool:
        ran.append("bool")
        return True

    def __format__(self, spec: str) -> str:
        ran.append("format")
        return "f"

    def __str__(self) -> str:
        ran.append("str")
        return "e"

    def __repr__(self) -> str:
        ran.append("repr")
        return "E"

    def __eq__(self, other: object) -> bool:
        ran.append("eq")
        return True

    def __hash__(self) -> int:
        ran.append("hash")
        return 1

    def move(self) -> None:
        """A method: listed, not called."""


class WritesOnLen:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __len__(self) -> int:
        ran.append("len")
        self.path.write_text("written by __len__")
        return 1


class Overriding(list[Any]):
    """A list subclass whose own methods lie and leave traces."""

    def __len__(self) -> int:
        ran.append("len")
        return 0

    def __iter__(self) -> Iterator[Any]:
        ran.append("iter")
        return iter([])

    def __getitem__(self, index: Any) -> Any:
        ran.append("getitem")
        return None

    def __repr__(self) -> str:
        ran.append("repr")
        return "[]"

    def __sizeof__(self) -> int:
        ran.append("sizeof")
        return 0


class Labels(dict[Any, Any]):
    def items(self) -> Any:
        ran.append("items")
        return []

    def __len__(self) -> int:
        ran.append("len")
        return 0


class Quiet(str):
    def __len__(self) -> int:
        ran.append("len")
        return 0

    def __getitem__(self, index: Any) -> str:
        ran.append("getitem")
        return ""

    def count(self, *args: Any) -> int:
        ran.append("count")
        return 0


class Key:
    """A dict key or a cell whose hash and comparison leave traces."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __hash__(self) -> int:
        ran.append("hash")
        return 1

    def __eq__(self, other: object) -> bool:
        ran.append("eq")
        return True

    def __repr__(self) -> str:
        ran.append("repr")
        return "Key()"


class Meta(type):
    """A metaclass whose every hook leaves a trace."""

    def __getattribute__(cls, name: str) -> Any:
        ran.append(f"meta getattribute {name}")
        return type.__getattribute__(cls, name)

    def __instancecheck__(cls, instance: object) -> bool:
        ran.append("instancecheck")
        return False

    def __subclasscheck__(cls, subclass: type) -> bool:
        ran.append("subclasscheck")
        return False

    def __repr__(cls) -> str:
        ran.append("meta repr")
        return "M"

    def __hash__(cls) -> int:
        ran.append("meta hash")
        return 1

    def __eq__(cls, other: object) -> bool:
        ran.append("meta eq")
        return False


class WithMeta(metaclass=Meta):
    kind = "measured"

    def __init__(self) -> None:
        self.weight = 2.5


def hostile_namespace(tmp_path: Path) -> dict[str, Any]:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    deletes = DeletesFile()
    deletes.victim = victim
    namespace = {
        "deletes": deletes,
        "sleeps": Sleeps(),
        "raises": Raises(),
        "huge": Huge(),
        "everything": Everything(),
        "writes": WritesOnLen(tmp_path / "written.txt"),
        "items": Overriding([1, "two", DeletesFile()]),
        "labels": Labels({"a": 1, "b": Everything()}),
        "quiet": Quiet("hello\nworld"),
        "keyed": {Key(1): "one", "two": [Everything()]},
        "measured": WithMeta(),
        "Measured": WithMeta,
        "hostiles": [deletes, Sleeps(), Everything(), Overriding([DeletesFile()])],
    }
    ran.clear()  # building the dict hashed its keys
    return namespace


def test_nothing_a_read_touches_runs_the_users_code(tmp_path: Path) -> None:
    namespace = hostile_namespace(tmp_path)
    started = time.monotonic()
    listing = list_variables(namespace)
    texts = {name: inspect_variable(namespace, name) for name in namespace}
    reprs = [bounded_repr(value) for value in namespace.values()]
    assert ran == []
    assert time.monotonic() - started < 5  # the sleeping repr was not called
    assert (tmp_path / "victim.txt").read_text() == "keep me"
    assert not (tmp_path / "written.txt").exists()
    assert all(len(text) <= 8_000 for text in texts.values())
    assert "everything" in listing and "repr not called" in listing
    assert reprs[0].startswith(
        f"<{__name__}.DeletesFile object, repr not called: owner='ana', victim=PosixPath("
    )


def test_an_object_is_described_by_its_type_origin_and_attributes(tmp_path: Path) -> None:
    text = inspect_variable(hostile_namespace(tmp_path), "everything")
    lines = text.splitlines()
    assert (
        lines[0]
        == f"everything: {__name__}.Everything (from {__file__} (not an installed package))"
    )
    assert lines[1].startswith("Value: not rendered: a read calls no method")
    assert f"`%agent set trusted_reprs {__name__}.Everything` lets it" in lines[1]
    assert "Instance attributes (2):\n  rows: int = 3\n  _cache: list = [1, 2]" in text
    assert "Other public names: move" in text and "Properties (not read): total" in text
    assert ran == []


def test_containers_strings_and_their_subclasses_are_read_through_pythons_own_methods(
    tmp_path: Path,
) -> None:
    namespace = hostile_namespace(tmp_path)
    items = inspect_variable(namespace, "items")
    assert items.startswith(
        f"items: {__name__}.Overriding (a list subclass from {__file__} (not an installed "
        "package); read through list's own methods, the class's are not called), 3 items"
    )
    assert f"[2] <{__name__}.DeletesFile object, repr not called: owner='ana'>" in items
    labels = inspect_variable(namespace, "labels")
    assert "2 items" in labels and f"'b': <{__name__}.Everything object, repr not called" in labels
    quiet = inspect_variable(namespace, "quiet")
    assert "quiet: str, 11 characters, 2 lines" in quiet and "hello\nworld" in quiet
    assert "(a str subclass" in quiet.splitlines()[0]
    keyed = inspect_variable(namespace, "keyed")
    assert f"<{__name__}.Key object, repr not called: n=1>: 'one'" in keyed
    assert bounded_repr(namespace["items"]) == (
        f"Overriding([1, 'two', <{__name__}.DeletesFile object, repr not called: owner='ana'>])"
    )
    assert ran == []


def test_a_user_metaclass_is_not_asked_anything(tmp_path: Path) -> None:
    namespace = hostile_namespace(tmp_path)
    measured = inspect_variable(namespace, "measured")
    assert measured.startswith(f"measured: {__name__}.WithMeta (from {__file__}")
    assert "weight: float = 2.5" in measured and "Other public names: kind" in measured
    cls = inspect_variable(namespace, "Measured")
    assert f"class WithMeta from module {__name__}, of metaclass {__name__}.Meta" in cls
    assert bounded_repr(WithMeta) == f"<class {__name__}.WithMeta of metaclass {__name__}.Meta>"
    assert not installed_class(WithMeta) and not installed_class(Meta)
    assert ran == []


def test_attribute_paths_read_no_property_and_no_getattr(tmp_path: Path) -> None:
    namespace = hostile_namespace(tmp_path)
    assert inspect_variable(namespace, "everything.rows").startswith("everything.rows: int")
    assert "method Everything.move" in inspect_variable(namespace, "everything.move")
    with pytest.raises(ToolInputError, match=r"everything\.total was not read: it would run "):
        inspect_variable(namespace, "everything.total")
    with pytest.raises(ToolInputError, match="has no attribute 'nothing'"):
        inspect_variable(namespace, "everything.nothing")  # its __getattr__ would answer 42
    assert ran == []


def test_a_library_that_reaches_the_users_code_is_stopped_before_its_first_line(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    deletes = DeletesFile()
    deletes.victim = victim
    shown = bounded_repr(functools.partial(print, deletes))  # partial's repr is C code
    assert shown.startswith("<functools.partial object; repr() stopped: it would run ")
    assert "DeletesFile.__repr__" in shown
    frame = pd.DataFrame({"key": [Key(1), Key(2), Key(1)], "n": [1, 2, 3]})
    text = inspect_variable({"frame": frame}, "frame")
    assert "pandas could not render the rows: UserCodeStopped: it would run Key.__repr__" in text
    assert f"<{__name__}.Key objec...  2" in text  # each cell from the outside, cut to 40
    assert "not counted" in text  # counting hashes the cells: their __hash__ is the user's
    series = inspect_variable({"keys": frame["key"]}, "keys")
    assert "Values 0-2 of 3" in series and f"<{__name__}.Key objec..." in series
    assert ran == [] and victim.read_text() == "keep me"


def test_a_stop_a_library_swallows_is_raised_when_its_block_ends() -> None:
    keys = pd.Series([Key(1), Key(2)])
    with pytest.raises(UserCodeStopped, match=r"Key\.__(hash|eq)__"), reading():
        keys.value_counts()  # pandas' hash table clears the error and goes on with the next cell
    assert ran == []


def test_a_modules_own_getattr_is_not_run(tmp_path: Path) -> None:
    source = tmp_path / "helpers.py"
    marker = tmp_path / "getattr-ran"
    source.write_text(
        f"VERSION = 2\ndef __getattr__(name):\n    open({str(marker)!r}, 'w').close()\n"
        "    return 1\n"
    )
    spec = importlib.util.spec_from_file_location("qloop_test_helpers", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["qloop_test_helpers"] = module
    try:
        spec.loader.exec_module(module)
        namespace = {"helpers": module}
        assert "Public names (1): VERSION" in inspect_variable(namespace, "helpers")
        with pytest.raises(ToolInputError, match=r"helpers\.missing was not read"):
            inspect_variable(namespace, "helpers.missing")
    finally:
        del sys.modules["qloop_test_helpers"]
    assert not marker.exists()


def test_opting_a_class_in_by_name_lets_a_read_call_its_repr(tmp_path: Path) -> None:
    namespace = hostile_namespace(tmp_path)
    with trusting([f"{__name__}.DeletesFile", f"{__name__}.Raises"]):
        deleted = inspect_variable(namespace, "deletes")
        raised = inspect_variable(namespace, "raises")
        others = inspect_variable(namespace, "everything")
    assert "Value: DeletesFile()" in deleted and not (tmp_path / "victim.txt").exists()
    assert f"Value: <{__name__}.Raises object; repr() raised RuntimeError: boom>" in raised
    assert "Value: not rendered" in others  # only the classes named
    assert ran == ["repr", "repr"]


def test_a_blocking_repr_opted_in_is_still_cut_off() -> None:
    with trusting([f"{__name__}.*"]):
        started = time.monotonic()
        text = inspect_variable({"sleeps": Sleeps()}, "sleeps")
    assert "repr() did not finish within 1 s, cut off" in text
    assert time.monotonic() - started < 5


def test_the_setting_takes_names_and_globs_and_refuses_anything_else() -> None:
    settings = Settings().updated(trusted_reprs="mymodule.Point, Point ,mylib.*")
    assert settings.trusted_reprs == ("mymodule.Point", "Point", "mylib.*")
    assert Settings().updated(trusted_reprs=None).trusted_reprs == ()
    with pytest.raises(ValidationError, match="not a class name or glob"):
        Settings().updated(trusted_reprs="os.system('x')")


def test_a_read_restores_the_threads_trace_and_profile_and_the_collector() -> None:
    seen: list[str] = []

    def tracer(frame: Any, event: str, arg: Any) -> None:
        seen.append(frame.f_code.co_name)

    def profiler(frame: Any, event: str, arg: Any) -> None:
        pass

    gc.disable()
    sys.settrace(tracer)
    sys.setprofile(profiler)
    try:
        inspect_variable({"everything": Everything()}, "everything")
        inspect_variable({"frame": pd.DataFrame({"key": [Key(1)]})}, "frame")
        assert sys.gettrace() is tracer and sys.getprofile() is profiler and not gc.isenabled()
    finally:
        sys.settrace(None)
        sys.setprofile(None)
        gc.enable()
    assert "summarize_outside" in seen  # the earlier trace function still saw the read's calls
    with reading():
        assert not gc.isenabled()
    assert gc.isenabled() and sys.gettrace() is None and ran == []


def test_other_threads_run_their_code_while_a_read_runs() -> None:
    done = threading.Event()

    def background() -> None:
        while not done.is_set():
            ran.append("background")
            time.sleep(0.001)

    worker = threading.Thread(target=background)
    with reading():
        worker.start()
        time.sleep(0.05)
    done.set()
    worker.join()
    assert "background" in ran


# -- a real kernel: the in-notebook agent's tools and the outside agent's probe ---------------------

HOSTILE_CELL = """
import os, time
MARKER = {marker!r}

class Hostile:
    def __init__(self):
        self.rows = 3
    def __repr__(self):
        os.remove(MARKER)
        return "Hostile()"
    def __len__(self):
        open(MARKER + ".len", "w").close()
        return 1
    @property
    def size(self):
        open(MARKER + ".property", "w").close()
        return 1
    def __getattr__(self, name):
        open(MARKER + ".getattr", "w").close()
        return 1

class Sleepy:
    def __repr__(self):
        time.sleep(60)
        return "late"

class Items(list):
    def __iter__(self):
        os.remove(MARKER)
        return iter([])

h = Hostile()
sleepy = Sleepy()
items = Items([1, Hostile()])
nested = {{"inner": [Hostile(), sleepy]}}
"""
PROBE = "__import__('qloop_kernel.server.probe', fromlist=['probe'])"


@pytest.fixture(scope="module")
def api() -> Iterator[StandInAPI]:
    with StandInAPI() as server:
        yield server


@pytest.fixture(scope="module")
def lab(api: StandInAPI) -> Iterator[LabKernel]:
    with LabKernel(api.environment()) as kernel:
        kernel.run("%load_ext qloop_kernel")
        yield kernel


def probe(lab: LabKernel, call: str) -> dict[str, Any]:
    """What the outside agent's read tools evaluate in the kernel (server/kernels.py)."""
    content = {
        "code": "",
        "silent": True,
        "store_history": False,
        "user_expressions": {"r": f"{PROBE}.{call}"},
        "allow_stdin": False,
    }
    reply = lab.reply(lab.request("execute_request", content), 30)
    found = reply["content"]["user_expressions"]["r"]
    assert found["status"] == "ok", found
    answer: dict[str, Any] = json.loads(ast.literal_eval(found["data"]["text/plain"]))
    return answer


@pytest.mark.kernel
def test_the_kernels_read_tools_run_none_of_the_notebooks_code(
    lab: LabKernel, api: StandInAPI, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    marker.write_text("keep me")
    lab.run(HOSTILE_CELL.format(marker=str(marker)))
    reads = ["h", "items", "nested", "sleepy", "h.size"]
    api.reset(
        [
            Reply([tool_use("list_variables", {})]),
            Reply([tool_use("inspect_variable", {"name": name}) for name in reads]),
            Reply([text("Read.")]),
        ]
    )
    started = time.monotonic()
    lab.run("%%agent --new\nLook at my variables.", timeout=60, cell_id="hostile-reads")
    listing = result_text(tool_results(api.requests[1])[0])
    results = [result_text(block) for block in tool_results(api.requests[2])]
    outside = probe(lab, "inspect(get_ipython(), 'h', None, 0, None)")
    outside_list = probe(lab, "variables(get_ipython())")
    assert time.monotonic() - started < 40  # no sleeping repr was waited for
    assert marker.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["marker"]  # no len, property, getattr
    assert "h" in listing and "repr not called" in listing
    assert results[0].startswith("h: Hostile (defined in the notebook)")
    assert "rows: int = 3" in results[0] and "Properties (not read): size" in results[0]
    assert "(a list subclass defined in the notebook" in results[1]
    assert "<Hostile object, repr not called: rows=3>" in results[2]
    assert "<Sleepy object, repr not called>" in results[2]
    assert "h.size was not read: it would run Hostile.size" in results[4]
    assert outside["ok"] and outside["text"].startswith("h: Hostile (defined in the notebook)")
    assert "repr not called" in outside_list["text"]
    lab.run("%agent set trusted_reprs Hostile")  # opted in: its repr is called on the next read
    opted = probe(lab, "inspect(get_ipython(), 'h', None, 0, None)")
    assert "Value: Hostile()" in opted["text"] and not marker.exists()
    lab.run("%agent set trusted_reprs off")


def test_private_values_are_read_for_redaction_without_the_users_methods() -> None:
    from qloop_kernel.redact import PrivateVariables

    ran: list[str] = []

    class Key(str):
        def __str__(self) -> str:
            ran.append("str")
            return "x"

        def __repr__(self) -> str:
            ran.append("repr")
            return "x"

    class Amount(int):
        def __str__(self) -> str:
            ran.append("int str")
            return "x"

        __repr__ = __str__

    class Keys(list[object]):
        def __iter__(self) -> Iterator[object]:
            ran.append("iter")
            return iter(())

    class Vault(dict[str, object]):
        def values(self) -> Any:
            ran.append("values")
            return []

    namespace = {
        "key": Key("sk-private-value-0001"),
        "amount": Amount(987654321987),
        "keys": Keys([Key("sk-private-value-0002")]),
        "vault": Vault(k=Key("sk-private-value-0003")),
    }
    found = PrivateVariables(set(namespace)).values(namespace)
    assert ran == []
    for secret in ("sk-private-value-0001", "987654321987", "sk-private-value-0002"):
        assert secret in found
    assert "sk-private-value-0003" in found
