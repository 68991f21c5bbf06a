"""Risk classes for code the model asks to run, from static analysis of its source.

:func:`classify` reads Python source with :mod:`ast` and executes nothing. The source is what IPython
runs: magics and ``!`` commands arrive transformed, as ``get_ipython().run_line_magic('pip', ...)``,
``get_ipython().system(...)`` and ``get_ipython().run_cell_magic(...)`` calls. The result is an
:class:`Assessment`: the class of the most severe finding, every finding with its line, and the
names of the user's namespace the code may change.

Classes, in ascending severity (:data:`RISKS`): ``read`` < ``write`` < ``compute`` < ``unknown`` <
``destructive`` < ``external``. The rules are data in this module; :func:`rules_markdown` renders
them as the table in docs/approval.md, and a test keeps the two equal.

What the analysis assumes: the special methods of objects (``__repr__``, ``__len__``, iteration,
operators, properties, ``__exit__``) do not change state, and an object made in an earlier cell is
judged by the names of the methods called on it, since its type is not known here.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import re
from collections.abc import Callable, Container, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal, get_args

Risk = Literal["read", "write", "compute", "unknown", "destructive", "external"]
RISKS: tuple[Risk, ...] = get_args(Risk)  # ascending severity


def severity(risk: Risk) -> int:
    """The rank of a class: 0 for ``read`` up to 5 for ``external``."""
    return RISKS.index(risk)


def most_severe(risks: Iterable[Risk]) -> Risk:
    """The most severe of some classes (``read`` when there are none)."""
    return max(risks, key=severity, default="read")


@dataclass(frozen=True)
class Reason:
    """One finding: the line it is on (1-based), its class, and what the code does there."""

    line: int
    risk: Risk
    text: str  # e.g. "changes df, which exists"

    def __str__(self) -> str:
        return f"line {self.line}: {self.text}"


@dataclass(frozen=True)
class Assessment:
    """The class of a piece of code, the findings behind it, and the names it may change.

    ``may_change`` lists the user-namespace names the code may assign, mutate or delete; ``None``
    means no bound can be given (it calls code that cannot be checked, ``%reset``, ``import *``...).
    """

    risk: Risk
    reasons: tuple[Reason, ...]
    may_change: frozenset[str] | None


@dataclass(frozen=True)
class Effect:
    """What calling something does: its class and a phrase for the card ("" for ``read``)."""

    risk: Risk
    text: str


# --- Effects ---------------------------------------------------------------------------------------

READS = Effect("read", "")
SETTING = Effect("write", "changes a library setting")
STARTS_DASK = Effect("compute", "starts dask computation")
STARTS_SPARK = Effect("compute", "starts a Spark job")
MAYBE_SPARK = Effect("compute", "starts a job if its receiver is a Spark or dask collection")
STARTS_CLUSTER = Effect("compute", "starts or uses a dask cluster")
UNCHECKED = Effect("unknown", "calls a function it cannot check")
RUNS_CODE = Effect("unknown", "runs code it cannot check")
NAMESPACE = Effect("unknown", "reaches into the namespace directly")
BY_NAME = Effect("unknown", "reaches an attribute by name, which can be anything")
UNPICKLES = Effect("unknown", "loads pickled data, which can run code")
WAITS_INPUT = Effect("unknown", "waits for typed input")
MODULES_TABLE = Effect("unknown", "reaches loaded modules through sys.modules")
REMOVES_FILES = Effect("destructive", "removes files")
DELETES_DATA = Effect("destructive", "deletes stored data")
ENDS_KERNEL = Effect("destructive", "ends the kernel process")
SHELL = Effect("external", "runs a shell command")
NETWORK = Effect("external", "opens a network connection")
WRITES_FILES = Effect("external", "writes files")
ENVIRONMENT = Effect("external", "changes the process environment")
WORKDIR = Effect("external", "changes the working directory")
PROCESSES = Effect("external", "starts or signals processes")
DATABASE = Effect("external", "connects to a database")
WRITES_DATABASE = Effect("external", "writes to a database")
BROWSER = Effect("external", "runs code in the browser")
INSTALLS = Effect("external", "installs packages")


def _each(effect: Effect, names: str) -> dict[str, Effect]:
    return dict.fromkeys(names.split(), effect)


def _words(names: str) -> frozenset[str]:
    return frozenset(names.split())


# Modules whose import is known to be pure, with the class of calling any of their functions (unless
# FUNCTIONS says otherwise). The longest dotted prefix of a name decides.
MODULES: dict[str, Effect] = {
    **_each(
        READS,
        "pandas numpy scipy sklearn statsmodels matplotlib seaborn plotly altair polars pyarrow "
        "dask pyspark tqdm IPython.display matplotlib.pyplot __future__ math cmath statistics random re json "
        "datetime time calendar zoneinfo collections itertools functools operator string "
        "textwrap decimal fractions numbers typing dataclasses enum copy pprint heapq bisect "
        "array struct base64 binascii hashlib hmac uuid unicodedata difflib csv io glob fnmatch "
        "pathlib os.path warnings contextlib abc types traceback secrets html urllib.parse "
        "pickle joblib",
    ),
    **_each(UNCHECKED, "os sys logging threading concurrent.futures"),
    "builtins": UNCHECKED,  # judged by BUILTINS
    "shutil": WRITES_FILES,
    "tempfile": WRITES_FILES,
    "importlib": RUNS_CODE,
    "subprocess": SHELL,
    "multiprocessing": PROCESSES,
    "webbrowser": Effect("external", "opens a web browser"),
    **_each(
        NETWORK,
        "socket ssl urllib urllib.request http http.client requests httpx aiohttp urllib3 "
        "smtplib ftplib poplib imaplib boto3",
    ),
    **_each(DATABASE, "sqlite3 sqlalchemy duckdb psycopg2 pymysql"),
    "dask.distributed": STARTS_CLUSTER,
    "distributed": STARTS_CLUSTER,
}

# Functions and attributes of modules whose class differs from their module's.
FUNCTIONS: dict[str, Effect] = {
    **_each(
        READS,
        "os.getcwd os.listdir os.scandir os.walk os.stat os.lstat os.getenv os.environ "
        "os.cpu_count os.getpid os.getppid os.getlogin os.fspath os.fsencode os.fsdecode os.sep "
        "os.linesep os.pathsep os.name os.curdir os.pardir os.extsep os.devnull os.access "
        "os.uname os.get_terminal_size os.urandom os.path "
        "sys.getsizeof sys.getrecursionlimit sys.getrefcount sys.getdefaultencoding sys.argv "
        "sys.version sys.version_info sys.platform sys.executable sys.path sys.maxsize "
        "sys.stdout sys.stderr sys.float_info sys.byteorder sys.implementation sys.flags "
        "sys.prefix sys.exc_info "
        "shutil.which shutil.disk_usage shutil.get_terminal_size tempfile.gettempdir "
        "logging.getLogger logging.debug logging.info logging.warning logging.error "
        "logging.exception logging.critical logging.log threading.current_thread "
        "threading.active_count threading.get_ident dask.delayed sqlalchemy.text",
    ),
    **_each(SHELL, "os.system os.popen"),
    **_each(
        PROCESSES,
        "os.execl os.execle os.execlp os.execlpe os.execv os.execve os.execvp os.execvpe "
        "os.spawnl os.spawnle os.spawnlp os.spawnlpe os.spawnv os.spawnve os.spawnvp "
        "os.spawnvpe os.posix_spawn os.posix_spawnp os.fork os.forkpty os.kill os.killpg "
        "os.startfile threading.Thread",
    ),
    **_each(ENDS_KERNEL, "os.abort os._exit"),
    **_each(ENVIRONMENT, "os.putenv os.unsetenv"),
    **_each(WORKDIR, "os.chdir os.fchdir"),
    **_each(
        WRITES_FILES,
        "os.mkdir os.makedirs os.rename os.renames os.replace os.chmod os.chown os.link "
        "os.symlink os.truncate os.utime os.mkfifo os.write os.open "
        "numpy.save numpy.savez numpy.savez_compressed numpy.savetxt "
        "matplotlib.pyplot.savefig json.dump pickle.dump joblib.dump dask.visualize",
    ),
    **_each(REMOVES_FILES, "os.remove os.unlink os.rmdir os.removedirs shutil.rmtree"),
    **_each(UNPICKLES, "pickle.load pickle.loads pickle.Unpickler joblib.load pandas.read_pickle"),
    **_each(RUNS_CODE, "pandas.eval"),  # judged by the expression rule when its text is given
    **_each(
        SETTING,
        "sys.setrecursionlimit pandas.set_option pandas.reset_option numpy.random.seed "
        "numpy.set_printoptions numpy.seterr random.seed matplotlib.use matplotlib.rc "
        "matplotlib.style.use matplotlib.pyplot.style.use matplotlib.pyplot.rc "
        "matplotlib.pyplot.rcdefaults matplotlib.pyplot.switch_backend seaborn.set "
        "seaborn.set_theme seaborn.set_style seaborn.set_context seaborn.set_palette "
        "polars.Config warnings.filterwarnings warnings.simplefilter warnings.resetwarnings "
        "logging.basicConfig logging.disable",
    ),
    **_each(STARTS_DASK, "dask.compute dask.persist"),
    "sys.modules": MODULES_TABLE,
}

# Functions that change the object passed as their first argument.
ARGUMENT_MUTATORS: frozenset[str] = _words(
    "random.shuffle numpy.random.shuffle heapq.heappush heapq.heappop heapq.heapify "
    "heapq.heapreplace heapq.heappushpop bisect.insort bisect.insort_left bisect.insort_right "
    "numpy.copyto numpy.fill_diagonal numpy.put numpy.place numpy.putmask"
)

# Functions whose source argument may be a URL: a literal local path reads, a URL is external,
# a path it cannot read is unknown.
URL_READERS: tuple[str, ...] = (
    "pandas.read_",
    "polars.read_",
    "polars.scan_",
    "dask.dataframe.read_",
    "numpy.genfromtxt",
    "numpy.loadtxt",
)
SQL_FUNCTIONS: frozenset[str] = _words(
    "pandas.read_sql pandas.read_sql_query polars.read_database duckdb.sql duckdb.query "
    "duckdb.execute"
)

_EXCEPTIONS = " ".join(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)
BUILTINS: dict[str, Effect] = {
    **_each(
        READS,
        "abs all any ascii bin bool bytearray bytes callable chr classmethod complex dict dir "
        "divmod enumerate filter float format frozenset hasattr hash help hex id int isinstance "
        "issubclass iter len list map max memoryview min next object oct ord pow print property "
        "range repr reversed round set slice sorted staticmethod str sum super tuple type zip "
        "aiter anext display " + _EXCEPTIONS,
    ),
    **_each(RUNS_CODE, "exec eval compile __import__ breakpoint"),
    **_each(NAMESPACE, "globals locals vars"),
    **_each(Effect("unknown", "sets or deletes an attribute by name"), "setattr delattr"),
    "input": WAITS_INPUT,
    "getattr": BY_NAME,  # a literal, public attribute name is read
    "open": Effect("external", "opens files, for writing unless its mode reads"),
    **_each(ENDS_KERNEL, "exit quit"),
}
# Names IPython puts into every user namespace: taken to be IPython's, even when ``existing`` has them.
IPYTHON_NAMES: frozenset[str] = frozenset({"get_ipython", "display", "exit", "quit"})

# Methods, by name, on a receiver whose type is not known.
READ_METHODS: frozenset[str] = _words(
    # tables and arrays: inspect, or return a new object
    "head tail describe info sample nunique unique value_counts isna isnull notna notnull "
    "duplicated memory_usage select_dtypes sum mean median mode std var sem min max prod cumsum "
    "cumprod cummin cummax quantile corr cov skew kurt abs round clip rank diff pct_change shift "
    "idxmax idxmin argmax argmin argsort nlargest nsmallest all any groupby group_by agg "
    "aggregate apply applymap map transform pipe filter where mask resample rolling expanding "
    "ewm pivot pivot_table melt stack unstack explode merge join assign astype copy dropna "
    "fillna bfill ffill interpolate drop drop_duplicates sort_values sort_index reset_index "
    "set_index reindex rename_axis set_axis add_prefix add_suffix xs get keys values items isin "
    "between to_numpy to_dict to_list tolist to_frame to_records to_pandas to_arrow reshape "
    "ravel flatten squeeze transpose swapaxes dot matmul nonzero item view searchsorted select "
    "with_columns withColumn withColumnRenamed alias cast lazy explain collect_schema "
    "printSchema limit orderBy groupBy repartition coalesce cache map_partitions size cumcount "
    "ngroup nth ohlc iterrows itertuples iteritems to_period to_timestamp asfreq droplevel "
    "swaplevel get_level_values combine_first align compare equals first_valid_index "
    "last_valid_index infer_objects convert_dtypes tz_convert diagonal trace ptp repeat compress "
    "conj argpartition background_gradient highlight_max highlight_min highlight_null "
    "set_caption set_properties set_table_styles hide "
    # plotting (draws on a new or the current figure)
    "plot hist boxplot bar barh scatter line pie area kde density hexbin imshow contour contourf "
    "pcolormesh heatmap errorbar fill_between axhline axvline annotate text legend grid set "
    "set_title set_xlabel set_ylabel set_xlim set_ylim set_xticks set_yticks set_xticklabels "
    "set_yticklabels set_xscale set_yscale set_aspect tick_params twinx twiny suptitle "
    "tight_layout add_subplot subplots colorbar get_figure invert_xaxis invert_yaxis "
    "set_major_formatter set_major_locator set_minor_locator bar_label axis margins "
    "locator_params autofmt_xdate set_facecolor set_size_inches add_axes get_legend set_label "
    "set_ticks set_ticklabels label_outer "
    # text, containers, dates, files opened for reading, fitted models
    "lower upper title capitalize casefold strip lstrip rstrip split rsplit splitlines "
    "startswith endswith find rfind index rindex format format_map encode decode isdigit isalpha "
    "isalnum isspace islower isupper zfill center ljust rjust partition rpartition contains "
    "match fullmatch search findall finditer sub subn group groups groupdict span start end len "
    "slice extract cat get_dummies issubset issuperset union intersection difference "
    "symmetric_difference isdisjoint fromkeys strftime isoformat date time timestamp weekday "
    "total_seconds to_pydatetime tz_localize tz_convert floor ceil normalize read readline "
    "readlines close seek tell readable seekable exists is_file is_dir glob rglob iterdir "
    "resolve absolute stat read_text read_bytes with_suffix with_name with_stem relative_to "
    "joinpath expanduser as_posix samefile predict predict_proba predict_log_proba "
    "decision_function score get_params summary inverse_transform conf_int forecast "
    "get_feature_names_out most_common elements total __init__"
)
MUTATING_METHODS: frozenset[str] = _words(
    "append extend insert remove pop popitem clear update setdefault sort reverse add discard "
    "intersection_update difference_update symmetric_difference_update fill resize put itemset "
    "setflags fit fit_transform partial_fit set_params set_output move_to_end appendleft "
    "extendleft popleft rotate subtract"
)
COMPUTE_METHODS: dict[str, Effect] = {
    **_each(STARTS_DASK, "compute persist compute_chunk_sizes"),
    **_each(STARTS_SPARK, "collect toPandas foreach foreachPartition toLocalIterator fetch"),
    **_each(MAYBE_SPARK, "count show take first"),
    "getOrCreate": Effect("compute", "starts a Spark session"),
    **_each(STARTS_CLUSTER, "submit gather"),
}
# Compute-looking names that are plain reads on pandas, numpy, matplotlib, builtins... objects.
AMBIGUOUS_COMPUTE: frozenset[str] = frozenset({"count", "show", "take", "first"})
LAZY_FAMILIES: frozenset[str] = frozenset({"dask", "pyspark", "distributed"})
EXTERNAL_METHODS: dict[str, Effect] = {
    **_each(
        WRITES_FILES,
        "to_parquet to_excel to_pickle to_feather to_hdf to_stata to_orc to_netcdf to_zarr "
        "tofile savefig write_text write_bytes write_html write_image write_csv write_parquet "
        "write_json write_ipc write_excel write_avro write_delta sink_parquet sink_csv sink_ipc "
        "sink_ndjson mkdir touch symlink_to hardlink_to chmod save saveAsTable insertInto "
        "saveAsTextFile write writelines visualize dump",
    ),
    "to_clipboard": Effect("external", "writes to the clipboard"),
    **_each(
        NETWORK,
        "post patch request urlopen urlretrieve send sendall sendto connect recv download "
        "download_file upload upload_file",
    ),
    **_each(WRITES_DATABASE, "to_sql write_database jdbc"),
    **_each(
        DELETES_DATA,
        "delete delete_object delete_objects drop_table dropTempView dropGlobalTempView",
    ),
    **_each(REMOVES_FILES, "unlink rmdir rmtree"),
}
# Writers that return text when given no path, and write a file when given one.
OPTIONAL_PATH_WRITERS: frozenset[str] = _words(
    "to_csv to_json to_html to_markdown to_latex to_string to_xml"
)
PATH_KEYWORDS: frozenset[str] = _words(
    "path path_or_buf buf filepath_or_buffer io source fname file filename urlpath uri excel_writer"
)
# Higher-order calls: a callable given to them runs, so a callable that cannot be checked is unknown.
CALLABLE_FIRST: frozenset[str] = _words(  # the first argument is called
    "apply applymap map transform pipe agg aggregate map_partitions map_blocks reduce submit "
    "vectorize apply_along_axis builtins.filter builtins.map functools.reduce"
)
CALLABLE_KEY: frozenset[str] = _words(  # key= is called
    "sorted min max sort sort_values sort_index nlargest nsmallest groupby"
)
SQL_METHODS: frozenset[str] = _words(
    "execute executemany executescript sql read_sql read_sql_query raw_sql"
)
SPARK_WRITE_ACTIONS: frozenset[str] = _words(
    "save parquet csv json orc text saveAsTable insertInto jdbc start toTable"
)
SPARK_READ_FORMATS: frozenset[str] = _words("csv json parquet orc text table load")
SPARK_CONFIGURE: frozenset[str] = _words(
    "mode format option options schema partitionBy bucketBy sortBy outputMode trigger"
)
IN_MEMORY_KINDS: frozenset[str] = frozenset({"io.StringIO", "io.BytesIO"})
CONVENTIONAL_ALIASES: dict[str, str] = {
    "pd": "pandas",
    "np": "numpy",
    "plt": "matplotlib.pyplot",
    "mpl": "matplotlib",
    "sns": "seaborn",
    "pl": "polars",
    "pa": "pyarrow",
    "pq": "pyarrow.parquet",
    "dd": "dask.dataframe",
    "da": "dask.array",
    "px": "plotly.express",
    "go": "plotly.graph_objects",
    "alt": "altair",
    "sm": "statsmodels.api",
    "smf": "statsmodels.formula.api",
    "F": "pyspark.sql.functions",
    "dt": "datetime",
}
# Names taken to be these modules when this code uses them without binding them (an earlier cell
# imported them): the usual aliases, and the top-level names of the modules above.
_COMMON_WORDS = _words(
    "array copy string types time html io abc random csv glob secrets operator numbers enum "
    "struct typing dt http"
)
ASSUMED_MODULES: dict[str, str] = {
    name: module
    for name, module in [*((m, m) for m in MODULES), *CONVENTIONAL_ALIASES.items()]
    if "." not in name and not name.startswith("_") and name not in _COMMON_WORDS
}
SAFE_DUNDERS: frozenset[str] = _words(
    "__name__ __qualname__ __doc__ __module__ __version__ __file__ __class__ __init__ "
    "__annotations__"
)

# Magics by name, as IPython passes them to run_line_magic / run_cell_magic.
LINE_MAGICS: dict[str, Effect] = {
    **_each(INSTALLS, "pip conda mamba micromamba"),
    **_each(SHELL, "system sx sc ls ll lf lk lx ldir cat cp mv mkdir rm rmdir killbgscripts"),
    **_each(WORKDIR, "cd pushd popd"),
    "set_env": ENVIRONMENT,
    "env": ENVIRONMENT,  # read when it only shows variables
    "store": Effect("external", "stores variables on disk"),
    **_each(WRITES_FILES, "save logstart notebook"),
    **_each(
        Effect("external", "loads an IPython extension, which runs its code"), "load_ext reload_ext"
    ),
    **_each(Effect("unknown", "runs code it cannot see"), "run load rerun recall macro edit debug"),
    **_each(Effect("destructive", "deletes variables"), "reset reset_selective xdel"),
    **_each(Effect("write", "changes shell aliases"), "alias unalias"),
    **_each(
        READS,
        "who whos who_ls lsmagic magic pwd history pinfo pinfo2 psearch psource pdoc pdef pfile "
        "matplotlib config precision colors xmode automagic autocall doctest_mode page pprint "
        "quickref tb dhist dirs gui autoreload pdb",
    ),
}
CELL_MAGICS: dict[str, Effect] = {
    **_each(
        Effect("external", "runs a script in another process"),
        "bash sh script system perl ruby python python2 python3 pypy",
    ),
    **_each(WRITES_FILES, "writefile file"),
    **_each(BROWSER, "javascript js html"),
    **_each(READS, "markdown latex svg"),
    "debug": Effect("unknown", "runs code under the debugger"),
}
# Magics whose argument is Python code run in the namespace: they take that code's class.
CODE_MAGICS: dict[str, frozenset[str]] = {  # magic -> its options that take a value
    "time": frozenset(),
    "timeit": frozenset({"-n", "-r", "-p"}),
    "prun": frozenset({"-s", "-l", "-T", "-D"}),
    "capture": frozenset(),
}
PURE_EXTENSIONS: frozenset[str] = frozenset({"autoreload"})

# The rules that are code rather than tables, for the documentation table.
SYNTAX_RULES: tuple[tuple[Risk, str], ...] = (
    ("read", "expressions and attribute access; calls that the rows below list as read"),
    ("read", "importing an allow-listed module (see `MODULES`), and binding it to its usual name"),
    (
        "read",
        "`open()` without a mode or with a reading one; `getattr(obj, 'name')` (literal, public)",
    ),
    (
        "write",
        "assigning a new name (also `for`, `with ... as`, `def`, `class`, `:=`); augmented "
        "assignment; item or attribute assignment; `inplace=True`; `out=name`; deleting a name "
        "this code created",
    ),
    ("write", "item or attribute assignment on a module (`pd.options...`, `plt.rcParams[...]`)"),
    ("destructive", "rebinding or deleting a name that exists; `from module import *`"),
    (
        "external",
        "importing a module that is not allow-listed; `open()` with a w, a, x or + mode; a "
        "writer given a path; a reader given a URL; `os.environ[...] = `; `!` commands",
    ),
    (
        "unknown",
        "calling a function defined earlier or not known; a method on none of the lists here; "
        "calling the result of an expression; passing a callable it cannot check to `apply`, "
        "`map`...; dunder attributes; `get_ipython()` other than a magic; anything mentioning "
        "qloop; `df.eval`/`df.query` text with `@`, calls or dunders; paths it cannot read; a "
        "module passed around as a value; code that does not parse",
    ),
)


# --- SQL, paths and expression strings -------------------------------------------------------------

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


# --- The analysis ----------------------------------------------------------------------------------


@dataclass
class _Scope:
    kind: Literal["function", "class", "comprehension"]
    local: set[str]
    declared_global: set[str] = field(default_factory=set)
    params: frozenset[str] = frozenset()
    mutates_params: bool = False  # the body changes an object passed to it
    branch_depth: int = 0  # inside how many branches of this scope's own code
    serial: int = 0


@dataclass
class _Bindings:
    """What the analysis knows about names bound by this code, as it reads it top to bottom."""

    created: set[str] = field(default_factory=set)
    aliases: dict[str, str | None] = field(default_factory=dict)  # None: bound to several things
    modules: set[str] = field(default_factory=set)  # qualified names that are whole modules
    kinds: dict[str, str] = field(default_factory=dict)  # name -> what made its value
    strings: dict[str, ast.expr] = field(default_factory=dict)
    functions: set[str] = field(default_factory=set)
    bindings: dict[str, int] = field(default_factory=dict)  # how often each scope binds a name
    maybe_module: set[str] = field(default_factory=set)  # may hold a module or a function of one
    param_mutators: set[str] = field(default_factory=set)  # functions that change their arguments
    refers: dict[str, set[str]] = field(
        default_factory=dict
    )  # name -> names whose objects it holds


class _TooDeep(Exception):
    pass


class _Analysis(ast.NodeVisitor):
    """One walk over a module's statements, collecting reasons and changed names."""

    MAX_MAGIC_DEPTH = 4

    def __init__(self, existing: Container[str]) -> None:
        self.existing = existing
        self.reasons: dict[tuple[int, Risk, str], Reason] = {}
        self.changed: set[str] = set()
        self.unbounded = False
        self.names = _Bindings()
        self.scopes: list[_Scope] = []
        self.mutating_lambdas: set[int] = set()
        self.branch_depth = 0  # inside how many branches of the module's own code
        self.scope_count = 0
        self.line_offset = 0
        self.magic_depth = 0

    # -- recording ---------------------------------------------------------------------------------

    def note(self, node: ast.AST | int, effect: Effect, text: str | None = None) -> None:
        """Record a finding on a node's line; unknown findings leave the changed names unbounded."""
        if effect.risk == "read":
            return
        line = node if isinstance(node, int) else getattr(node, "lineno", 1)
        reason = Reason(line + self.line_offset, effect.risk, text or effect.text)
        self.reasons.setdefault((reason.line, reason.risk, reason.text), reason)
        if effect.risk == "unknown":
            self.unbounded = True

    def assessment(self) -> Assessment:
        reasons = tuple(sorted(self.reasons.values(), key=lambda r: (r.line, -severity(r.risk))))
        may_change = None if self.unbounded else frozenset(self.changed)
        return Assessment(most_severe(r.risk for r in reasons), reasons, may_change)

    # -- names and scopes --------------------------------------------------------------------------

    def is_user_name(self, name: str) -> bool:
        """Whether a name here is a user-namespace name (not a local of a function or class)."""
        for depth, scope in enumerate(reversed(self.scopes)):
            if scope.kind == "class" and depth > 0:
                continue  # a class body is not an enclosing scope of its methods
            if name in scope.declared_global:
                return True
            if name in scope.local:
                return False
        return True

    def exists(self, name: str) -> bool:
        """Whether a user name held a value before this code ran (and this code did not make it)."""
        if name in self.names.created or _is_history_name(name):
            return False
        return name in self.existing and name not in IPYTHON_NAMES

    def shadowed(self, name: str) -> bool:
        return (
            name in self.names.created
            or not self.is_user_name(name)
            or (name in self.existing and name not in IPYTHON_NAMES)
        )

    def resolve(self, node: ast.expr) -> str | None:
        """The qualified name an expression refers to (``os.system`` for ``o.system``), if known."""
        if isinstance(node, ast.Name):
            return self.resolve_name(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def resolve_name(self, name: str) -> str | None:
        if name in self.names.aliases:
            return self.names.aliases[name]
        assumed = self.assumed_module(name)
        if assumed is not None:
            return assumed  # imported by an earlier cell, under its usual name
        if self.shadowed(name) or name not in BUILTINS:
            return None
        return f"builtins.{name}"

    def bind(
        self, name: str, node: ast.AST, value: ast.expr | None, target: str | None = None
    ) -> None:
        """A name is (re)bound: note the write or the overwrite, and track what it now holds."""
        self.track(name, value, target)
        if not self.is_user_name(name):
            return
        self.changed.add(name)
        if self.exists(name):
            self.note(node, Effect("destructive", ""), f"overwrites {name}, which exists")
        elif name not in self.names.created:
            self.note(node, Effect("write", ""), f"creates {name}")
        self.names.created.add(name)

    def track(self, name: str, value: ast.expr | None, target: str | None = None) -> bool:
        """Record what a name holds now (the module it names, what made its value, its text).

        Only a name bound once, outside any branch, loop or function, holds something known: any
        other binding may leave the earlier value in place, so the name is then one of several
        things. Returns whether the binding is certain.
        """
        names = self.names
        target = target or (self.resolve(value) if value is not None else None)
        previous = names.aliases.get(name, self.assumed_module(name))
        key = self.binding_key(name)
        names.bindings[key] = names.bindings.get(key, 0) + 1
        certain = self.is_certain(name)
        for table in (names.kinds, names.strings, names.refers):
            table.pop(name, None)
        names.functions.discard(name)
        names.param_mutators.discard(name)
        if certain and target is None:
            names.aliases.pop(name, None)
        elif certain or (target is not None and target == previous):
            names.aliases[name] = target
        else:
            names.aliases[name] = None  # one of several things
            if target is not None or previous is not None:
                names.maybe_module.add(name)
        kind = self.kind_of(value) if certain else None
        if kind:
            names.kinds[name] = kind
        if certain and value is not None and _is_string_expr(value):
            names.strings[name] = value
        return certain

    def is_certain(self, name: str) -> bool:
        """Whether the one binding of a name so far happens whenever the code runs."""
        depth = self.scopes[-1].branch_depth if self.scopes else self.branch_depth
        global_from_function = bool(self.scopes) and self.is_user_name(name)
        once = self.names.bindings.get(self.binding_key(name)) == 1
        return once and depth == 0 and not global_from_function

    def binding_key(self, name: str) -> str:
        """A name as the scope that binds it: locals of different functions are different names."""
        for depth, scope in enumerate(reversed(self.scopes)):
            if scope.kind == "class" and depth > 0:
                continue
            if name in scope.declared_global:
                return name
            if name in scope.local:
                return f"{scope.serial}:{name}"
        return name

    def is_ambiguous_module(self, node: ast.expr) -> bool:
        """Whether an expression's root may be a module here, or may be something else."""
        root = _root_name(node)
        names = self.names
        return root in names.maybe_module and names.aliases.get(root or "") is None

    def assumed_module(self, name: str) -> str | None:
        """The module a name is taken to be when this code has not bound it (``pd``, ``os``)."""
        if self.binding_key(name) in self.names.bindings or not self.is_user_name(name):
            return None
        return ASSUMED_MODULES.get(name)

    @contextlib.contextmanager
    def branch(self) -> Iterator[None]:
        """Code that may run or not (a branch, a loop, a handler, a function body)."""
        holder: _Scope | _Analysis = self.scopes[-1] if self.scopes else self
        holder.branch_depth += 1
        try:
            yield
        finally:
            holder.branch_depth -= 1

    def visit_If(self, node: ast.If | ast.While) -> None:
        self.visit(node.test)
        with self.branch():
            for statement in [*node.body, *node.orelse]:
                self.visit(statement)

    visit_While = visit_If

    def visit_Try(self, node: ast.Try) -> None:  # and ast.TryStar (3.11+): the same fields
        with self.branch():
            for part in [*node.body, *node.handlers, *node.orelse]:
                self.visit(part)
        for statement in node.finalbody:
            self.visit(statement)

    visit_TryStar = visit_Try

    def visit_match_case(self, node: ast.match_case) -> None:
        with self.branch():
            self.generic_visit(node)

    def kind_of(self, node: ast.expr | None, depth: int = 0) -> str | None:
        """What made a value: a qualified function name, ``builtins`` for literals, or None."""
        if node is None or depth > 20:
            return None
        if isinstance(node, _LITERALS):
            return "builtins"
        if isinstance(node, ast.Name):
            return self.names.kinds.get(node.id)
        if isinstance(node, ast.Call):
            receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
            return self.resolve(node.func) or self.kind_of(receiver, depth + 1)
        if isinstance(node, ast.Attribute):
            return self.resolve(node) or self.kind_of(node.value, depth + 1)
        if isinstance(node, ast.Subscript):
            return self.kind_of(node.value, depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            return self.kind_of(node.left, depth + 1)
        return None

    def string_value(self, node: ast.expr, depth: int = 0) -> str | None:
        """The text of a string expression, with each part it cannot read as a placeholder."""
        if depth > 20:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.JoinedStr):
            return "".join(self.string_value(v, depth + 1) or _PLACEHOLDER for v in node.values)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
            left = self.string_value(node.left, depth + 1)
            right = self.string_value(node.right, depth + 1) or _PLACEHOLDER
            return None if left is None else left + right
        if isinstance(node, ast.Name) and node.id in self.names.strings:
            return self.string_value(self.names.strings[node.id], depth + 1)
        if isinstance(node, ast.Call) and node.args and _describe(node.func).endswith("text"):
            return self.string_value(node.args[0], depth + 1)  # text("...") of SQLAlchemy
        return None

    # -- statements --------------------------------------------------------------------------------

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit_assigned(node.targets, node.value)
        for target in node.targets:
            self.bind_target(target, node.value, node)
            self.refer(target, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit_assigned([node.target], node.value)
            self.bind_target(node.target, node.value, node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        target = node.target
        if isinstance(target, ast.Name):
            self.track(target.id, None)
            self.mutate(target, node, "")
        else:
            self.bind_target(target, None, node)

    def visit_assigned(self, targets: list[ast.expr], value: ast.expr) -> None:
        """Visit an assigned value; a module or function bound to a plain name is an alias, not a use."""
        pairs = [(t, value) for t in targets]
        if isinstance(value, (ast.Tuple, ast.List)):
            same = [
                t for t in targets if isinstance(t, type(value)) and len(t.elts) == len(value.elts)
            ]
            if len(same) == len(targets):
                pairs = [
                    (t, v) for target in same for t, v in zip(target.elts, value.elts, strict=True)
                ]
        seen: set[int] = set()
        for target, part in pairs:
            if id(part) in seen:
                continue
            seen.add(id(part))
            if isinstance(target, ast.Name) and self.resolve(part) is not None:
                self.visit_receiver(part)
            else:
                self.visit(part)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit_assigned([node.target], node.value)
        scopes, self.scopes = self.scopes, [s for s in self.scopes if s.kind != "comprehension"]
        try:
            if len(scopes) != len(self.scopes):  # in a comprehension: it may bind no time
                with self.branch():
                    self.bind(node.target.id, node, node.value)
            else:
                self.bind(node.target.id, node, node.value)
        finally:
            self.scopes = scopes

    def bind_target(self, target: ast.expr, value: ast.expr | None, node: ast.AST) -> None:
        """Bind an assignment target: names are bound, items and attributes mutate their root."""
        if isinstance(target, ast.Name):
            self.bind(target.id, node, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            values: list[ast.expr | None] = [None] * len(target.elts)
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                values = list(value.elts)
            for element, element_value in zip(target.elts, values, strict=True):
                self.bind_target(element, element_value, node)
        elif isinstance(target, ast.Starred):
            self.bind_target(target.value, None, node)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            self.visit_target_parts(target)
            self.mutate(target.value, node, "")

    def visit_target_parts(self, target: ast.Attribute | ast.Subscript) -> None:
        if isinstance(target, ast.Attribute):
            self.check_attribute_name(target)
        else:
            self.visit(target.slice)
        self.visit_receiver(target.value)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self.delete(target, node)

    def delete(self, target: ast.expr, node: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.delete(element, node)
        elif isinstance(target, ast.Name):
            self.delete_name(target.id, node)
        elif isinstance(target, (ast.Attribute, ast.Subscript)):
            self.visit_target_parts(target)
            root = _root_name(target)
            if root is not None and self.names.aliases.get(root):
                self.mutate(target.value, node, "")
            elif root is not None and self.is_user_name(root):
                self.changed.add(root)
                risk: Risk = "destructive" if self.exists(root) else "write"
                self.note(node, Effect(risk, ""), f"deletes {_describe(target)}")

    def delete_name(self, name: str, node: ast.AST) -> None:
        self.track(name, None)
        if not self.is_user_name(name):
            return
        self.changed.add(name)
        if name in self.names.created and name not in self.existing:
            self.note(node, Effect("write", ""), f"deletes {name}, which this code created")
        else:
            suffix = ", which exists" if self.exists(name) else ""
            self.note(node, Effect("destructive", ""), f"deletes {name}{suffix}")
        self.names.created.discard(name)

    def mutate(self, receiver: ast.expr, node: ast.AST, detail: str) -> None:
        """The object ``receiver`` evaluates to changes: note it against its root name."""
        root = _root_name(receiver)
        if root is None:
            return  # a temporary: the call that made it is judged on its own
        if self.is_ambiguous_module(receiver):
            self.note(node, UNCHECKED, f"changes {root}, which may be a module")
            return
        qualified = self.module_path(receiver)
        if qualified is not None:
            self.note(node, _module_state_effect(qualified), None)
            return
        for name in self.holders(root):
            if not self.is_user_name(name):
                self.local_change(name)
                continue
            self.changed.add(name)
            suffix = ", which exists" if self.exists(name) else ""
            through = f" through {root}" if name != root else ""
            self.note(node, Effect("write", ""), f"changes {name}{suffix}{through}{detail}")

    def holders(self, root: str) -> set[str]:
        """``root`` and the names whose objects it may hold (``x = df``, ``for row in rows``)."""
        found, pending = {root}, [root]
        while pending and len(found) < 50:
            for name in self.names.refers.get(pending.pop(), set()) - found:
                found.add(name)
                pending.append(name)
        return found

    def local_change(self, name: str) -> None:
        """A function changes one of its locals: if it is a parameter, callers' objects change."""
        for scope in reversed(self.scopes):
            if name in scope.local:
                scope.mutates_params = scope.mutates_params or name in scope.params
                return

    def refer(self, target: ast.expr, source: ast.expr) -> None:
        """Names bound by ``target`` hold objects reachable from ``source``."""
        roots = _source_roots(source)
        for name in _target_names(target):
            if roots - {name}:
                self.names.refers[name] = roots - {name}

    def module_path(self, node: ast.expr) -> str | None:
        """``os.environ`` for ``o.environ["X"]`` when the root is a module or builtin, else None."""
        attrs: list[str] = []
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
            if isinstance(node, ast.Attribute):
                attrs.append(node.attr)
            node = node.func if isinstance(node, ast.Call) else node.value
        if not isinstance(node, ast.Name):
            return None
        base = self.resolve_name(node.id)
        if base is None:
            return None
        return ".".join([base, *reversed(attrs)])

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        with self.branch():  # the loop may run no time: its names may keep their earlier values
            self.bind_target(node.target, None, node)
            self.refer(node.target, node.iter)
            for statement in [*node.body, *node.orelse]:
                self.visit(statement)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self.bind_target(item.optional_vars, item.context_expr, node)
                self.refer(item.optional_vars, item.context_expr)
        for statement in node.body:
            self.visit(statement)

    visit_AsyncWith = visit_With

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.bind(node.name, node, None)
        for statement in node.body:
            self.visit(statement)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.pattern is not None:
            self.visit(node.pattern)
        if node.name:
            self.bind(node.name, node, None)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self.bind(node.name, node, None)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        self.generic_visit(node)
        if node.rest:
            self.bind(node.rest, node, None)

    def visit_Global(self, node: ast.Global) -> None:
        return  # handled when the enclosing function's locals are computed

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        return

    # -- imports -----------------------------------------------------------------------------------

    def visit_Import(self, node: ast.Import) -> None:
        for name in node.names:
            self.check_import(name.name, node)
            qualified = name.name if name.asname else name.name.split(".")[0]
            bound = name.asname or qualified
            self.names.modules.add(qualified)
            self.bind_import(bound, qualified, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = "." * node.level + (node.module or "")
        self.check_import(module, node)
        for name in node.names:
            if name.name == "*":
                self.unbounded = True
                self.note(
                    node,
                    Effect("destructive", ""),
                    f"imports every name of {module}, which may overwrite variables",
                )
                continue
            self.bind_import(name.asname or name.name, f"{module}.{name.name}", node)

    def check_import(self, module: str, node: ast.AST) -> None:
        if "qloop" in module.lower():
            self.note(node, Effect("unknown", f"imports {module}, the agent's own machinery"))
        elif _module_effect(module) is None:
            self.unbounded = True
            self.note(node, Effect("external", f"imports {module}, which may run code on import"))

    def bind_import(self, bound: str, qualified: str, node: ast.AST) -> None:
        """Bind an imported name; its module's usual name (``pd``, ``json``) is not a write."""
        usual = qualified.split(".")[-1] == bound or CONVENTIONAL_ALIASES.get(bound) == qualified
        if not usual:
            self.bind(bound, node, None, qualified)
            return
        self.track(bound, None, qualified)
        if self.is_user_name(bound):
            self.changed.add(bound)
            self.names.created.add(bound)

    # -- definitions -------------------------------------------------------------------------------

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for expression in [*node.decorator_list, *node.args.defaults]:
            self.visit(expression)
        for default in node.args.kw_defaults:
            if default is not None:
                self.visit(default)
        self.bind(node.name, node, None)
        certain = self.is_certain(node.name)
        if certain:
            self.names.functions.add(node.name)
        params = frozenset(_parameters(node.args))
        scope = _Scope("function", _local_names(node), _globals_of(node.body), params)
        self.visit_body(node.body, scope)
        if scope.mutates_params:
            self.names.param_mutators.add(node.name)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for expression in node.args.defaults:
            self.visit(expression)
        params = _parameters(node.args)
        scope = _Scope("function", params, params=frozenset(params))
        self.visit_body([node.body], scope)
        if scope.mutates_params:
            self.mutating_lambdas.add(id(node))

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expression in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(expression)
        self.bind(node.name, node, None)
        if self.is_certain(node.name):
            self.names.functions.add(node.name)
        self.visit_body(node.body, _Scope("class", _bound_names(node.body)))

    def visit_body(self, body: list[ast.stmt] | list[ast.expr], scope: _Scope) -> None:
        self.scope_count += 1
        scope.serial = self.scope_count
        self.scopes.append(scope)
        try:
            for statement in body:
                self.visit(statement)
        finally:
            self.scopes.pop()

    def visit_comprehension_of(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp
    ) -> None:
        first, *rest = node.generators
        self.visit(first.iter)
        targets: set[str] = set()
        for generator in node.generators:
            targets |= _target_names(generator.target)
        self.scope_count += 1
        self.scopes.append(_Scope("comprehension", targets, serial=self.scope_count))
        for generator in node.generators:
            self.refer(generator.target, generator.iter)
        try:
            for condition in first.ifs:
                self.visit(condition)
            for generator in rest:
                self.visit(generator.iter)
                for condition in generator.ifs:
                    self.visit(condition)
            for part in _comprehension_results(node):
                self.visit(part)
        finally:
            self.scopes.pop()

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = visit_comprehension_of

    # -- names, attributes, constants ---------------------------------------------------------------

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            return
        if self.check_identifier(node.id, node):
            return
        qualified = self.resolve_name(node.id)
        if qualified is not None:
            self.note_reference(qualified, node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.check_attribute_name(node)
        qualified = self.resolve(node)
        if qualified is not None:
            self.note_reference(qualified, node)
        else:
            self.visit_receiver(node.value)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and "qloop" in node.value.lower():
            self.note(node, Effect("unknown", "mentions qloop, the agent's own machinery"))

    def check_identifier(self, name: str, node: ast.AST) -> bool:
        """Note identifiers that reach machinery; True when nothing more needs saying."""
        if "qloop" in name.lower():
            self.note(node, Effect("unknown", f"uses {name}, the agent's own machinery"))
            return True
        if name in {"__builtins__", "__builtin__", "__loader__", "__spec__"}:
            self.note(node, Effect("unknown", f"uses {name}, which can reach anything"))
            return True
        if name == "get_ipython" and not self.shadowed(name):
            self.note(node, Effect("unknown", "uses get_ipython(), which can run anything"))
            return True
        return False

    def check_attribute_name(self, node: ast.Attribute) -> None:
        attr = node.attr
        if "qloop" in attr.lower():
            self.note(node, Effect("unknown", f"uses .{attr}, the agent's own machinery"))
        elif attr.startswith("__") and attr.endswith("__") and attr not in SAFE_DUNDERS:
            self.note(node, Effect("unknown", f"uses .{attr}, which can reach anything"))

    def note_reference(self, qualified: str, node: ast.expr) -> None:
        """A module or function used as a value (not called here): it may be called elsewhere."""
        shown = _shown(qualified)
        if qualified in self.names.modules or qualified in MODULES:
            effect = _module_effect(qualified) or UNCHECKED
            if effect.risk != "read":
                self.note(node, Effect("unknown", ""), f"passes the module {shown} around")
            return
        if qualified.split(".")[-1].isupper():
            return  # a constant such as subprocess.PIPE
        effect = _call_effect(qualified)
        if effect.risk != "read":
            self.note(node, effect, f"refers to {shown}, which {effect.text}")

    def visit_receiver(self, node: ast.expr) -> None:
        """Visit the object a method is called on (a module path needs no further look)."""
        if isinstance(node, ast.Name):
            self.check_identifier(node.id, node)
        elif isinstance(node, ast.Attribute):
            self.check_attribute_name(node)
            if self.resolve(node) is None:
                self.visit_receiver(node.value)
        else:
            self.visit(node)

    # -- calls -------------------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call) -> None:
        if self.magic(node):
            return
        func = node.func
        if isinstance(func, ast.Name):
            self.check_identifier(func.id, func)
        elif isinstance(func, ast.Attribute):
            self.visit_receiver(func)
        else:
            self.visit(func)
        for argument in [*node.args, *(k.value for k in node.keywords)]:
            self.visit(argument)
        self.call(node)
        self.keyword_effects(node)

    def call(self, node: ast.Call) -> None:
        func = node.func
        qualified = self.resolve(func)
        if isinstance(func, ast.Lambda):
            pass  # its body is judged as written
        elif qualified is not None:
            self.call_qualified(node, qualified)
        elif isinstance(func, ast.Name):
            self.call_name(node, func.id)
        elif isinstance(func, ast.Attribute):
            self.call_method(node, func)
        else:
            self.note(
                node, UNCHECKED, f"calls the result of {_describe(func)}, which it cannot check"
            )
        self.check_callables(node, qualified)
        if self.changes_arguments(func):
            for argument in [*node.args, *(k.value for k in node.keywords)]:
                self.mutate(argument, node, f" (given to {_describe(func)}, which changes it)")

    def changes_arguments(self, func: ast.expr) -> bool:
        """Whether a function or lambda this code defines changes the objects passed to it."""
        if isinstance(func, ast.Lambda):
            return id(func) in self.mutating_lambdas
        return isinstance(func, ast.Name) and func.id in self.names.param_mutators

    def call_name(self, node: ast.Call, name: str) -> None:
        if name in self.names.functions and name in self.names.created:
            return  # defined above: its body was judged where it was written
        if name == "get_ipython" and not self.shadowed(name):
            return  # noted as an identifier
        if name in self.names.aliases:  # bound to several modules or functions
            self.note(node, UNCHECKED, f"calls {name}(), which may be one of several things")
            return
        earlier = ", defined earlier," if self.exists(name) else ""
        self.note(node, UNCHECKED, f"calls {name}(){earlier} which it cannot check")

    def call_qualified(self, node: ast.Call, qualified: str) -> None:
        shown = _shown(qualified)
        special = _SPECIAL_CALLS.get(qualified)
        if special is not None:
            special(self, node, shown)
            return
        if qualified in ARGUMENT_MUTATORS and node.args:
            self.mutate(node.args[0], node, f" ({shown})")
            return
        if qualified in SQL_FUNCTIONS:
            self.sql_call(node, shown)
            return
        if qualified.startswith(URL_READERS) and qualified not in FUNCTIONS:
            self.reader_call(node, shown)
            return
        effect = _call_effect(qualified)
        self.note(node, effect, f"{effect.text} ({shown})")

    def call_method(self, node: ast.Call, func: ast.Attribute) -> None:
        if self.is_ambiguous_module(func.value):
            self.note(
                node, UNCHECKED, f"calls {_describe(func)}(), which may be a module's function"
            )
            return
        for rule in _METHOD_RULES:
            if rule(self, node, func):
                return
        self.note(node, UNCHECKED, f"calls {_describe(func)}(), which it cannot check")

    def keyword_effects(self, node: ast.Call) -> None:
        receiver = node.func.value if isinstance(node.func, ast.Attribute) else None
        for keyword in node.keywords:
            value = keyword.value
            if keyword.arg == "inplace" and not _is_false(value) and receiver is not None:
                self.mutate(receiver, node, f" ({_describe(node.func)} with inplace=True)")
            elif keyword.arg == "out" and isinstance(
                value, (ast.Name, ast.Attribute, ast.Subscript)
            ):
                self.mutate(value, node, f" (out= of {_describe(node.func)})")

    def check_callables(self, node: ast.Call, qualified: str | None) -> None:
        """A callable given to ``apply``, ``map``, ``sorted(key=)``... runs: check it can be judged."""
        name = (qualified or "").split(".")[-1] or getattr(node.func, "attr", "")
        called = (
            qualified if qualified and qualified.startswith(("builtins.", "functools.")) else name
        )
        given = [k.value for k in node.keywords if k.arg in {"func", "function"}]
        if called in CALLABLE_FIRST and node.args:
            given.append(node.args[0])
        if name in CALLABLE_KEY:
            given += [k.value for k in node.keywords if k.arg == "key"]
        for argument in given:
            for candidate in _callable_candidates(argument):
                if self.is_unchecked_callable(candidate):
                    shown = _describe(candidate)
                    self.note(node, UNCHECKED, f"passes {shown} to {name}, which calls it")
                elif self.changes_arguments(candidate):
                    self.mutate_inputs(node, candidate)

    def mutate_inputs(self, node: ast.Call, callback: ast.expr) -> None:
        """A callback that changes its arguments is given the receiver's or the other arguments' items."""
        receiver = [node.func.value] if isinstance(node.func, ast.Attribute) else []
        others = [
            a
            for a in [*receiver, *node.args, *(k.value for k in node.keywords)]
            if a is not callback
        ]
        for other in others:
            self.mutate(
                other, node, f" (through {_describe(callback)}, which changes its arguments)"
            )

    def is_unchecked_callable(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Name):
            if self.resolve_name(node.id) is not None:
                return False  # a module function: judged as a reference
            made_here = node.id in self.names.functions or node.id in self.names.strings
            return not made_here and node.id not in self.names.kinds
        return isinstance(node, ast.Attribute) and self.resolve(node) is None

    # -- special calls and method rules -------------------------------------------------------------

    def sql_call(self, node: ast.Call, shown: str) -> None:
        query = _first_argument(node, {"sql", "query", "statement"})
        text = self.string_value(query) if query is not None else None
        if text is None:
            self.note(node, Effect("unknown", f"runs SQL it cannot read ({shown})"))
            return
        effect = sql_effect(text.replace(_PLACEHOLDER, " "))
        self.note(node, effect, f"{effect.text} ({shown})")
        if _PLACEHOLDER in text and effect.risk != "destructive":
            self.note(node, Effect("unknown", f"builds SQL from values it cannot read ({shown})"))

    def reader_call(self, node: ast.Call, shown: str) -> None:
        source = _first_argument(node, PATH_KEYWORDS)
        where = self.path_kind(source) if source is not None else "local"
        if where == "url":
            self.note(node, Effect("external", f"reads from the network ({shown})"))
        elif where == "unknown":
            self.note(node, Effect("unknown", f"reads from a path that may be a URL ({shown})"))

    def path_kind(self, node: ast.expr) -> Literal["local", "url", "unknown"]:
        """Whether a path expression is a local path, a URL, or cannot be told."""
        if self.kind_of(node) in {"pathlib.Path", "pathlib.PurePath", *IN_MEMORY_KINDS}:
            return "local"
        if isinstance(node, ast.Call) and self.resolve(node.func) in _PATH_BUILDERS:
            return "local" if not node.args else self.path_kind(node.args[0])
        text = self.string_value(node)
        if text is None:
            return "unknown"
        prefix = text.split(_PLACEHOLDER)[0]
        if _URL.match(prefix) and not prefix.lower().startswith("file://"):
            return "url"
        if _PLACEHOLDER in text and (not prefix or _MAYBE_SCHEME.match(prefix)):
            return "unknown"
        return "local"

    def open_call(self, node: ast.Call, shown: str, mode_index: int = 1) -> None:
        """``open(p, mode)``: reading is read, writing external, a mode it cannot read unknown."""
        mode = _argument(node, mode_index, "mode")
        first = self.string_value(node.args[0]) if mode_index == 0 and node.args else None
        if mode_index == 0 and not (first and _MODE.fullmatch(first)):
            mode = _argument(node, 1, "mode")  # zipfile.open(name, mode), not Path.open(mode)
        if mode is None:
            return
        text = self.string_value(mode)
        if text is None or not _MODE.fullmatch(text):
            self.note(node, Effect("unknown", f"opens a file with a mode it cannot read ({shown})"))
        elif set(text) & set("wax+"):
            self.note(node, Effect("external", f"writes files ({shown} with mode {text!r})"))

    def magic(self, node: ast.Call) -> bool:
        """Judge ``get_ipython().run_line_magic(...)`` and the like; False for any other call."""
        func = node.func
        if not (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name)
            and func.value.func.id == "get_ipython"
            and not self.shadowed("get_ipython")
            and func.attr in _MAGIC_CALLS
        ):
            return False
        texts = [
            a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        if len(texts) != len(node.args) or node.keywords or not texts:
            shell = func.attr in {"system", "getoutput"}
            self.note(node, SHELL if shell else UNCHECKED, _UNREADABLE_MAGIC[shell])
            for argument in [*node.args, *(k.value for k in node.keywords)]:
                self.visit(argument)
            return True
        _MAGIC_CALLS[func.attr](self, node, texts)
        return True

    def line_magic(self, node: ast.Call, name: str, line: str) -> None:
        if "qloop" in name.lower() or "qloop" in line.lower() or name == "agent":
            self.note(node, Effect("unknown", f"runs %{name}, the agent's own machinery"))
        elif name in CODE_MAGICS:
            self.code_magic(node, name, line, "", cell=False)
        elif name in _LINE_MAGIC_RULES:
            _LINE_MAGIC_RULES[name](self, node, name, line)
        elif name in LINE_MAGICS:
            self.note(node, LINE_MAGICS[name], f"{LINE_MAGICS[name].text} (%{name})")
        else:
            self.note(node, Effect("unknown", f"runs the magic %{name}, which it cannot check"))

    def cell_magic(self, node: ast.Call, name: str, line: str, body: str) -> None:
        if "qloop" in (name + line + body).lower() or name == "agent":
            self.note(node, Effect("unknown", f"runs %%{name}, the agent's own machinery"))
        elif name in CODE_MAGICS:
            self.code_magic(node, name, line, body, cell=True)
        elif name in {"writefile", "file"}:
            target = next((t for t in line.split() if not t.startswith("-")), "a file")
            self.note(node, Effect("external", f"writes the file {target} (%%{name})"))
        elif name in CELL_MAGICS:
            self.note(node, CELL_MAGICS[name], f"{CELL_MAGICS[name].text} (%%{name})")
        else:
            self.note(
                node, Effect("unknown", f"runs the cell magic %%{name}, which it cannot check")
            )

    def code_magic(self, node: ast.Call, name: str, line: str, body: str, *, cell: bool) -> None:
        """``%time``, ``%timeit``, ``%prun``, ``%%capture``: the class of the code they run."""
        options, rest = _split_options(line, CODE_MAGICS[name])
        if name == "prun" and {"-T", "-D"} & set(options):
            self.note(node, Effect("external", "writes profile output to a file (%prun)"))
        if name == "capture":
            if rest.split():
                self.bind(rest.split()[0], node, None)
            rest = ""
        if rest.strip():
            self.nested(node, rest.strip(), line_offset=-1)
        if cell:
            self.nested(node, body, line_offset=0)

    def nested(self, node: ast.Call, code: str, line_offset: int) -> None:
        """Judge code a magic runs, with its lines mapped to the lines of the cell."""
        if self.magic_depth >= self.MAX_MAGIC_DEPTH:
            self.note(node, Effect("unknown", "nests magics too deeply to check"))
            return
        offset = self.line_offset + node.lineno + line_offset
        try:
            tree = ast.parse(_transform_lines(code))
        except (SyntaxError, ValueError) as exc:
            line = offset + (getattr(exc, "lineno", None) or 1)
            self.note(
                line - self.line_offset,
                Effect("unknown", f"cannot parse the code a magic runs: {_syntax_message(exc)}"),
            )
            return
        saved = self.line_offset
        self.line_offset, self.magic_depth = offset, self.magic_depth + 1
        try:
            for statement in tree.body:
                self.visit(statement)
        finally:
            self.line_offset, self.magic_depth = saved, self.magic_depth - 1


# --- method rules: each returns True when it judged the call ---------------------------------------

_MethodRule = Callable[[_Analysis, ast.Call, ast.Attribute], bool]


def _spark_chain_rule(analysis: _Analysis, node: ast.Call, func: ast.Attribute) -> bool:
    """``df.write.mode(...).parquet(p)`` starts a job that writes; ``spark.read.csv(p)`` reads."""
    chain = set(_attribute_chain(func.value))
    shown = _describe(func)
    if chain & {"write", "writeStream"} and func.attr in SPARK_WRITE_ACTIONS:
        analysis.note(node, Effect("compute", f"starts a Spark job ({shown})"))
        analysis.note(node, Effect("external", f"writes data outside the kernel ({shown})"))
    elif chain & {"write", "writeStream"} and func.attr in SPARK_CONFIGURE:
        pass
    elif chain & {"read", "readStream"} and func.attr == "jdbc":
        analysis.note(node, DATABASE, f"{DATABASE.text} ({shown})")
    elif chain & {"read", "readStream"} and func.attr in SPARK_READ_FORMATS:
        analysis.reader_call(node, shown)
    elif not (chain & {"read", "readStream"} and func.attr in SPARK_CONFIGURE):
        return False
    return True


def _sql_rule(analysis: _Analysis, node: ast.Call, func: ast.Attribute) -> bool:
    if func.attr in SQL_METHODS and (node.args or node.keywords):
        analysis.sql_call(node, _describe(func))
        return True
    if func.attr == "execute":
        analysis.note(node, Effect("compute", f"runs a query ({_describe(func)})"))
        return True
    return False


def _expression_rule(analysis: _Analysis, node: ast.Call, func: ast.Attribute) -> bool:
    if func.attr not in {"eval", "query"}:
        return False
    argument = _first_argument(node, {"expr"})
    text = analysis.string_value(argument) if argument is not None else None
    if text is None or _PLACEHOLDER in text:
        analysis.note(
            node, Effect("unknown", f"evaluates an expression it cannot read ({_describe(func)})")
        )
    elif func.attr == "query" and (_SQL_QUERY.match(text) or _SQL_STATEMENT.match(text)):
        analysis.sql_call(node, _describe(func))
    else:
        effect = expression_effect(text)
        analysis.note(node, effect, f"{effect.text} ({_describe(func)})")
    return True


def _open_rule(analysis: _Analysis, node: ast.Call, func: ast.Attribute) -> bool:
    if func.attr != "open":
        return False
    analysis.open_call(node, _describe(func), mode_index=0)
    return True


def _rename_rule(analysis: _Analysis, node: ast.Call, func: ast.Attribute) -> bool:
    """``p.rename("new")`` moves a file; ``df.rename(columns=...)`` and ``s.replace(a, b)`` do not."""
    if func.attr not in {"rename", "replace"}:
        return False
    if len(node.args) == 1 and not node.keywords and not isinstance(node.args[0], ast.Dict):
        analysis.note(node, Effect("unknown", f"may rename or replace a file ({_describe(func)})"))
    return True


def _path_writer_rule(analysis: _Analysis, node: ast.Call, func: ast.Attribute) -> bool:
    if func.attr not in OPTIONAL_PATH_WRITERS:
        return False
    if _first_argument(node, PATH_KEYWORDS) is not None:
        analysis.note(node, WRITES_FILES, f"{WRITES_FILES.text} ({_describe(func)})")
    return True


def _kind_rule(analysis: _Analysis, node: ast.Call, func: ast.Attribute) -> bool:
    """Methods on an object this code made, when what made it says more than the method name."""
    kind = analysis.kind_of(func.value)
    if kind is None:
        return False
    if kind in IN_MEMORY_KINDS:
        return True
    effect = _kind_effect(kind)
    family = kind.split(".")[0]
    if effect.risk != "read" and family != "pathlib":
        analysis.note(node, effect, f"{effect.text} ({_describe(func)}, from {_shown(kind)})")
        return True
    if func.attr in AMBIGUOUS_COMPUTE:
        if family in LAZY_FAMILIES:
            analysis.note(node, STARTS_SPARK if family == "pyspark" else STARTS_DASK, None)
        return True
    # str, list, dict... methods other than the mutating ones only read
    return kind == "builtins" and func.attr not in MUTATING_METHODS


def _table_rule(analysis: _Analysis, node: ast.Call, func: ast.Attribute) -> bool:
    attr, shown = func.attr, _describe(func)
    if attr in EXTERNAL_METHODS:
        effect = EXTERNAL_METHODS[attr]
        analysis.note(node, effect, f"{effect.text} ({shown})")
    elif attr in COMPUTE_METHODS:
        effect = COMPUTE_METHODS[attr]
        analysis.note(node, effect, f"{effect.text} ({shown})")
    elif attr in MUTATING_METHODS:
        analysis.mutate(func.value, node, f" ({shown})")
    elif attr not in READ_METHODS:
        return False
    return True


_METHOD_RULES: tuple[_MethodRule, ...] = (
    _spark_chain_rule,
    _sql_rule,
    _expression_rule,
    _open_rule,
    _rename_rule,
    _path_writer_rule,
    _kind_rule,
    _table_rule,
)


# --- special calls by qualified name --------------------------------------------------------------

_SpecialCall = Callable[[_Analysis, ast.Call, str], None]


def _call_open(analysis: _Analysis, node: ast.Call, shown: str) -> None:
    analysis.open_call(node, shown, mode_index=1)


def _call_getattr(analysis: _Analysis, node: ast.Call, shown: str) -> None:
    name = node.args[1] if len(node.args) >= 2 else None
    text = name.value if isinstance(name, ast.Constant) else None
    receiver = node.args[0] if node.args else None
    public = isinstance(text, str) and not text.startswith("_")
    if not public or receiver is None or analysis.module_path(receiver) is not None:
        analysis.note(node, BY_NAME, f"{BY_NAME.text} ({shown})")


def _call_print(analysis: _Analysis, node: ast.Call, shown: str) -> None:
    for keyword in node.keywords:
        if keyword.arg == "file" and analysis.module_path(keyword.value) not in {
            "sys.stdout",
            "sys.stderr",
        }:
            analysis.note(node, WRITES_FILES, f"{WRITES_FILES.text} (print to a file)")


def _call_pandas_eval(analysis: _Analysis, node: ast.Call, shown: str) -> None:
    argument = _first_argument(node, {"expr"})
    text = analysis.string_value(argument) if argument is not None else None
    if text is None or _PLACEHOLDER in text:
        analysis.note(node, Effect("unknown", f"evaluates an expression it cannot read ({shown})"))
    else:
        effect = expression_effect(text)
        analysis.note(node, effect, f"{effect.text} ({shown})")


def _call_len(analysis: _Analysis, node: ast.Call, shown: str) -> None:
    kind = analysis.kind_of(node.args[0]) if node.args else None
    if kind is not None and kind.split(".")[0] in LAZY_FAMILIES:
        analysis.note(
            node, Effect("compute", "computes every partition (len of a lazy collection)")
        )


def _call_numpy_load(analysis: _Analysis, node: ast.Call, shown: str) -> None:
    if any(k.arg == "allow_pickle" and not _is_false(k.value) for k in node.keywords):
        analysis.note(node, UNPICKLES, f"{UNPICKLES.text} ({shown})")


_SPECIAL_CALLS: dict[str, _SpecialCall] = {
    "builtins.open": _call_open,
    "io.open": _call_open,
    "builtins.getattr": _call_getattr,
    "builtins.print": _call_print,
    "builtins.len": _call_len,
    "pandas.eval": _call_pandas_eval,
    "numpy.load": _call_numpy_load,
}
_PATH_BUILDERS: frozenset[str] = _words(
    "pathlib.Path pathlib.PurePath os.path.join os.path.expanduser os.path.abspath"
)


# --- magic calls -----------------------------------------------------------------------------------

_UNREADABLE_MAGIC = {
    True: "runs a shell command it cannot read",
    False: "runs a magic it cannot read",
}
_MagicCall = Callable[[_Analysis, ast.Call, list[str]], None]


def _magic_line(analysis: _Analysis, node: ast.Call, texts: list[str]) -> None:
    analysis.line_magic(node, texts[0], texts[1] if len(texts) > 1 else "")


def _magic_cell(analysis: _Analysis, node: ast.Call, texts: list[str]) -> None:
    line, body = (texts + ["", ""])[1:3]
    analysis.cell_magic(node, texts[0], line, body)


def _magic_old(analysis: _Analysis, node: ast.Call, texts: list[str]) -> None:
    name, _, line = texts[0].lstrip("%").partition(" ")
    analysis.line_magic(node, name, line)


def _magic_shell(analysis: _Analysis, node: ast.Call, texts: list[str]) -> None:
    command = texts[0].split()
    program = command[0] if command else ""
    analysis.note(node, SHELL, f"runs the shell command `{program[:40]}`")


_MAGIC_CALLS: dict[str, _MagicCall] = {
    "run_line_magic": _magic_line,
    "run_cell_magic": _magic_cell,
    "magic": _magic_old,
    "system": _magic_shell,
    "getoutput": _magic_shell,
}

_LineMagicRule = Callable[[_Analysis, ast.Call, str, str], None]


def _magic_env(analysis: _Analysis, node: ast.Call, name: str, line: str) -> None:
    if "=" in line or len(line.split()) > 1:
        analysis.note(node, ENVIRONMENT, f"{ENVIRONMENT.text} (%{name})")


def _magic_deletes(analysis: _Analysis, node: ast.Call, name: str, line: str) -> None:
    if name == "xdel":
        for variable in line.split():
            analysis.changed.add(variable)
        analysis.note(
            node, Effect("destructive", f"deletes {line.strip() or 'a variable'} (%xdel)")
        )
        return
    analysis.unbounded = True
    analysis.note(node, Effect("destructive", f"deletes variables (%{name})"))


def _magic_history(analysis: _Analysis, node: ast.Call, name: str, line: str) -> None:
    if {"-f", "-o"} & set(line.split()) or "-f" in line:
        analysis.note(node, WRITES_FILES, f"{WRITES_FILES.text} (%history -f)")


def _magic_store(analysis: _Analysis, node: ast.Call, name: str, line: str) -> None:
    if "-r" in line.split():
        analysis.unbounded = True
        analysis.note(
            node, Effect("destructive", "restores stored variables over existing ones (%store -r)")
        )
    else:
        analysis.note(node, LINE_MAGICS["store"], f"{LINE_MAGICS['store'].text} (%store)")


def _magic_extension(analysis: _Analysis, node: ast.Call, name: str, line: str) -> None:
    if line.strip() in PURE_EXTENSIONS:
        return
    analysis.unbounded = True
    effect = LINE_MAGICS[name]
    analysis.note(node, effect, f"{effect.text} (%{name} {line.strip()[:40]})")


_LINE_MAGIC_RULES: dict[str, _LineMagicRule] = {
    "env": _magic_env,
    "reset": _magic_deletes,
    "reset_selective": _magic_deletes,
    "xdel": _magic_deletes,
    "history": _magic_history,
    "store": _magic_store,
    "load_ext": _magic_extension,
    "reload_ext": _magic_extension,
}


# --- helpers ---------------------------------------------------------------------------------------


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


def _kind_effect(kind: str) -> Effect:
    """What using an object does, from what made it (a socket stays a network connection)."""
    special = kind in _SPECIAL_CALLS or kind in SQL_FUNCTIONS or kind.startswith(URL_READERS)
    return READS if kind == "builtins" or special else _call_effect(kind)


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


def _describe(node: ast.expr, depth: int = 0) -> str:
    """A short name for an expression, without its literal values (they may be secrets)."""
    if depth > 6:
        return "…"
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_describe(node.value, depth + 1)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{_describe(node.func, depth + 1)}()"
    if isinstance(node, ast.Subscript):
        return f"{_describe(node.value, depth + 1)}[…]"
    return "a lambda" if isinstance(node, ast.Lambda) else "…"


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _attribute_chain(node: ast.expr) -> Iterator[str]:
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        if isinstance(node, ast.Attribute):
            yield node.attr
            node = node.value
        else:
            node = node.func if isinstance(node, ast.Call) else node.value


def _argument(node: ast.Call, index: int, keyword: str) -> ast.expr | None:
    for item in node.keywords:
        if item.arg == keyword:
            return item.value
    return node.args[index] if len(node.args) > index else None


def _first_argument(node: ast.Call, keywords: Container[str]) -> ast.expr | None:
    if node.args and not isinstance(node.args[0], ast.Starred):
        return node.args[0]
    return next((k.value for k in node.keywords if k.arg in keywords), None)


def _is_false(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value in (False, None, 0)


def _is_string_expr(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.BinOp):
        return _is_string_expr(node.left)
    return isinstance(node, ast.JoinedStr)


def _is_history_name(name: str) -> bool:
    """IPython's output history (``_``, ``__``, ``_3``, ``_i2``...): rebound after every cell."""
    return re.fullmatch(r"_{1,3}|_i{1,3}|_i?\d+|_oh|_ih|_dh|In|Out", name) is not None


def _callable_candidates(node: ast.expr) -> Iterator[ast.expr]:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        yield from node.elts
    elif isinstance(node, ast.Dict):
        yield from node.values
    else:
        yield node


def _comprehension_results(
    node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp,
) -> list[ast.expr]:
    return [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]


def _source_roots(node: ast.expr) -> set[str]:
    """The names whose objects an expression may hand out: ``d`` for ``d.items()`` or ``d["k"]``."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred, ast.Call)):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in _PASSING_BUILTINS:
                return set().union(*(_source_roots(a) for a in node.args))
            if not (isinstance(func, ast.Attribute) and func.attr in _HANDING_METHODS):
                return set()  # a fresh result
            node = func.value
        else:
            node = node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        return set().union(*(_source_roots(e) for e in node.elts))
    return {node.id} if isinstance(node, ast.Name) else set()


_HANDING_METHODS = frozenset({"items", "values", "get", "pop", "popitem", "setdefault", "iterrows"})
_PASSING_BUILTINS = frozenset(
    {"enumerate", "zip", "reversed", "sorted", "list", "tuple", "iter", "filter"}
)


def _target_names(node: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _parameters(args: ast.arguments) -> set[str]:
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None}


def _globals_of(body: list[ast.stmt]) -> set[str]:
    return {
        name for node in _walk_scope(body) if isinstance(node, ast.Global) for name in node.names
    }


def _local_names(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    declared = _globals_of(node.body)
    return (_parameters(node.args) | _bound_names(node.body)) - declared


def _bound_names(body: list[ast.stmt]) -> set[str]:
    """Names a block binds, not counting the bodies of the functions and classes it defines."""
    names: set[str] = set()
    for node in _walk_scope(body):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.Nonlocal):
            names.update(node.names)
    return names


def _walk_scope(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of a block's own scope: nested functions and classes yield only themselves."""
    pending: list[ast.AST] = list(body)
    while pending:
        node = pending.pop()
        if isinstance(node, _COMPREHENSIONS):
            yield from (n.target for n in ast.walk(node) if isinstance(n, ast.NamedExpr))
            continue
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            pending.extend(ast.iter_child_nodes(node))


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)
_LITERALS = (
    ast.Constant,
    ast.JoinedStr,
    ast.List,
    ast.Tuple,
    ast.Dict,
    ast.Set,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
)


def _split_options(line: str, with_value: frozenset[str]) -> tuple[list[str], str]:
    """Split a magic's leading ``-x`` options from the code that follows them."""
    options: list[str] = []
    position = 0
    tokens = list(re.finditer(r"\S+", line))
    index = 0
    while index < len(tokens) and tokens[index].group().startswith("-"):
        token = tokens[index].group()
        options.append(token[:2])
        index += 2 if token in with_value else 1
        position = tokens[index - 1].end() if index - 1 < len(tokens) else len(line)
    return options, line[position:]


def _transform_lines(code: str) -> str:
    """Turn ``!cmd`` and ``%magic`` lines of code given to a magic into the calls IPython makes."""
    lines = []
    for line in code.splitlines():
        stripped = line.lstrip()
        indent = line[: len(line) - len(stripped)]
        if stripped.startswith("!"):
            lines.append(f"{indent}get_ipython().system({stripped[1:]!r})")
        elif stripped.startswith("%") and not stripped.startswith("%%"):
            name, _, rest = stripped[1:].partition(" ")
            lines.append(f"{indent}get_ipython().run_line_magic({name!r}, {rest!r})")
        else:
            lines.append(line)
    return "\n".join(lines)


def _syntax_message(exc: Exception) -> str:
    return getattr(exc, "msg", None) or str(exc) or type(exc).__name__


# --- the entry point -------------------------------------------------------------------------------


def classify(source: str, existing: Container[str] = frozenset()) -> Assessment:
    """Classify code by what running it could do, without running it.

    Args:
        source: Python source as IPython runs it (magics and ``!`` already transformed).
        existing: the names in the user's namespace before the code runs.

    Returns:
        The class of the most severe finding (``read`` when there is none), every finding with its
        line, and the names the code may change (``None`` when no bound can be given).
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        text = f"does not parse: {_syntax_message(exc)}"
        return Assessment("unknown", (Reason(exc.lineno or 1, "unknown", text),), None)
    except (ValueError, RecursionError, MemoryError) as exc:
        text = f"does not parse: {_syntax_message(exc)}"
        return Assessment("unknown", (Reason(1, "unknown", text),), None)
    analysis = _Analysis(existing)
    try:
        for statement in tree.body:
            analysis.visit(statement)
    except RecursionError:
        analysis.note(1, Effect("unknown", "is nested too deeply to check"))
    return analysis.assessment()


# --- documentation ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """One row of the rules table: a class, what the code does, and the names the row covers."""

    risk: Risk
    what: str
    names: tuple[str, ...] = ()


def _grouped(table: dict[str, Effect], what: str, prefix: str = "") -> list[Rule]:
    groups: dict[Effect, list[str]] = {}
    for name, effect in table.items():
        groups.setdefault(effect, []).append(prefix + name)
    return [
        Rule(effect.risk, f"{what}: {effect.text}" if effect.text else what, tuple(sorted(names)))
        for effect, names in groups.items()
    ]


_SQL_OUTCOMES: tuple[tuple[Risk, str], ...] = (
    ("read", "that only queries (SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, VALUES)"),
    ("destructive", "with DROP, TRUNCATE or DELETE"),
    ("external", "that changes a database (INSERT, UPDATE, CREATE, ALTER, ...)"),
    ("unknown", "that it cannot read, or that is built from values"),
)


def _sql_rules() -> list[Rule]:
    takes_sql = tuple(sorted(SQL_FUNCTIONS | SQL_METHODS | {"query"}))
    return [Rule(risk, f"SQL text {what}, given to", takes_sql) for risk, what in _SQL_OUTCOMES]


def rules() -> tuple[Rule, ...]:
    """Every rule the classifier applies, from its tables, sorted by class."""
    table_rules = [
        *(Rule(risk, what) for risk, what in SYNTAX_RULES),
        *_grouped(MODULES, "allow-listed module (import is read); its functions by default"),
        *_grouped(FUNCTIONS, "module function or attribute"),
        Rule("write", "function that changes its first argument", tuple(sorted(ARGUMENT_MUTATORS))),
        Rule(
            "external",
            "reader given a URL (a literal local path is read, a path it cannot read unknown)",
            tuple(f"{p}*" if p.endswith("_") else p for p in URL_READERS),
        ),
        *_sql_rules(),
        *_grouped(
            {k: v for k, v in BUILTINS.items() if k not in _EXCEPTIONS.split()},
            "builtin (the exception classes are read too)",
        ),
        Rule("read", "method on an object of unknown type", tuple(sorted(READ_METHODS))),
        Rule("write", "method that changes its receiver", tuple(sorted(MUTATING_METHODS))),
        *_grouped(COMPUTE_METHODS, "method"),
        *_grouped(EXTERNAL_METHODS, "method"),
        Rule(
            "external",
            "writer given a path (without one it returns text: read)",
            tuple(sorted(OPTIONAL_PATH_WRITERS)),
        ),
        Rule(
            "unknown",
            "higher-order call given a callable it cannot check (first argument, `func=`, `key=`)",
            tuple(sorted(CALLABLE_FIRST | CALLABLE_KEY)),
        ),
        *_grouped(LINE_MAGICS, "line magic", "%"),
        *_grouped(CELL_MAGICS, "cell magic", "%%"),
        Rule(
            "read",
            "magic that runs code: the class of that code",
            tuple(f"%{m}" for m in CODE_MAGICS),
        ),
    ]
    return tuple(sorted(table_rules, key=lambda r: severity(r.risk)))


def rules_markdown() -> str:
    """The rules as one Markdown table (docs/approval.md holds a copy that a test compares)."""
    lines = ["| Class | What the code does | Names |", "| --- | --- | --- |"]
    for rule in rules():
        names = ", ".join(f"`{n}`" for n in rule.names)
        lines.append(f"| {rule.risk} | {rule.what.replace('|', '/')} | {names} |")
    return "\n".join(lines) + "\n"
