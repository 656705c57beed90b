"""The dependency arrows of the layout stay as designed."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_IN_DIALECT = {"pyarrow", "datafusion", "pyspark", "flight_storage", "compute_client",
                        "select_dialect_helpers"}


def _imported_modules(package: Path) -> set[str]:
    names: set[str] = set()
    for path in package.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return names


def test_select_dialect_imports_only_sqlglot_and_stdlib() -> None:
    imported = _imported_modules(ROOT / "select_dialect")
    assert "sqlglot" in imported
    assert not imported & FORBIDDEN_IN_DIALECT


def test_importing_compute_client_loads_no_server_modules() -> None:
    code = (
        "import sys, compute_client.flight, compute_client.datafusion_source, "
        "compute_client.pushdown, compute_client.spark_source, compute_client.spark_stream, "
        "compute_client.spark_filters, compute_client.pipeline, "
        "compute_client.aggregate_pushdown\n"
        "bad = sorted(m for m in sys.modules if m.startswith('select_dialect') or "
        "(m.startswith('flight_storage') and m not in "
        "('flight_storage', 'flight_storage._flight_sql_pb2') "
        "and m.split('.')[:2] != ['flight_storage', 'protocol']))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, check=True)
    assert result.stdout.strip() == ""


def test_lazy_dataset_imports_only_pyarrow_and_stdlib() -> None:
    """The Dataset shim both sides use sits below them both."""
    imported = _imported_modules(ROOT / "lazy_dataset")
    assert "pyarrow" in imported
    assert not imported & {"flight_storage", "compute_client", "select_dialect", "sqlglot",
                           "datafusion", "pyspark"}


def test_flight_storage_package_init_is_empty() -> None:
    assert (ROOT / "flight_storage" / "__init__.py").read_text().strip() == ""


# The server's stages, top (closest to the client) to bottom. A module may import its own
# stage and the stages below it, never one above: request -> translate -> plan -> read.
SERVER_STAGES = ("cli", "rpc", "request", "execution", "storage", "formats", "leaf")
_LEAF_MODULES = {"protocol", "_flight_sql_pb2", "errors", "cores", "telemetry", "bounded_cache"}
_TOP_MODULES = {"cli", "__main__", "__init__", "workers"}


def _stage_of(module: str) -> str | None:
    """The stage of ``flight_storage.<x>[.<y>]``, or None for modules outside the server."""
    parts = module.split(".")
    if parts[0] != "flight_storage" or len(parts) < 2:
        return None
    head = parts[1]
    if head in _TOP_MODULES:
        return "cli"
    if head in _LEAF_MODULES:
        return "leaf"
    assert head in SERVER_STAGES, f"flight_storage.{head} belongs to no stage"
    return head


def test_flight_storage_imports_point_only_downward() -> None:
    upward = []
    for path in sorted((ROOT / "flight_storage").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        own = _stage_of(module)
        if own is None:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                stage = _stage_of(target)
                if stage is not None and (
                    SERVER_STAGES.index(stage) < SERVER_STAGES.index(own)
                ):
                    upward.append(f"{module} imports {target} ({own} -> {stage})")
    assert upward == []


# Inside the RPC surface, top to bottom: the server dispatches to the action handlers and the
# metadata builders, which use the call context, limits and streams; auth and the error
# boundary are at the bottom. A module imports only modules after it in this order.
RPC_LAYERS = ("operations_http", "server", "query_service",
              "cancellations", "roles", "actions", "ingest", "metadata",
              "tables", "server_parts", "partition_streams", "prepared_parameters", "sessions",
              "column_metadata", "endpoints", "endpoint_readers", "config",
              "cache_status", "middleware", "streams", "access", "auth", "boundary")
"""``tables`` (the one table seam) and ``roles`` (a server's role: all of a cluster's and a
fleet's code, which the server and its query service ask and which uses the action handlers
and what is below them) are folders: their modules take their place in the order. ``s3_http``,
the second door, is not in it: it sits beside the server, over the query service."""
RPC_FOLDERS = ("tables", "roles")


def test_rpc_modules_import_only_downward() -> None:
    rpc = ROOT / "flight_storage" / "rpc"
    modules = {p.stem for p in rpc.glob("*.py")} - {"__init__"}
    assert modules | set(RPC_FOLDERS) == set(RPC_LAYERS), "place every rpc/ module in RPC_LAYERS"
    assert _upward_imports(rpc, "flight_storage.rpc", RPC_LAYERS) == []


# The table seam's modules, top to bottom: the registry and plan path over the kinds; the
# DataFusion kind resolves names as a bucket's table does; every kind implements the seam.
TABLES_LAYERS = ("kinds", "sql", "iceberg", "constant", "bucket", "seam")


def test_table_seam_modules_import_only_downward() -> None:
    tables = ROOT / "flight_storage" / "rpc" / "tables"
    modules = {p.stem for p in tables.glob("*.py")} - {"__init__"}
    assert modules == set(TABLES_LAYERS), "place every rpc/tables/ module in TABLES_LAYERS"
    assert _upward_imports(tables, "flight_storage.rpc.tables", TABLES_LAYERS) == []


# A server's role (issue 40), top to bottom: the S3 door's part of a holdings cluster; the
# Role protocol and its choice (``server_role``); the fleet's role, a holdings cluster's it
# narrows, a single server's; what a cluster routes (actions); ``cluster status``; the calls
# between nodes; the workers' merged ``/metrics``.
ROLES_LAYERS = ("door", "role", "fleet", "cluster", "local", "actions", "status", "peers",
                "fleet_metrics")


def test_role_modules_import_only_downward() -> None:
    roles = ROOT / "flight_storage" / "rpc" / "roles"
    modules = {p.stem for p in roles.glob("*.py")} - {"__init__"}
    assert modules == set(ROLES_LAYERS), "place every rpc/roles/ module in ROLES_LAYERS"
    assert _upward_imports(roles, "flight_storage.rpc.roles", ROLES_LAYERS) == []
    # the door's part is the one role module that knows the S3 door (its listing entries and
    # errors); the server's roles load no HTTP stack
    knows_door = sorted(name for name in ROLES_LAYERS
                        if any(t.startswith("flight_storage.rpc.s3_http")
                               for t in _first_party_imports(roles / f"{name}.py")))
    assert knows_door == ["door"]


def _cluster_code_outside_roles(root: Path) -> list[str]:
    """Where, under ``root`` (a checkout), cluster code lives outside ``rpc/roles/``: a class
    named ``*Role``, the header that marks a call between nodes, or a reader of the cluster
    file's holdings map (``storage/cluster.py``) other than the CLI, which loads it, and the
    configuration, which carries it to ``server_role``."""
    roles = root / "flight_storage" / "rpc" / "roles"
    carriers = {"flight_storage.cli", "flight_storage.rpc.config"}
    found = []
    for path in sorted((root / "flight_storage").rglob("*.py")):
        if path.is_relative_to(roles) or path == root / "flight_storage" / "storage" / "cluster.py":
            continue
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{module} defines {node.name}" for node in ast.walk(tree)
                  if isinstance(node, ast.ClassDef) and node.name.endswith("Role")]
        if any((isinstance(node, ast.Name) and node.id == "FORWARDED_HEADER")
               or (isinstance(node, ast.Constant) and node.value == "x-flight-select-forwarded")
               for node in ast.walk(tree)):
            found.append(f"{module} names the forwarded header")
        if module not in carriers and "flight_storage.storage.cluster" in _all_imports(path):
            found.append(f"{module} reads the cluster file")
    return found


def test_cluster_code_lives_in_the_roles_folder(tmp_path: Path) -> None:
    """Issue 40: a cluster's and a fleet's code is ``rpc/roles/``'s: the roles, the calls
    between nodes, the routed actions, the S3 door's part, ``cluster status`` and the workers'
    ``/metrics``; the rest of the server holds a ``Role`` and asks it."""
    assert _cluster_code_outside_roles(ROOT) == []
    # the check finds the layout before the folder: roles and peers beside the server
    rpc = tmp_path / "flight_storage" / "rpc"
    rpc.mkdir(parents=True)
    (rpc / "cluster.py").write_text("class LocalRole:\n    pass\n")
    (rpc / "peers.py").write_text("from flight_storage.storage.cluster import Holding\n"
                                  'FORWARDED_HEADER = "x-flight-select-forwarded"\n')
    assert _cluster_code_outside_roles(tmp_path) == [
        "flight_storage.rpc.cluster defines LocalRole",
        "flight_storage.rpc.peers names the forwarded header",
        "flight_storage.rpc.peers reads the cluster file"]
    # outside the folder, modules import its faces, never a particular role or the peers
    faces = {"role", "actions", "door", "status", "fleet_metrics"}
    inward = sorted(f"{module} imports {target}" for module, targets in _import_graph().items()
                    if not module.startswith("flight_storage.rpc.roles")
                    for target in targets if target.startswith("flight_storage.rpc.roles.")
                    and target.split(".")[3] not in faces)
    assert inward == []


# The DataFusion client's modules, top to bottom: registration and LIMIT pushdown use the
# dataset, which plans scans with the exactness rules, which read the filter back.
DATAFUSION_TABLE_LAYERS = ("limit", "catalog", "dataset", "exactness", "expressions")


def test_datafusion_table_modules_import_only_downward() -> None:
    package = ROOT / "compute_client" / "datafusion_table"
    modules = {p.stem for p in package.glob("*.py")} - {"__init__"}
    assert modules == set(DATAFUSION_TABLE_LAYERS), "place every module in the layers"
    assert _upward_imports(package, "compute_client.datafusion_table",
                           DATAFUSION_TABLE_LAYERS) == []


# The lowering's modules, top to bottom: the functions and dispatch tables build on the
# operators, which build on the core, which builds nodes of the kinds (issue #29 item 3).
LOWERING_LAYERS = ("lowering", "lowering_operators", "lowering_base", "timestamp_nodes",
                   "like_patterns", "sql_nodes", "kinds")


def test_lowering_modules_import_only_downward() -> None:
    assert _upward_imports(ROOT / "select_dialect", "select_dialect", LOWERING_LAYERS) == []


def _upward_imports(folder: Path, package: str, layers: Sequence[str]) -> list[str]:
    """Where a module of ``layers`` (top to bottom, files of ``folder``, the modules of
    ``package``; a layer may be a folder, all of whose modules take its place) imports one of
    its own layer or above it."""
    found = []
    for name in layers:
        files = (sorted((folder / name).glob("*.py")) if (folder / name).is_dir()
                 else [folder / f"{name}.py"])
        for target in {t for path in files for t in _first_party_imports(path)}:
            inner = target.removeprefix(f"{package}.").split(".")[0]
            own_folder = inner == name and (folder / name).is_dir()  # its own layers' test
            if (target.startswith(f"{package}.") and inner in layers and not own_folder
                    and layers.index(inner) <= layers.index(name)):
                found.append(f"{package}.{name} imports {package}.{inner}")
    return sorted(found)


_PACKAGES = ("flight_storage", "compute_client", "select_dialect", "lazy_dataset")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _first_party_imports(path: Path) -> set[str]:
    """Modules of ours ``path`` imports anywhere (also inside functions), except imports
    under ``if TYPE_CHECKING:``, which never run."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            submodules = {f"{node.module}.{a.name}" for a in node.names} & _MODULES
            names.update(submodules)
            if len(submodules) < len(node.names):  # some names are the module's own
                names.add(node.module)
    return {n for n in names if n.split(".")[0] in _PACKAGES}


_PATHS: dict[str, Path] = {
    _module_name(p): p for pkg in _PACKAGES for p in (ROOT / pkg).rglob("*.py")
}
_MODULES = frozenset(_PATHS)


def _import_graph() -> dict[str, set[str]]:
    return {
        module: {t for t in _first_party_imports(path) if t in _MODULES and t != module}
        for module, path in _PATHS.items()
    }


def test_no_import_cycles() -> None:
    graph = _import_graph()
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                cycles.append([*path[path.index(target):], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert cycles == []


# Every package's modules stay small (issue #29 item 5).
SMALL_MODULE_PACKAGES = ("flight_storage", "select_dialect", "compute_client", "benchmarks",
                         "data")
MAX_MODULE_LINES = 700


def test_no_module_is_over_700_lines() -> None:
    long = [f"{path.relative_to(ROOT)}: {count} lines"
            for package in SMALL_MODULE_PACKAGES
            for path in sorted((ROOT / package).rglob("*.py"))
            if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES]
    assert long == [], "split by job (STYLE.md, one job per file)"


def test_one_module_signs() -> None:
    """Issue 40: everything the server signs (tickets, handles, tokens, cookies, staged-ingest
    tokens) goes through ``flight_storage/protocol/signing.py``, the one place that computes an
    HMAC and rotates keys; the S3 door's SigV4 checks use botocore's signer."""
    owner = ROOT / "flight_storage" / "protocol" / "signing.py"
    signing = [str(path.relative_to(ROOT)) for path in (ROOT / "flight_storage").rglob("*.py")
               if "hmac.new(" in path.read_text() or "hmac.digest(" in path.read_text()]
    assert signing == [str(owner.relative_to(ROOT))]


def test_one_bounded_cache_type() -> None:
    """Issue 40: every LRU the server keeps is ``flight_storage/bounded_cache.py``'s (plans,
    per-version verdicts, footers, bound parameters, the object-store copy's and the decoded
    cache's indexes), not an ``OrderedDict`` evicted by hand."""
    owner = ROOT / "flight_storage" / "bounded_cache.py"
    hand_rolled = [str(path.relative_to(ROOT)) for path in (ROOT / "flight_storage").rglob("*.py")
                   if "OrderedDict" in path.read_text() or "popitem(last=False)" in path.read_text()]
    assert hand_rolled == [str(owner.relative_to(ROOT))]


def test_the_s3_door_calls_the_query_service_not_a_flight_client() -> None:
    """Issue 40: the S3 door plans and reads a SelectObjectContent request through the
    server's query service in process (``rpc/query_service.py``): no module of the door
    imports ``pyarrow.flight`` (a cluster's remote endpoints are read by the query service,
    over the peers' calls), and the door's Select imports the service."""
    door = ROOT / "flight_storage" / "rpc" / "s3_http"
    flight_clients = sorted(
        path.name for path in door.glob("*.py")
        if {"pyarrow.flight"} & {name for name in _all_imports(path)})
    assert flight_clients == []
    assert "flight_storage.rpc.query_service" in _first_party_imports(door / "select_stream.py")
    assert "flight_storage.rpc.s3_http.select_stream" in _first_party_imports(
        door / "object_calls.py")


def _all_imports(path: Path) -> set[str]:
    """Every module ``path`` imports (``from pyarrow import flight`` is ``pyarrow.flight``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_one_access_policy() -> None:
    """Issue 40: who may read or write a bucket is decided in ``rpc/access.py`` alone; every
    check of both doors asks it (the users file's grants are read nowhere else)."""
    owner = ROOT / "flight_storage" / "rpc" / "access.py"
    # a user's grants read (not the catalog's ``buckets()``), or a decision not the policy's
    deciding = re.compile(r"\.(write_)?buckets\b(?!\()|(?<!access)\.may_(read|write)\(")
    found = sorted(
        str(path.relative_to(ROOT)) for path in (ROOT / "flight_storage").rglob("*.py")
        if path not in (owner, owner.with_name("auth.py"))
        and deciding.search(path.read_text(encoding="utf-8")))
    assert found == []


# Issue 40: a kind (of ticket, of partition, of Flight SQL command) is decoded once, into a
# type, by its decoder in flight_storage/protocol/; everyone else dispatches on the type.
_KIND_DECODERS = ("flight_storage/protocol/tickets.py",)
_COMMAND_DECODERS = ("flight_storage/protocol/",)
_KIND_READS = {"kind", "request"}  # where a kind string was read from before the types
_WIRE_TAGS = {"KIND", "REQUEST"}  # the types' wire tags: only the decoders compare them
_KIND_COMPARISONS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)


def _literal_strings(node: ast.expr) -> set[str]:
    """The string constants ``node`` is, or holds as a tuple, list or set display (also
    wrapped in ``frozenset(...)``, ``set(...)`` or ``tuple(...)``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args \
            and node.func.id in ("frozenset", "set", "tuple"):
        return _literal_strings(node.args[0])
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return {s for element in node.elts for s in _literal_strings(element)}
    return set()


def _reads(node: ast.expr, names: set[str]) -> bool:
    """``node`` reads an attribute of one of ``names`` (``p.kind``, ``[p.kind for ...]``) or
    a key of one (``d["kind"]``)."""
    return any((isinstance(n, ast.Attribute) and n.attr in names)
               or (isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant)
                   and n.slice.value in names)
               for n in ast.walk(node))


def _kinds_compared_as_strings(source: str, kinds: set[str], commands: set[str]) -> list[str]:
    """Comparisons that test a kind as a string: a kind literal against a ``kind`` or
    ``request`` read, a wire tag (``KIND``, ``REQUEST``) against anything, or (``commands``)
    a Flight SQL message name against anything."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Compare)
                and any(isinstance(op, _KIND_COMPARISONS) for op in node.ops)):
            continue
        operands = [node.left, *node.comparators]
        literals = {s for operand in operands for s in _literal_strings(operand)}
        if ((literals & kinds and any(_reads(o, _KIND_READS) for o in operands))
                or any(_reads(o, _WIRE_TAGS) for o in operands) or literals & commands):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def _kind_names() -> tuple[set[str], set[str]]:
    from flight_storage import _flight_sql_pb2 as pb
    from flight_storage.protocol import PARTITION_KINDS, REQUEST_KINDS

    return {*PARTITION_KINDS, *REQUEST_KINDS}, set(pb.DESCRIPTOR.message_types_by_name)


def test_the_kind_check_finds_string_dispatch() -> None:
    kinds, commands = _kind_names()
    caught = [
        'if ticket.request == "statement": pass',
        'x = partition.kind != "byte_range"',
        'x = [p.kind for p in chosen] == ["object"]',
        'x = p.kind in ("objects", "files")',
        'x = p.to_dict()["kind"] in frozenset({"row_groups"})',
        "x = type(t).REQUEST == SQL_REQUEST",
        "x = partition.KIND in wanted",
        'x = name == "TicketStatementQuery"',
        'x = name not in ("CommandStatementIngest", "CommandPreparedStatementQuery")',
    ]
    assert [line for line in caught if not _kinds_compared_as_strings(line, kinds, commands)] \
        == []
    # Other kinds that share a word stay free: an Iceberg catalog's, a JSON path step's.
    free = ['x = match.group("kind") == "sql"', 'x = step == "object"',
            'x = isinstance(p, ByteRange)', 'x = name in METADATA_COMMANDS']
    assert [line for line in free if _kinds_compared_as_strings(line, kinds, commands)] == []


def test_no_kind_is_compared_as_a_string_outside_its_decoder() -> None:
    """Tickets and partitions are tagged unions decoded in ``protocol/tickets.py`` (DoGet
    dispatches on the ticket's type through one table), Flight SQL commands are decoded into
    their message types in ``protocol/messages.py``: nobody else tests which kind they hold by
    its string."""
    kinds, commands = _kind_names()
    found = []
    for package in ("flight_storage", "compute_client"):
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = str(path.relative_to(ROOT))
            source = path.read_text(encoding="utf-8")
            own_kinds = set() if relative in _KIND_DECODERS else kinds
            own_commands = set() if relative.startswith(_COMMAND_DECODERS) else commands
            found += [f"{relative}:{hit}"
                      for hit in _kinds_compared_as_strings(source, own_kinds, own_commands)]
    assert found == []


def test_every_ticket_type_has_one_do_get_handler() -> None:
    """DoGet's table has a handler for each type the decoder makes, and for no other."""
    import typing

    from flight_storage.protocol import REQUEST_KINDS, PartitionTicket
    from flight_storage.rpc.server import StorageServer

    types = set(typing.get_args(PartitionTicket))
    assert set(StorageServer._DO_GET) == types
    assert sorted(t.REQUEST for t in types) == sorted(REQUEST_KINDS)


def _flavour_defaults(source: str, flavours: set[str]) -> list[str]:
    """Places that set a default flavour: a parameter's or a field's default, a module
    constant, or an ``or`` fallback that is a flavour's name (or its constant)."""
    tree = ast.parse(source)
    defaults: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            defaults += [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]
        elif isinstance(node, ast.ClassDef | ast.Module):
            defaults += [s.value for s in node.body
                         if isinstance(s, ast.Assign | ast.AnnAssign) and s.value is not None]
        elif isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            defaults += node.values[1:]
    constants = {name.upper() for name in flavours}
    return [f"{d.lineno}: {ast.unparse(d)}" for d in defaults
            if (isinstance(d, ast.Constant) and d.value in flavours)
            or (isinstance(d, ast.Name) and d.id in constants)]


def test_flavour_defaults_have_one_owner() -> None:
    """Issue 40: every surface's default flavour is a named constant of
    ``select_dialect/flavors.py`` (``STATEMENT_DEFAULT``, ``S3_REQUEST_DEFAULT``,
    ``S3_API_DEFAULT``); a default spelled elsewhere is a second owner that drifts."""
    from select_dialect.flavors import FLAVOR_NAMES

    flavours = set(FLAVOR_NAMES)
    assert _flavour_defaults('def f(flavor: str = CEPH): pass', flavours)
    assert _flavour_defaults('x = call.flavor or "standard"', flavours)
    owner = ROOT / "select_dialect" / "flavors.py"
    found = [f"{path.relative_to(ROOT)}:{hit}"
             for package in ("flight_storage", "compute_client", "select_dialect")
             for path in sorted((ROOT / package).rglob("*.py")) if path != owner
             for hit in _flavour_defaults(path.read_text(encoding="utf-8"), flavours)]
    assert found == []


def _uses(name: str) -> list[str]:
    """``module:line`` of every call of a function ``name`` (or attribute read of it) in
    ``flight_storage``, definitions left out."""
    found = []
    for path in sorted((ROOT / "flight_storage").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if ((isinstance(node, ast.Name) and node.id == name)
                    or (isinstance(node, ast.Attribute) and node.attr == name)):
                found.append(f"{_module_name(path)}:{node.lineno}")
    return found


def test_which_kind_of_table_is_decided_in_one_place() -> None:
    """Issue 40 item 2: whether a statement reads a bucket's table, an Iceberg table or none
    is ``request/table_kinds.statement_table``'s, called by the server's ``table_of`` alone;
    every other module asks ``table_of`` and gets a typed table (``named_table``, its rule for
    one name, also decides each table of a statement DataFusion plans). Splitting a statement's name
    off and reading ``TableReference.is_iceberg`` are the decider's; the one other splitter is
    a cluster's routing by the names written (``rpc/roles/actions.statement_target``)."""
    calls = [u.split(":")[0] for u in _uses("statement_table")]
    assert calls == ["flight_storage.rpc.server"]
    # each name of a statement DataFusion plans over several tables, by the same rule
    assert {u.split(":")[0] for u in _uses("named_table")} == {
        "flight_storage.request.table_kinds", "flight_storage.rpc.tables.sql"}
    assert [u.split(":")[0] for u in _uses("is_iceberg")] == [
        "flight_storage.request.table_kinds"]
    splitters = {u.split(":")[0] for u in _uses("split_table_reference")}
    assert splitters == {"flight_storage.request.table_kinds",
                         "flight_storage.rpc.roles.actions"}
    assert _uses("iceberg_reference") == []


def test_the_server_asks_its_role_not_whether_it_is_clustered() -> None:
    """Issue 40: a single server, a holdings cluster's node and a fleet's node are roles
    (``rpc/roles/``: ``LocalRole``, ``ClusterRole``, ``FleetRole``, chosen once by
    ``role.server_role``); the server, the query service and the S3 door call the role (the
    door its part of it, ``rpc/roles/door.py``) and never ask whether they are in a cluster."""
    asks = re.compile(r"(\bcluster|\.role)\s+is\s+(not\s+)?None\b"
                      r"|isinstance\([^)]*(Fleet|Cluster|Local)Role")
    rpc = ROOT / "flight_storage" / "rpc"
    found = [f"{path.name}:{number}: {line.strip()}"
             for path in (rpc / "server.py", rpc / "query_service.py",
                          *sorted((rpc / "s3_http").glob("*.py")))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if asks.search(line)]
    assert found == []
    assert asks.search("        if self.cluster is not None:")  # the check finds the branch
    assert asks.search("        return None if self.role is None else self.role.me")


def test_every_kind_of_table_is_behind_the_one_seam() -> None:
    """Issue 40 item 2: every kind of table a statement reads answers the seam's four
    questions (plan, check, schema, list, tickets, open); the server plans every statement through
    ``kinds.plan_statement`` and serves every statement ticket through its kind's ``open``, so
    no module outside ``rpc/tables/`` asks which kind a table is."""
    import typing

    from flight_storage.protocol import PartitionTicket, SelectObjectTicket
    from flight_storage.request.table_kinds import StatementTable
    from flight_storage.rpc.server import StorageServer
    from flight_storage.rpc.tables.kinds import KIND_OF_TABLE, KIND_OF_TICKET

    assert set(KIND_OF_TABLE) == set(typing.get_args(StatementTable))
    for kind in KIND_OF_TABLE.values():
        assert all(callable(getattr(kind, name, None))
                   for name in ("plan", "check", "schema", "listed", "flight_info", "open")), kind
    assert set(KIND_OF_TICKET) | {SelectObjectTicket} == set(typing.get_args(PartitionTicket))
    assert all(StorageServer._DO_GET[ticket] == kind.open
               for ticket, kind in KIND_OF_TICKET.items())
    kinds_named = re.compile(r"isinstance\([^)]*\b(BucketTable|IcebergTable|ConstantTable)\b")
    outside = [f"{path.relative_to(ROOT)}:{number}"
               for path in sorted((ROOT / "flight_storage").rglob("*.py"))
               if "tables" not in path.relative_to(ROOT / "flight_storage").parts[1:2]
               for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
               if kinds_named.search(line)]
    assert outside == []
    assert kinds_named.search("        if isinstance(table, IcebergTable):")
