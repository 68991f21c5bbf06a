"""The rules as data: the effects, and which modules, functions, builtins, methods and magics have
which. Each table maps a name to an :class:`~.assessment.Effect`, or lists the names one rule applies
to (methods that only read, that change their receiver, that take SQL, that call a callable given to
them...). The walk consults them and :mod:`.docs` renders them as the rules table of
docs/approval.md; a new rule is usually a new name in one of them."""

from __future__ import annotations

import builtins

from .assessment import Effect

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
