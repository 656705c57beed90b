"""Run the shared S3 Select conformance corpus through an engine and judge every case.

The corpus (``../shared/conformance/*.jsonl`` next to the project, see its README) holds cases
transcribed from Ceph, MinIO, moto, py-partiql-parser and the AWS docs. Each case has a
``kind`` saying how it is judged; each upstream harness compared output in its own way, and
the case's ``notes`` say how. This module turns that into tables:

* ``KIND_CHECKS``: kind -> checker. A checker runs what it needs through :class:`RunContext`
  and raises :class:`CaseFailure` (mismatch) or :class:`SkipCase` (cannot be judged here).
* ``HARNESS_RULES`` / ``HARNESSES``: which upstream harness a case came from, and how that
  harness normalised the engine output (Ceph single-row cut, s3-tests XML filter and character
  stripping, MinIO ``TrimSpace``, Ceph's unordered ``select *`` debug lines, ...).
* ``ORACLES``, ``PROPERTY_CHECKS``, ``EQUIVALENT_TRANSFORMS``, ``MATCH_MODES``: the per-case
  rules of the ``oracle``, ``property``, ``equivalence`` and ``values`` kinds.

What a case does not let the runner judge is a :class:`SkipCase` with its reason, never a
crash: an object that does not exist (a format but no bytes), a generator spec that
``generators.py`` cannot materialize, an oracle over input that is not CSV, a kind, match mode
or transform without a checker. Fields the runner does not know are ignored. An ``expected``
that is not text (``3`` over JSON output ``{"_1":3}``) is the value of a one-value result
(:func:`check_value`); numeric readers see JSON output as its values (:func:`plain_rows`).

The engine is any callable with the signature of
``flight_storage.execution.select_local.run_select``; :func:`load_engine` imports that one
lazily so an absent or unfinished engine shows up as failing cases, not as an import error.
"""

from __future__ import annotations

import base64
import bz2
import csv
import gzip
import importlib
import importlib.util
import io
import json
import math
import operator
import os
import random
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

PASSED = "passed"
FAILED = "failed"
SKIPPED = "skipped"
XFAIL = "xfail"
STATUSES = (PASSED, FAILED, SKIPPED, XFAIL)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE_DIR = Path(__file__).resolve().parent
DEFAULT_SKIPS = CONFORMANCE_DIR / "skips.json"
DEFAULT_KNOWN_FAILURES = CONFORMANCE_DIR / "known_failures.json"
CORPUS_DIR_ENV = "FLIGHT_SELECT_CORPUS_DIR"
KNOWN_FAILURE_PREFIX = "not yet conformant: "
FROM_CASE: Any = object()  # sentinel: use the case's own OutputSerialization

# Go's strings.TrimSpace removes Unicode white space (unicode.IsSpace).
_GO_SPACE = " \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008" \
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


# ---------------------------------------------------------------------------------- model
@dataclass(frozen=True)
class Case:
    """One corpus line.

    Attributes:
        id: the case id (unique within its file).
        kind: how the case is judged (``constant``, ``equivalence``, ...).
        file: the corpus file stem it came from (``minio``, ``ceph_s3tests``, ...).
        raw: the decoded JSON object.
    """

    id: str
    kind: str
    file: str
    raw: Mapping[str, Any]

    def get(self, key: str, default: Any = None) -> Any:
        """The raw field ``key`` (``default`` when absent or null)."""
        value = self.raw.get(key)
        return default if value is None else value

    @property
    def notes(self) -> str:
        """The case's ``notes`` text ('' when absent)."""
        return str(self.get("notes", ""))

    @property
    def test_name(self) -> str:
        """The upstream test name: the id without its source prefix, ordinal and ``@line``."""
        middle = self.id.split(":", 1)[1] if ":" in self.id else self.id
        middle = middle.rsplit(":", 1)[0] if ":" in middle else middle
        return middle.split("@line", 1)[0]

    @property
    def default_flavor(self) -> str:
        """``ceph`` for Ceph sources (file name or id prefix ``ceph_``), ``minio`` for
        MinIO's, ``aws`` otherwise. MinIO reads, types and prints by AWS's rules but accepts
        AWS's reserved keywords as unquoted names (``value``, ``time``, ``first``), where AWS
        answers a parse error: the ``minio`` flavour record says so."""
        if self.file.startswith("ceph") or self.id.startswith("ceph"):
            return "ceph"
        if self.file.startswith("minio") or self.id.startswith("minio"):
            return "minio"
        return "aws"


@dataclass
class Outcome:
    """The verdict on one case."""

    case_id: str
    status: str
    detail: str = ""
    query: str | None = None
    expected: str | None = None
    got: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON-able form written by ``run.py --json``."""
        return {"id": self.case_id, "status": self.status, "detail": self.detail}


class CaseFailure(Exception):
    """The engine's answer does not satisfy the case."""

    def __init__(self, detail: str, *, expected: Any = None, got: Any = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.expected = None if expected is None else _show(expected)
        self.got = None if got is None else _show(got)


class SkipCase(Exception):
    """The case cannot be judged here (outside an S3 Select engine, missing blob, ...)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class EngineUnavailable(Exception):
    """The engine entry point could not be imported."""


class Engine(Protocol):
    """The signature of ``flight_storage.execution.select_local.run_select``."""

    def __call__(
        self,
        data: bytes,
        expression: str,
        *,
        input_serialization: Mapping[str, Any] | None,
        output_serialization: Mapping[str, Any] | None,
        flavor: str,
        scan_range: tuple[int, int] | None = None,
    ) -> Any: ...


@dataclass(frozen=True)
class EngineResult:
    """What a checker sees of one engine call."""

    records: bytes
    stats: Mapping[str, int]

    @property
    def text(self) -> str:
        """The records decoded as UTF-8 (invalid bytes shown as escapes)."""
        return self.records.decode("utf-8", errors="backslashreplace")


def load_engine() -> Engine:
    """The project's engine, imported on first call.

    Returns:
        ``flight_storage.execution.select_local.run_select``, or a callable that raises
        :class:`EngineUnavailable` (so every case fails with the import error as detail).
    """
    try:
        module = importlib.import_module("flight_storage.execution.select_local")
        return module.run_select  # type: ignore[no-any-return]
    except Exception as exc:  # an unfinished engine may fail in any way while importing
        detail = f"{type(exc).__name__}: {exc}"

        def unavailable(data: bytes, expression: str, **_: Any) -> Any:
            raise EngineUnavailable(detail)

        return unavailable


def is_s3_error(exc: BaseException) -> bool:
    """True for the engine's user-facing errors (they carry ``code`` and ``message``)."""
    return isinstance(getattr(exc, "code", None), str) and hasattr(exc, "message")


def error_text(exc: BaseException) -> str:
    """``code: message`` of an engine error, as a client would see it."""
    return f"{getattr(exc, 'code', type(exc).__name__)}: {getattr(exc, 'message', exc)}"


_SYNTAX_CODE_PREFIXES = ("Parse", "Lexer", "UnsupportedSyntax")


def is_syntax_error(exc: BaseException) -> bool:
    """True when the engine rejected the statement's text (parse, lexer or syntax error)."""
    if any(cls.__name__ == "QuerySyntaxError" for cls in type(exc).__mro__):
        return True
    return str(getattr(exc, "code", "")).startswith(_SYNTAX_CODE_PREFIXES)


# --------------------------------------------------------------------------------- loading
def default_corpus_dir() -> Path:
    """``$FLIGHT_SELECT_CORPUS_DIR`` or ``../shared/conformance`` beside the project root."""
    env = os.environ.get(CORPUS_DIR_ENV)
    return Path(env) if env else PROJECT_ROOT.parent / "shared" / "conformance"


def corpus_files(corpus_dir: Path) -> list[Path]:
    """Every ``*.jsonl`` file of the corpus directory, sorted."""
    return sorted(corpus_dir.glob("*.jsonl"))


def load_cases(paths: Iterable[Path]) -> list[Case]:
    """Read every case of every corpus file, in file order.

    Fields the runner does not know are kept in ``Case.raw`` and do not stop a case from
    being judged on the fields it does know.

    Raises:
        ValueError: a line is not JSON, not an object with a string ``id`` and ``kind``, or an
            id repeats (the file is not in the corpus format: no case can be reported for it).
    """
    cases: list[Case] = []
    for path in paths:
        seen: set[str] = set()
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    raw = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{number}: not JSON: {exc}") from exc
                if not (
                    isinstance(raw, dict)
                    and isinstance(raw.get("id"), str)
                    and isinstance(raw.get("kind"), str)
                ):
                    raise ValueError(f"{path}:{number}: not a corpus case (string id and kind)")
                if raw["id"] in seen:
                    raise ValueError(f"{path}:{number}: duplicate id {raw['id']!r}")
                seen.add(raw["id"])
                cases.append(Case(raw["id"], raw["kind"], path.stem, raw))
    return cases


@dataclass(frozen=True)
class SkipRules:
    """``skips.json``: skip rules (by kind / field) and skipped case ids, each with a reason."""

    rules: tuple[Mapping[str, Any], ...] = ()
    cases: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> SkipRules:
        """Read a skips file (missing file = no skips)."""
        if not path.exists():
            return cls()
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(tuple(data.get("rules", ())), dict(data.get("cases", {})))

    def reason(self, case: Case) -> str | None:
        """Why ``case`` is skipped, or None when it runs."""
        if case.id in self.cases:
            return self.cases[case.id]
        for rule in self.rules:
            if all(_RULE_TESTS[key](case, value) for key, value in rule["when"].items()):
                return f"{rule['name']}: {rule['reason']}"
        return None


_RULE_TESTS: dict[str, Callable[[Case, Any], bool]] = {
    "kind": lambda case, kinds: case.kind in kinds,
    "has_field": lambda case, name: case.raw.get(name) is not None,
    "field_true": lambda case, name: case.raw.get(name) is True,
    "id_prefix": lambda case, prefix: case.id.startswith(prefix),
    "id_regex": lambda case, pattern: re.search(pattern, case.id) is not None,
    "file": lambda case, stem: case.file == stem,
}


def load_known_failures(path: Path) -> dict[str, str]:
    """``known_failures.json``: case id -> reason (missing file = none)."""
    if not path.exists():
        return {}
    return dict(json.loads(path.read_text(encoding="utf-8")))


def known_failure_reason(detail: str) -> str:
    """The reason recorded by ``--write-known-failures`` for a failing case."""
    return KNOWN_FAILURE_PREFIX + " ".join(detail.split())[:200]


# ----------------------------------------------------------------------------- run context
class InputCache:
    """Materialized inputs, keyed by what determines them (shared by cases with equal specs)."""

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}

    def get(self, key: str, build: Callable[[], bytes]) -> bytes:
        """The cached bytes for ``key``, built once."""
        if key not in self._data:
            self._data[key] = build()
        return self._data[key]


@dataclass
class RunContext:
    """Everything a checker needs: the engine, the corpus directory, seed and options."""

    engine: Engine
    corpus_dir: Path
    seed: int = 1
    flavor: str | None = None
    nanosecond_build: bool = False
    blob_dirs: tuple[Path, ...] = ()
    inputs: InputCache = field(default_factory=InputCache)
    _generators: ModuleType | None = None

    @property
    def generators(self) -> ModuleType:
        """The corpus's ``generators.py``, imported by path on first use."""
        if self._generators is None:
            path = self.corpus_dir / "generators.py"
            if not path.is_file():
                raise SkipCase(f"runner: {path} not found: generated inputs cannot be built")
            spec = importlib.util.spec_from_file_location("conformance_generators", path)
            if spec is None or spec.loader is None:
                raise SkipCase(f"runner: cannot import {path}")
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except Exception as exc:  # the corpus's code, not ours: any failure is possible
                raise SkipCase(
                    f"runner: {path} fails to import: {type(exc).__name__}: {exc}"
                ) from exc
            self._generators = module
        return self._generators

    def flavor_of(self, case: Case) -> str:
        """The dialect flavour to run ``case`` with (``--flavor`` wins)."""
        return self.flavor or case.default_flavor

    def execute(
        self,
        case: Case,
        query: str,
        data: bytes,
        *,
        input_serialization: Mapping[str, Any] | None,
        output_serialization: Mapping[str, Any] | None,
        scan_range: tuple[int, int] | None = None,
    ) -> EngineResult:
        """Run one statement. Engine errors (``code``/``message``) propagate unchanged.

        Raises:
            CaseFailure: the engine is unavailable or crashed with a non-S3 exception.
        """
        try:
            result = self.engine(
                data,
                query,
                input_serialization=input_serialization,
                output_serialization=output_serialization,
                flavor=self.flavor_of(case),
                scan_range=scan_range,
            )
        except EngineUnavailable as exc:
            raise CaseFailure(f"engine unavailable: {exc}") from exc
        except Exception as exc:
            if is_s3_error(exc):
                raise
            raise CaseFailure(f"engine crashed: {type(exc).__name__}: {exc}") from exc
        return EngineResult(bytes(result.records), dict(getattr(result, "stats", {}) or {}))

    def run_main(
        self,
        case: Case,
        query: str | None = None,
        *,
        output_serialization: Any = FROM_CASE,
    ) -> EngineResult:
        """Run ``query`` (default: the case's) over the case's input and serializations.

        ``output_serialization`` replaces the case's own when given (None = engine default).
        """
        data = case_input(case, self)
        out = (
            case.raw.get("output_serialization")
            if output_serialization is FROM_CASE
            else output_serialization
        )
        return self.execute(
            case,
            case.raw["query"] if query is None else query,
            data,
            input_serialization=input_serialization_of(case),
            output_serialization=out,
            scan_range=scan_range_of(case, len(data)),
        )

    def run_plain(self, case: Case, query: str | None = None) -> str:
        """:meth:`run_main`'s records as :func:`plain_rows` (JSON output reduced to values)."""
        return plain_rows(case, self.run_main(case, query).text)

    def run_equivalent(self, case: Case) -> EngineResult:
        """Run ``equivalent_query`` over ``equivalent_input`` (or the case's input)."""
        data = (
            str(case.raw["equivalent_input"]).encode("utf-8")
            if case.raw.get("equivalent_input") is not None
            else case_input(case, self)
        )
        return self.execute(
            case,
            case.raw["equivalent_query"],
            data,
            input_serialization=case.get("equivalent_input_serialization")
            or input_serialization_of(case),
            output_serialization=case.raw.get("output_serialization"),
            scan_range=scan_range_of(case, len(data)),
        )


_EMPTY_JSON_INPUT: Mapping[str, Any] = {"JSON": {"Type": "LINES"}}


def input_serialization_of(case: Case) -> Mapping[str, Any] | None:
    """The case's InputSerialization; statement-only cases run over empty JSON LINES."""
    if case.raw.get("input_serialization") is None and case.raw.get("format") is None:
        return _EMPTY_JSON_INPUT
    return case.raw.get("input_serialization")  # type: ignore[no-any-return]


def scan_range_of(case: Case, size: int) -> tuple[int, int] | None:
    """The case's AWS ``ScanRange`` as ``run_select``'s inclusive ``(start, end)``.

    AWS semantics: ``Start`` alone reads to the end, ``End`` alone means the last ``End``
    bytes. An empty ScanRange cannot be expressed as a tuple (see skips.json).
    """
    spec = case.raw.get("scan_range")
    if spec is None:
        return None
    start, end = spec.get("Start"), spec.get("End")
    if start is None and end is None:
        raise SkipCase("runner: an empty ScanRange cannot be passed to run_select")
    if start is None:
        return max(size - int(end), 0), size - 1
    return int(start), size - 1 if end is None else int(end)


# ----------------------------------------------------------------------------------- inputs
_COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "NONE": lambda data: data,
    "GZIP": lambda data: gzip.compress(data, mtime=0),
    "BZIP2": bz2.compress,
}


def case_input(case: Case, ctx: RunContext) -> bytes:
    """The object bytes of ``case`` (literal, base64, generated or blob), compressed as asked.

    A statement-only case (no format, no InputSerialization, no object) reads an empty object.

    Raises:
        SkipCase: the object does not exist, a repository blob is not available locally, or a
            generator spec cannot be materialized.
    """
    key = json.dumps(
        [case.raw.get(k) for k in ("input", "input_base64", "generator", "input_file",
                                   "input_compression")] + [ctx.seed],
        sort_keys=True,
    )
    return ctx.inputs.get(key, lambda: _compress(case, _raw_input(case, ctx)))


def _compress(case: Case, data: bytes) -> bytes:
    name = str(case.get("input_compression", "NONE")).upper()
    if name not in _COMPRESSORS:
        raise SkipCase(f"runner: unknown input_compression {name!r}")
    return _COMPRESSORS[name](data)


MISSING_OBJECT = (
    "the case's object does not exist (it has a format or InputSerialization but no input, "
    "input_base64, generator or input_file): the engine reads an object's bytes, so a missing "
    "object is answered by the storage layer (NoSuchKey) before any engine runs"
)


def describes_object(case: Case) -> bool:
    """True when the case names an object to read (a format or an InputSerialization)."""
    return case.raw.get("format") is not None or case.raw.get("input_serialization") is not None


def _raw_input(case: Case, ctx: RunContext) -> bytes:
    if case.raw.get("input") is not None:
        if not isinstance(case.raw["input"], str):
            raise SkipCase(
                f"runner: input is a JSON {type(case.raw['input']).__name__}, not the object's "
                "text: its bytes (spacing, key order) are not determined"
            )
        return case.raw["input"].encode("utf-8")
    if case.raw.get("input_base64") is not None:
        return base64.b64decode(case.raw["input_base64"])
    if case.raw.get("generator") is not None:
        return _generated_input(case.raw["generator"], ctx)
    if case.raw.get("input_file") is not None:
        return _blob_input(case.raw["input_file"], ctx)
    if describes_object(case):
        raise SkipCase(MISSING_OBJECT)
    return b""


def _generated_input(spec: Any, ctx: RunContext) -> bytes:
    if not isinstance(spec, Mapping):
        raise SkipCase(f"runner: generator {spec!r} is not a spec object")
    gen = ctx.generators
    name = spec.get("name")
    try:
        return _GENERATED_SPECIAL.get(str(name), _materialize)(spec, ctx, gen)
    except (KeyError, TypeError, ValueError) as exc:
        # materialize() raises ValueError for a generator it has no code for (the query
        # generators of property cases among them); KeyError / TypeError for a spec that
        # lacks a parameter its generator needs.
        raise SkipCase(
            f"runner: generator {name!r} is not materializable: {type(exc).__name__}: {exc}"
        ) from exc


def _materialize(spec: Mapping[str, Any], ctx: RunContext, gen: ModuleType) -> bytes:
    return str(gen.materialize(spec, ctx.seed)).encode("utf-8")


# Generators that materialize() does not return as the object's text.
_GENERATED_SPECIAL: dict[str, Callable[[Mapping[str, Any], RunContext, ModuleType], bytes]] = {
    "csv_to_parquet": lambda spec, ctx, gen: bytes(gen.csv_to_parquet_bytes(spec["csv"])),
    "generate_rand_csv_datetime_to_string": lambda spec, ctx, gen: str(
        gen.datetime_to_string(spec, gen.GlibcRand(ctx.seed))[0]
    ).encode("utf-8"),
}


def _blob_input(spec: Any, ctx: RunContext) -> bytes:
    if isinstance(spec, str):  # a bare path instead of {repo, commit, path}
        spec = {"path": spec}
    if not isinstance(spec, Mapping) or not spec.get("path"):
        raise SkipCase(f"runner: input_file {spec!r} names no path")
    path = Path(str(spec["path"]))
    for base in (*ctx.blob_dirs, ctx.corpus_dir / "blobs", ctx.corpus_dir):
        for candidate in (base / path, base / path.name):
            if candidate.is_file():
                return candidate.read_bytes()
    raise SkipCase(
        f"input_file {spec.get('repo')}:{path} is a repository blob not present locally"
    )


# --------------------------------------------------------------------------------- harness
def _show(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def s3tests_remove_xml_tags(text: str) -> str:
    """s3-tests ``remove_xml_tags_from_result``: drop event-stream tag lines, re-add newlines."""
    kept = []
    for line in text.split("\n"):
        if line.find("Payload") > 0 or line.find("Records") > 0:
            continue
        kept.append(line + "\n")
    return "".join(kept)


_S3TESTS_REMOVAL = re.compile(r"then all '(.+?)' removed(?: \((query A|equivalent_query)\))?")
_S3TESTS_NUMERIC = re.compile(r"compared as (int|float)|converted with (int|float)\(\)")
_ESCAPES = {"\\n": "\n", "\\t": "\t"}


@dataclass(frozen=True)
class S3TestsNormalisation:
    """What the s3-tests harness did to each side after the XML filter (parsed from notes)."""

    removed: Mapping[str, str]
    numeric: str | None


def s3tests_normalisation(notes: str) -> S3TestsNormalisation:
    """Parse the s3-tests ``notes`` into per-side removed characters and the number type.

    Example:
        ``"...; then all ',' removed; compared as int"`` removes ``,`` from both sides' output
        and compares ``int(output)`` with ``int(expected)``.
    """
    removed = {"query": "", "equivalent": ""}
    for match in _S3TESTS_REMOVAL.finditer(notes):
        chars = _ESCAPES.get(match.group(1), match.group(1))
        sides = {"query A": ("query",), "equivalent_query": ("equivalent",)}.get(
            match.group(2) or "", ("query", "equivalent")
        )
        for side in sides:
            removed[side] += chars
    numeric = _S3TESTS_NUMERIC.search(notes)
    return S3TestsNormalisation(
        removed, None if numeric is None else (numeric.group(1) or numeric.group(2))
    )


_NUMBER_TYPES: dict[str, Callable[[str], Any]] = {"int": int, "float": float}


def _to_number(text: str, kind: str | None) -> Any:
    if kind is None:
        return text
    try:
        return _NUMBER_TYPES[kind](text)
    except ValueError as exc:
        raise CaseFailure(f"output {text!r} is not {kind}", got=text) from exc


def _s3tests_output(text: str, case: Case, side: str) -> Any:
    norm = s3tests_normalisation(case.notes)
    if norm.numeric is not None:
        # int(res) / float(res) reads the value: JSON output is flattened to its values first
        text = plain_rows(case, text)
    text = s3tests_remove_xml_tags(text)
    for char in norm.removed[side]:
        text = text.replace(char, "")
    return _to_number(text, norm.numeric)


def _s3tests_expected(expected: Any, case: Case) -> Any:
    if not isinstance(expected, str):
        return expected
    return _to_number(expected, s3tests_normalisation(case.notes).numeric)


def ceph_single_row_cut(text: str) -> str:
    """Ceph ``run_s3select(query)``: keep the text before the first ``,``, then before ``\\n``."""
    return text.split(",", 1)[0].split("\n", 1)[0]


def example_binary_value(text: str) -> str:
    """run_test.bash drops the example binary's trailing delimiter: first line, no final ``,``."""
    return text.split("\n", 1)[0].removesuffix(",")


def go_trim_space(text: str) -> str:
    """Go ``strings.TrimSpace``."""
    return text.strip(_GO_SPACE)


_CEPH_ROW_SEPARATOR = re.compile(r"^#=== \d+ ===#$")
_CEPH_ROW_SEPARATOR_LINE = re.compile(r"^#=== \d+ ===#$", re.MULTILINE)


def ceph_star_blocks(text: str) -> tuple[tuple[str, ...], ...]:
    """Ceph JSON ``select *`` debug output as rows of *unordered* ``path. : value`` lines.

    Each row ends with a ``#=== n ===#`` line; leaf order inside a row is not specified.
    """
    rows: list[tuple[str, ...]] = []
    current: list[str] = []
    for line in text.split("\n"):
        if _CEPH_ROW_SEPARATOR.match(line):
            rows.append((*sorted(current), line))
            current = []
        elif line:
            current.append(line)
    if current:
        rows.append(tuple(sorted(current)))
    return tuple(rows)


@dataclass(frozen=True)
class Harness:
    """How an upstream harness turned engine output (and its expected text) into values."""

    name: str
    output: Callable[[str, Case, str], Any]
    expected: Callable[[Any, Case], Any]


def _same(value: Any, case: Case) -> Any:
    return value


HARNESSES: dict[str, Harness] = {
    "exact": Harness("exact", lambda text, case, side: text, _same),
    "s3tests": Harness("s3tests", _s3tests_output, _s3tests_expected),
    "ceph_single_row": Harness(
        "ceph_single_row", lambda text, case, side: ceph_single_row_cut(text), _same
    ),
    "example_binary": Harness(
        "example_binary", lambda text, case, side: example_binary_value(text), _same
    ),
    "trim_space": Harness(
        "trim_space",
        lambda text, case, side: go_trim_space(text),
        lambda expected, case: go_trim_space(expected) if isinstance(expected, str) else expected,
    ),
    "ceph_select_star": Harness(
        "ceph_select_star",
        lambda text, case, side: ceph_star_blocks(text),
        lambda expected, case: ceph_star_blocks(expected),
    ),
}

HARNESS_RULES: tuple[tuple[Callable[[Case], bool], str], ...] = (
    (lambda case: case.id.startswith("ceph_s3tests:"), "s3tests"),
    (lambda case: case.id.startswith("ceph_s3select_example:"), "example_binary"),
    (lambda case: "single-row harness run_s3select(query)" in case.notes, "ceph_single_row"),
    (lambda case: "TrimSpace" in case.notes, "trim_space"),
    (
        lambda case: case.default_flavor == "ceph"
        and _CEPH_ROW_SEPARATOR_LINE.search(str(case.get("expected", ""))) is not None,
        "ceph_select_star",
    ),
)


def harness_for(case: Case) -> Harness:
    """The harness whose normalisation applies to ``case`` (``exact`` when none does)."""
    for applies, name in HARNESS_RULES:
        if applies(case):
            return HARNESSES[name]
    return HARNESSES["exact"]


def expected_value(case: Case, ctx: RunContext) -> Any:
    """``expected`` (or ``expected_nanosecond_build`` when judging a NANO_SEC build).

    Usually the exact output text; a JSON number, boolean, list or object instead is a value
    the output must hold (see :func:`check_value`).
    """
    if ctx.nanosecond_build and case.raw.get("expected_nanosecond_build") is not None:
        return case.raw["expected_nanosecond_build"]
    if case.raw.get("expected") is None:
        raise SkipCase("runner: the case has no expected text")
    return case.raw["expected"]


def compare(got: Any, want: Any, what: str = "output differs") -> None:
    """Raise :class:`CaseFailure` unless ``got == want``."""
    if got != want:
        raise CaseFailure(what, expected=want, got=got)


# ------------------------------------------------------------------------------------ stats
_STATS_KEYS = ("BytesScanned", "BytesProcessed", "BytesReturned")


def parse_expected_stats(spec: Any) -> dict[str, int]:
    """``expected_stats`` as a dict: given as a dict (moto) or as the Stats XML (MinIO)."""
    if isinstance(spec, Mapping):
        return {str(k): int(v) for k, v in spec.items()}
    found = {}
    for key in _STATS_KEYS:
        match = re.search(rf"<{key}>(-?\d+)</{key}>", str(spec))
        if match:
            found[key] = int(match.group(1))
    return found


def check_stats(case: Case, result: EngineResult) -> None:
    """Compare the Stats event with ``expected_stats`` when the case has one."""
    if case.raw.get("expected_stats") is None:
        return
    want = parse_expected_stats(case.raw["expected_stats"])
    got = {key: result.stats.get(key) for key in want}
    compare(got, want, "Stats differ")


# ------------------------------------------------------------------------------ JSON values
def json_equal(a: Any, b: Any) -> bool:
    """Structural JSON equality: numbers compare by value, booleans never equal numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def parse_json_records(text: str, delimiter: str = "\n") -> list[Any]:
    """Split S3 JSON output into records; each record is followed by ``delimiter``.

    Raises:
        CaseFailure: the text is not a sequence of JSON values separated by ``delimiter``.
    """
    decoder = json.JSONDecoder(object_pairs_hook=dict)
    records, pos = [], 0
    while pos < len(text):
        try:
            value, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise CaseFailure(f"output is not JSON records: {exc}", got=text) from exc
        records.append(value)
        pos = end
        if text.startswith(delimiter, pos):
            pos += len(delimiter)
        elif pos < len(text):
            raise CaseFailure(
                f"JSON record not followed by delimiter {delimiter!r} at {pos}", got=text
            )
    return records


def _json_delimiter(case: Case) -> str:
    out = case.get("output_serialization", {}) or {}
    return str((out.get("JSON") or {}).get("RecordDelimiter", "\n"))


def _contains(records: Sequence[Any], item: Any) -> bool:
    return any(json_equal(record, item) for record in records)


def is_json_output(case: Case) -> bool:
    """True when the case asks for JSON output (CSV is the default)."""
    out = case.get("output_serialization", {}) or {}
    return isinstance(out, Mapping) and "JSON" in out


_JSON_SCALAR_TEXT: dict[Any, str] = {True: "true", False: "false", None: "null"}
_TEXT_SCALARS: dict[str, Any] = {text: value for value, text in _JSON_SCALAR_TEXT.items()}


def value_text(value: Any) -> str:
    """A JSON value as an S3 engine prints it in CSV: strings bare, scalars by name."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool):
        return _JSON_SCALAR_TEXT[value]
    return json.dumps(value)


def text_value(text: str) -> Any:
    """A CSV field read back as the JSON value it prints (number, boolean, null, else text)."""
    if text in _TEXT_SCALARS:
        return _TEXT_SCALARS[text]
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    return text


def _record_values(record: Any) -> list[Any]:
    if not isinstance(record, Mapping):
        raise CaseFailure("a JSON output record is not an object", got=record)
    return list(record.values())


def plain_rows(case: Case, text: str) -> str:
    """The output as ``v1,v2\\n`` rows: CSV output as is, JSON records reduced to their values.

    Numeric readers (s3-tests ``int(res)``, oracles, properties) read values; over JSON output
    (``{"_1":3}``) they read the record's values in order, as they would read a CSV row.

    Raises:
        CaseFailure: JSON output that is not a sequence of JSON records.
    """
    if not is_json_output(case):
        return text
    records = parse_json_records(text, _json_delimiter(case))
    return "".join(
        ",".join(value_text(value) for value in _record_values(record)) + "\n"
        for record in records
    )


def output_value(case: Case, text: str) -> Any:
    """The one value of a one-value result: the JSON record's member, or the CSV field.

    Single-row harnesses keep the first field of the first row, as upstream did; otherwise the
    output must be one record (CSV: one row, the record delimiter after it optional, since Ceph
    ends an aggregate row without one) holding one value.

    Raises:
        CaseFailure: the output holds more or fewer values, or is not what its format says.
    """
    if is_json_output(case):
        records = parse_json_records(text, _json_delimiter(case))
        values = _record_values(records[0]) if len(records) == 1 else []
        if len(values) != 1:
            raise CaseFailure("expected one record with one value", got=text)
        return values[0]
    harness = harness_for(case)
    if harness.name in _FIRST_FIELD_HARNESSES:
        return text_value(harness.output(text, case, "query"))
    spec = (case.get("output_serialization", {}) or {}).get("CSV") or {}
    record_delimiter = str(spec.get("RecordDelimiter", "\n"))
    body = text.removesuffix(record_delimiter)
    rows = list(csv.reader(io.StringIO(body, newline=""),
                           delimiter=str(spec.get("FieldDelimiter", ",")),
                           quotechar=str(spec.get("QuoteCharacter", '"'))))
    if len(rows) != 1 or len(rows[0]) != 1 or record_delimiter in body:
        raise CaseFailure("expected one row with one field", got=text)
    return text_value(rows[0][0])


_FIRST_FIELD_HARNESSES = ("ceph_single_row", "example_binary")


def check_value(case: Case, text: str, want: Any, what: str = "value differs") -> None:
    """``text`` holds exactly the value ``want`` (numbers by value, booleans never numbers).

    The s3-tests harness with a numeric comparison in its notes keeps its own reading
    (``int(res)`` after its character removals).

    Raises:
        CaseFailure: the value differs or the output does not hold one value.
        SkipCase: ``want`` is a list or object expected of CSV output (no CSV text for it).
    """
    harness = harness_for(case)
    if harness.name == "s3tests" and s3tests_normalisation(case.notes).numeric is not None:
        compare(harness.output(text, case, "query"), harness.expected(want, case), what)
        return
    if isinstance(want, (list, Mapping)) and not is_json_output(case):
        raise SkipCase("runner: a JSON list or object is expected of CSV output")
    got = output_value(case, text)
    if not json_equal(got, want):
        raise CaseFailure(what, expected=want, got=got)


# ----------------------------------------------------------------------------- kind checks
def check_constant(case: Case, ctx: RunContext) -> None:
    """Output equals ``expected`` after the harness normalisation; Stats when given.

    An ``expected`` that is not text (``3`` over JSON output ``{"_1":3}``) is the value of a
    one-value result, judged by :func:`check_value`.
    """
    want = expected_value(case, ctx)
    result = ctx.run_main(case)
    if isinstance(want, str):
        harness = harness_for(case)
        compare(harness.output(result.text, case, "query"), harness.expected(want, case))
    else:
        check_value(case, result.text, want)
    check_stats(case, result)


def check_equivalence(case: Case, ctx: RunContext) -> None:
    """``query`` and ``equivalent_query`` give the same normalised output (not both empty)."""
    if not isinstance(case.raw.get("equivalent_query"), str):
        raise SkipCase("runner: an equivalence case without an equivalent_query")
    if case.raw.get("equivalent_transform") is not None:
        transform = _lookup(EQUIVALENT_TRANSFORMS, case)
        if transform is None:
            raise SkipCase(f"runner: equivalent_transform not implemented for {case.test_name}")
        transform(case, ctx)
        return
    first = ctx.run_main(case)
    second = ctx.run_equivalent(case)
    harness = harness_for(case)
    got = harness.output(first.text, case, "query")
    want = harness.output(second.text, case, "equivalent")
    compare(got, want, "query and equivalent_query differ")
    if not first.records and not second.records:
        raise CaseFailure("both outputs are empty: the equivalence proves nothing")


def check_error(case: Case, ctx: RunContext) -> None:
    """The request fails with an error whose ``code: message`` contains ``expect_error``.

    Ceph gtest: any syntax error passes. MinIO "request rejected" cases: any error passes.
    """
    expect = str(case.get("expect_error", ""))
    if any(code in expect for code in OBJECT_ERRORS):
        raise SkipCase(f"runner: expects {expect!r}, an error about the object itself: "
                       "the engine is handed the object's bytes and cannot raise it")
    try:
        result = ctx.run_main(case)
    except CaseFailure:
        raise
    except Exception as exc:
        if not is_s3_error(exc):
            raise
        if _error_accepted(case, exc):
            return
        raise CaseFailure(
            "wrong error", expected=f"error containing {case.get('expect_error')!r}",
            got=error_text(exc),
        ) from exc
    raise CaseFailure(
        "expected an error, the query succeeded",
        expected=f"error containing {case.get('expect_error')!r}", got=result.text,
    )


# Errors S3 answers before reading an object (the key or bucket does not exist).
OBJECT_ERRORS = ("NoSuchKey", "NoSuchBucket")


def _error_accepted(case: Case, exc: BaseException) -> bool:
    if "fails to parse (any message)" in case.notes and is_syntax_error(exc):
        return True
    if "the error may be raised when parsing the request or when opening" in case.notes:
        return True
    return str(case.get("expect_error", "")) in error_text(exc)


def check_parse_ok(case: Case, ctx: RunContext) -> None:
    """The statement runs without error (statement-only cases: over empty JSON LINES)."""
    ctx.run_main(case)


def check_oracle(case: Case, ctx: RunContext) -> None:
    """Output equals the value the ``oracle`` rule computes from the generated input."""
    for matches, evaluate in ORACLES:
        if matches(case):
            want = evaluate(case, ctx)
            text = ctx.run_main(case).text
            what = f"oracle: {case.get('oracle')}"
            if isinstance(want, str):
                harness = harness_for(case)
                compare(harness.output(text, case, "query"), harness.expected(want, case), what)
            else:
                check_value(case, text, want, what)
            return
    raise SkipCase(f"runner: no evaluator for oracle {case.get('oracle')!r}")


def check_property(case: Case, ctx: RunContext) -> None:
    """The case's non-equality ``assertion`` holds (one checker per upstream test)."""
    for matches, checker in PROPERTY_CHECKS:
        if matches(case):
            checker(case, ctx)
            return
    raise SkipCase(f"runner: no checker for property of {case.test_name}")


def check_values(case: Case, ctx: RunContext) -> None:
    """Structural expectations: every ``expected_*`` field present must hold."""
    checks = [check for name, check in VALUE_CHECKS if case.raw.get(name) is not None]
    if not checks:
        raise SkipCase("runner: no structural expectation in the case")
    result = ctx.run_main(case)
    for check in checks:
        check(case, result)


def check_derived_unit(case: Case, ctx: RunContext) -> None:
    """The one value of the one-row result equals ``expected`` (CSV- or JSON-decoded).

    A text ``expected`` is compared with the value as printed in CSV; any other JSON value
    with the value itself (a CSV field read back as number, boolean or null).
    """
    want = expected_value(case, ctx)
    result = ctx.run_main(case)
    if is_json_output(case):
        value = _single_json_value(case, result)
        compare(value_text(value) if isinstance(want, str) else value, want)
        return
    text = _single_csv_value(case, result)
    if isinstance(want, str):
        compare(text, want)
    elif not json_equal(text_value(text), want):
        raise CaseFailure("value differs", expected=want, got=text)


def _single_csv_value(case: Case, result: EngineResult) -> str:
    spec = (case.get("output_serialization", {}) or {}).get("CSV") or {}
    record_delimiter = str(spec.get("RecordDelimiter", "\n"))
    text = result.text
    if not text.endswith(record_delimiter):
        raise CaseFailure("CSV output does not end with the record delimiter", got=text)
    body = text[: -len(record_delimiter)]
    rows = list(csv.reader(io.StringIO(body, newline=""),
                           delimiter=str(spec.get("FieldDelimiter", ",")),
                           quotechar=str(spec.get("QuoteCharacter", '"'))))
    fields = rows[0] if rows else [""]
    if len(rows) > 1 or len(fields) != 1:
        raise CaseFailure("expected one row with one field", got=text)
    return fields[0]


def _single_json_value(case: Case, result: EngineResult) -> Any:
    records = parse_json_records(result.text, _json_delimiter(case))
    if len(records) != 1 or not isinstance(records[0], dict) or len(records[0]) != 1:
        raise CaseFailure("expected one record with one value", got=result.text)
    return next(iter(records[0].values()))


KIND_CHECKS: dict[str, Callable[[Case, RunContext], None]] = {
    "constant": check_constant,
    "equivalence": check_equivalence,
    "error": check_error,
    "oracle": check_oracle,
    "property": check_property,
    "parse_ok": check_parse_ok,
    "values": check_values,
    "derived_unit": check_derived_unit,
}


def _lookup(table: Mapping[str, Any], case: Case) -> Any:
    return table.get(case.test_name)


# ------------------------------------------------------------------------- values checks
def _values_expected_values(case: Case, result: EngineResult) -> None:
    records = parse_json_records(result.text, _json_delimiter(case))
    want = list(case.raw["expected_values"])
    compare(len(records), len(want), "number of records differs")
    for index, (record, value) in enumerate(zip(records, want, strict=True)):
        if not isinstance(record, dict):
            raise CaseFailure(f"record {index} is not an object", got=record)
        if value == "MISSING":
            compare(record, {}, f"record {index}: MISSING value must give an empty record")
        elif len(record) != 1 or not json_equal(next(iter(record.values())), value):
            raise CaseFailure(f"record {index} differs", expected=value, got=record)


def _values_expected_records(case: Case, result: EngineResult) -> None:
    match = str(case.get("match", "exact list"))
    for pattern, mode in MATCH_MODES:
        found = re.fullmatch(pattern, match)
        if found:
            mode(case, result, found)
            return
    raise SkipCase(f"runner: unknown match mode {match!r}")


def _match_exact(case: Case, result: EngineResult, _: re.Match[str]) -> None:
    records = parse_json_records(result.text, _json_delimiter(case))
    if not json_equal(records, list(case.raw["expected_records"])):
        raise CaseFailure("records differ", expected=case.raw["expected_records"], got=records)


def _match_same_length_contains(case: Case, result: EngineResult, _: re.Match[str]) -> None:
    records = parse_json_records(result.text, _json_delimiter(case))
    want = list(case.raw["expected_records"])
    compare(len(records), len(want), "number of records differs")
    _match_contains(case, result, _)


def _match_count_contains(case: Case, result: EngineResult, found: re.Match[str]) -> None:
    records = parse_json_records(result.text, _json_delimiter(case))
    compare(len(records), int(found.group(1)), "number of records differs")
    _match_contains(case, result, found)


def _match_contains(case: Case, result: EngineResult, _: re.Match[str]) -> None:
    records = parse_json_records(result.text, _json_delimiter(case))
    missing = [r for r in case.raw["expected_records"] if not _contains(records, r)]
    if missing:
        raise CaseFailure("expected records missing", expected=missing, got=records)


def _match_dumps(case: Case, result: EngineResult, _: re.Match[str]) -> None:
    records = parse_json_records(result.text, _json_delimiter(case))
    compare(json.dumps(records), "[" + str(case.raw["input"]) + "]", "json.dumps(records)")


MATCH_MODES: tuple[tuple[str, Callable[[Case, EngineResult, re.Match[str]], None]], ...] = (
    (r"exact list", _match_exact),
    (r"same length and contains each.*", _match_same_length_contains),
    (r"(\d+) records, contains the listed ones?", _match_count_contains),
    (r"contains", _match_contains),
    (r"json\.dumps\(result\) == '\[' \+ input \+ '\]'.*", _match_dumps),
)


def _values_expected_json(case: Case, result: EngineResult) -> None:
    suffix = str(case.get("expected_suffix", ""))
    text = result.text
    if suffix and not text.endswith(suffix):
        raise CaseFailure(f"payload does not end with {suffix!r}", got=text)
    try:
        value = json.loads(text[: len(text) - len(suffix)])
    except json.JSONDecodeError as exc:
        raise CaseFailure(f"payload is not one JSON value: {exc}", got=text) from exc
    if not json_equal(value, case.raw["expected_json"]):
        raise CaseFailure("JSON differs", expected=case.raw["expected_json"], got=value)


def _values_expected_contains(case: Case, result: EngineResult) -> None:
    missing = [s for s in case.raw["expected_contains"] if s not in result.text]
    if missing:
        raise CaseFailure("payload lacks expected text", expected=missing, got=result.text)


VALUE_CHECKS: tuple[tuple[str, Callable[[Case, EngineResult], None]], ...] = (
    ("expected_values", _values_expected_values),
    ("expected_records", _values_expected_records),
    ("expected_json", _values_expected_json),
    ("expected_contains", _values_expected_contains),
    ("expected_stats", lambda case, result: check_stats(case, result)),
)


# ------------------------------------------------------------------------------- oracles
def csv_columns(case: Case, data: bytes) -> list[list[str]]:
    """Rows of the (unquoted, generated) CSV input split with the case's delimiters."""
    spec = (case.get("input_serialization", {}) or {}).get("CSV") or {}
    record, fieldsep = str(spec.get("RecordDelimiter", "\n")), str(spec.get("FieldDelimiter", ","))
    lines = [line for line in data.decode("utf-8").split(record) if line]
    if str(spec.get("FileHeaderInfo", "NONE")).upper() in ("USE", "IGNORE"):
        lines = lines[1:]
    return [line.split(fieldsep) for line in lines]


def oracle_rows(case: Case, ctx: RunContext) -> list[list[str]]:
    """The CSV rows an oracle's "CSV column N" refers to.

    A ``csv_to_json`` input holds column N of its source CSV as member ``cN`` of each row (the
    converter splits on ``,`` and ``\\n``), so the oracle reads that source CSV; any other
    input must itself be CSV.

    Raises:
        SkipCase: the input is JSON or Parquet not derived from a CSV generator.
    """
    spec = case.get("generator")
    if isinstance(spec, Mapping) and spec.get("name") == "csv_to_json":
        source = _generated_input(spec.get("of"), ctx).decode("utf-8")
        return [line.split(",") for line in source.split("\n") if line]
    serialization = case.get("input_serialization", {}) or {}
    fmt = str(case.get("format", "csv")).lower()
    if fmt != "csv" or any(key in serialization for key in ("JSON", "Parquet")):
        raise SkipCase(f"runner: the oracle reads CSV columns, the input is {fmt}")
    return csv_columns(case, case_input(case, ctx))


def _int_column(case: Case, ctx: RunContext, number: int) -> list[int]:
    values = []
    for row in oracle_rows(case, ctx):
        try:
            values.append(int(row[number - 1]))
        except (IndexError, ValueError) as exc:
            raise SkipCase(
                f"runner: CSV column {number} of row {row!r} is not an integer: "
                "the oracle cannot be computed"
            ) from exc
    return values


_AGGREGATES: dict[str, Callable[[list[int]], int]] = {"minimum": min, "maximum": max, "sum": sum}


def _oracle_aggregate(case: Case, ctx: RunContext) -> Any:
    found = re.match(r"(minimum|maximum|sum) of the integer values of CSV column (\d+)",
                     str(case.get("oracle")))
    assert found is not None
    return _AGGREGATES[found.group(1)](_int_column(case, ctx, int(found.group(2))))


def _oracle_average(case: Case, ctx: RunContext) -> Any:
    found = re.match(r"float\(sum of the integer values of CSV column (\d+).*?\) / (\d+)",
                     str(case.get("oracle")))
    assert found is not None
    return float(sum(_int_column(case, ctx, int(found.group(1))))) / int(found.group(2))


def _oracle_min_max_min(case: Case, ctx: RunContext) -> Any:
    found = re.match(r"'<min of column (\d+)>,<max of column (\d+)>,<min of column (\d+) \+ 1>'",
                     str(case.get("oracle")))
    assert found is not None
    a, b, c = (_int_column(case, ctx, int(found.group(i))) for i in (1, 2, 3))
    return f"{min(a)},{max(b)},{min(c) + 1}"


def _oracle_datetime_to_string(case: Case, ctx: RunContext) -> Any:
    gen = ctx.generators
    return str(gen.datetime_to_string(case.raw["generator"], gen.GlibcRand(ctx.seed))[1])


def _oracle_matches(pattern: str) -> Callable[[Case], bool]:
    return lambda case: re.match(pattern, str(case.get("oracle", ""))) is not None


ORACLES: tuple[tuple[Callable[[Case], bool], Callable[[Case, RunContext], Any]], ...] = (
    (_oracle_matches(r"(minimum|maximum|sum) of the integer values of CSV column \d+"),
     _oracle_aggregate),
    (_oracle_matches(r"float\(sum of the integer values of CSV column \d+"), _oracle_average),
    (_oracle_matches(r"'<min of column \d+>,<max of column \d+>,<min of column \d+ \+ 1>'"),
     _oracle_min_max_min),
    (lambda case: (case.get("generator", {}) or {}).get("name")
     == "generate_rand_csv_datetime_to_string", _oracle_datetime_to_string),
)


# ------------------------------------------------------------------ random expressions
@dataclass(frozen=True)
class Expr:
    """A generated arithmetic expression: its SQL text and its IEEE double value."""

    text: str
    value: float | None  # None: division by zero somewhere (C gives inf/nan, Python raises)


_ARITH: dict[str, Callable[[float, float], float]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
}


def _apply(op: str, left: float | None, right: float | None) -> float | None:
    if left is None or right is None or (op == "/" and right == 0.0):
        return None
    return _ARITH[op](left, right)


def s3tests_random_expr(rng: random.Random, depth: int) -> Expr:
    """s3-tests ``random_expr(depth)``: a fully parenthesised tree, leaves ``<1..100>.0``."""
    if depth == 0:
        leaf = int(rng.random() * 100) + 1
        return Expr(f"{leaf}.0", float(leaf))
    op = rng.choice("+-*/")
    left, right = s3tests_random_expr(rng, depth - 1), s3tests_random_expr(rng, depth - 1)
    return Expr(f"({left.text}{op}{right.text})", _apply(op, left.value, right.value))


def example_random_expr(rng: random.Random, depth: int) -> Expr:
    """ceph/s3select ``example/expr_genrator.py``: leaves early with probability 1/(2^d-1)."""
    if depth == 1 or rng.random() < 1 / (2**depth - 1):
        leaf = int(rng.random() * 100) + 1
        return Expr(f"{leaf}.0", float(leaf))
    op = rng.choice("+-*/")
    left, right = example_random_expr(rng, depth - 1), example_random_expr(rng, depth - 1)
    return Expr(f"({left.text} {op} {right.text})", _apply(op, left.value, right.value))


def evaluate_c_arithmetic(text: str) -> float | None:
    """Evaluate ``+ - * /`` and parentheses over doubles with C precedence (left to right).

    Returns None on a division by zero.
    """
    tokens = re.findall(r"\d+(?:\.\d*)?|[-+*/()]", text)
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def primary() -> float | None:
        token = take()
        if token == "(":
            value = additive()
            take()
            return value
        return float(token)

    def binary(operand: Callable[[], float | None], ops: str) -> float | None:
        value = operand()
        while peek() is not None and peek() in ops:
            op = take()
            value = _apply(op, value, operand())
        return value

    def multiplicative() -> float | None:
        return binary(primary, "*/")

    def additive() -> float | None:
        return binary(multiplicative, "+-")

    return additive()


def ceph_gen_expr(rand: Callable[[], int], segments: int = 10) -> str:
    """ceph/s3select gtest ``gen_expr``-like text: operand groups joined by ``+-*/``.

    Every operand is ``<rand()%1000>.0``; a segment may open a parenthesis that a later
    segment (or the end) closes.
    """
    ops = "+-+*/*"
    parts: list[str] = []
    open_count = 0
    for index in range(segments):
        if index:
            parts.append(ops[rand() % len(ops)])
        if rand() % 3 == 0:
            parts.append("(")
            open_count += 1
        operands = [f"{rand() % 1000}.0" for _ in range(4)]
        inner = [operands[0]]
        for operand in operands[1:]:
            inner += [ops[rand() % len(ops)], operand]
        parts.append("".join(inner))
        if open_count and rand() % 2 == 0:
            parts.append(")")
            open_count -= 1
    parts.append(")" * open_count)
    return "".join(parts)


# ------------------------------------------------------------------------- property checks
def _iterations(text: str, default: int) -> int:
    found = re.search(r"(?:repeated (\d+) times|(\d+) iterations)", text)
    return int(found.group(1) or found.group(2)) if found else default


_COMPARATORS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt, ">": operator.gt, "=": operator.eq,
    "<=": operator.le, ">=": operator.ge, "!=": operator.ne,
}


def _prop_where_clause(case: Case, ctx: RunContext) -> None:
    rng = random.Random(ctx.seed)
    for _ in range(_iterations(str(case.get("assertion")), 100)):
        left, right = s3tests_random_expr(rng, 4), s3tests_random_expr(rng, 4)
        op = rng.choice(list(_COMPARATORS))
        if left.value is None or right.value is None:
            continue
        query = f"select count(0) from s3object where {left.text}{op}{right.text};"
        text = s3tests_remove_xml_tags(ctx.run_plain(case, query)).replace(",", "")
        got = _to_number(text, "int") > 0
        want = _COMPARATORS[op](left.value, right.value)
        compare(got, want, f"where-clause truth differs for {query}")


def _prop_projection(case: Case, ctx: RunContext) -> None:
    rng = random.Random(ctx.seed)
    for _ in range(_iterations(str(case.get("assertion")), 100)):
        expr = s3tests_random_expr(rng, 4)
        if expr.value is None or expr.value == 0:
            continue
        query = f"select {expr.text} from s3object;"
        text = ctx.run_plain(case, query)
        first = s3tests_remove_xml_tags(text).split("\n", 1)[0].replace(",", "")
        got = _to_number(first, "float")
        if not abs(got - expr.value) < 1e-5:
            raise CaseFailure(f"projection value differs for {query}", expected=expr.value, got=got)


def _prop_count_sum_difference(case: Case, ctx: RunContext) -> None:
    found = re.search(r"count\s*\*\s*(\d+) == sum1\s*-\s*sum2", str(case.get("assertion")))
    if found is None:
        raise SkipCase("runner: cannot read the count/sum assertion")
    text = s3tests_remove_xml_tags(ctx.run_plain(case)).replace("\n", "")
    parts = text.split(",")
    if len(parts) != 3:
        raise CaseFailure("expected 'count,sum1,sum2'", got=text)
    count = _to_number(parts[0], "int")
    sums = [0, 0] if count == 0 else [_to_number(p, "int") for p in parts[1:]]
    compare(sums[0] - sums[1], count * int(found.group(1)), f"count*k == sum1-sum2 for {text!r}")


def _prop_progress_stats(case: Case, ctx: RunContext) -> None:
    data = case_input(case, ctx)
    result = ctx.run_main(case)
    compare(result.stats.get("BytesScanned"), len(data), "Stats BytesScanned != object size")
    compare(result.stats.get("BytesReturned"), len(result.records),
            "Stats BytesReturned != size of the records")


def _prop_vs_c(case: Case, ctx: RunContext) -> None:
    gen = ctx.generators.GlibcRand(ctx.seed)
    iterations = int((case.get("generator", {}) or {}).get("iterations", 10))
    for _ in range(iterations):
        text = ceph_gen_expr(gen.rand)
        value = evaluate_c_arithmetic(text)
        if value is None or not math.isfinite(value):
            continue
        query = f"select {text} from stdin;"
        got = _to_number(ceph_single_row_cut(ctx.run_plain(case, query)), "float")
        compare(got, value, f"double result differs for {query}")


def _prop_example_expr(case: Case, ctx: RunContext) -> None:
    rng = random.Random(ctx.seed)
    spec = case.get("generator", {}) or {}
    depth_text = re.search(r"(\d+)$", str(spec.get("name", "")))
    depth = int(depth_text.group(1)) if depth_text else 5
    for _ in range(_iterations(str(spec.get("expression_grammar", "")), 100)):
        expr = example_random_expr(rng, depth)
        if expr.value is None:
            continue
        query = f"select {expr.text} from stdin;"
        got = _to_number(example_binary_value(ctx.run_plain(case, query)), "float")
        if not abs(got - float(f"{expr.value:f}")) <= 0.00001:
            raise CaseFailure(f"value differs for {query}", expected=expr.value, got=got)


def _close_to_now(stamp: datetime, before: datetime, after: datetime, slack: float) -> bool:
    return (before.timestamp() - slack) <= stamp.timestamp() <= (after.timestamp() + slack)


def _prop_ceph_utcnow(case: Case, ctx: RunContext) -> None:
    before = datetime.now(UTC)
    text = ceph_single_row_cut(ctx.run_plain(case))
    after = datetime.now(UTC)
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00", text):
        raise CaseFailure("not YYYY-MM-DDTHH:MM:SS+00:00", got=text)
    if not _close_to_now(datetime.fromisoformat(text), before, after, 2.0):
        raise CaseFailure("utcnow() is not the current time", expected=before.isoformat(), got=text)


def _prop_aws_utcnow(case: Case, ctx: RunContext) -> None:
    pattern = re.search(r"matching (\^.*?\$) ", case.notes)
    if pattern is None:
        raise SkipCase("runner: no output pattern in the notes")
    before = datetime.now(UTC)
    text = ctx.run_main(case).text
    after = datetime.now(UTC)
    if re.fullmatch(pattern.group(1).lstrip("^").rstrip("$"), text) is None:
        raise CaseFailure(f"output does not match {pattern.group(1)}", got=text)
    stamp = json.loads(text)["_1"].replace("Z", "+00:00")
    if not _close_to_now(datetime.fromisoformat(stamp), before, after, 61.0):
        raise CaseFailure("UTCNOW() is not the current time", expected=before.isoformat(), got=text)


def _prop_case_counts(case: Case, ctx: RunContext) -> None:
    text = ctx.run_plain(case)
    for name, query in dict(case.get("related_queries", {})).items():
        letter = name.rsplit("_", 1)[1]
        count = _to_number(ctx.run_plain(case, query).strip(), "int")
        compare(text.count(letter), count, f"occurrences of {letter!r} != {name}")


def _placeholder_choices(value: Any) -> list[str]:
    found = re.fullmatch(r"<\w+: one of ([^>]*)>", str(value))
    return found.group(1).split() if found else [str(value)]


def _prop_delimiter_round_trip(case: Case, ctx: RunContext) -> None:
    out = dict((case.get("output_serialization", {}) or {}).get("CSV") or {})
    records = _placeholder_choices(out.get("RecordDelimiter", "\n"))
    fields = _placeholder_choices(out.get("FieldDelimiter", ","))
    # The two placeholders may offer different numbers of choices: pairs up to the shorter.
    for record, fieldsep in zip(records, fields, strict=False):
        custom = {"CSV": {**out, "RecordDelimiter": record, "FieldDelimiter": fieldsep}}
        phase1 = ctx.run_main(case, output_serialization=custom).text
        if record not in phase1 or fieldsep not in phase1:
            raise CaseFailure(f"output does not use delimiters {record!r}/{fieldsep!r}", got=phase1)
        in_csv = dict((case.get("input_serialization", {}) or {}).get("CSV") or {})
        in_spec = {"CSV": {**in_csv, "RecordDelimiter": record, "FieldDelimiter": fieldsep}}
        phase2 = ctx.execute(case, case.raw["query"], phase1.encode("utf-8"),
                             input_serialization=in_spec, output_serialization=custom).text
        compare(phase2, phase1, f"round trip through {record!r}/{fieldsep!r} differs")


def _prop_select_star_identity(case: Case, ctx: RunContext) -> None:
    compare(ctx.run_main(case).text, case_input(case, ctx).decode("utf-8"),
            "select * does not reproduce the input")


def _prop_same_output(case: Case, ctx: RunContext) -> None:
    compare(ctx.run_main(case).text, ctx.run_equivalent(case).text,
            "query and equivalent_query differ")


def _named(*names: str) -> Callable[[Case], bool]:
    return lambda case: case.test_name in names


PROPERTY_CHECKS: tuple[tuple[Callable[[Case], bool], Callable[[Case, RunContext], None]], ...] = (
    (_named("test_generate_where_clause"), _prop_where_clause),
    (_named("test_generate_projection"), _prop_projection),
    (lambda case: case.test_name in ("test_column_sum_min_max", "test_json_column_sum_min_max")
     and "sum1-sum2" in str(case.get("assertion")), _prop_count_sum_difference),
    (_named("test_progress_expressions"), _prop_progress_stats),
    (_named("TestS3SElect.s3select_vs_C"), _prop_vs_c),
    (_named("run_test.bash/expr_test"), _prop_example_expr),
    (_named("TestS3selectFunctions.utcnow"), _prop_ceph_utcnow),
    (lambda case: case.default_flavor != "ceph" and "utcnow()" in str(case.get("query")).lower(),
     _prop_aws_utcnow),
    (_named("TestS3selectFunctions.test_case_value_when_then_else_expressions"),
     _prop_case_counts),
    (_named("TestS3selectFunctions.opserialization_expressions"), _prop_delimiter_round_trip),
    (_named("TestS3selectFunctions.csv_chunk_processing"), _prop_select_star_identity),
    (lambda case: case.raw.get("equivalent_query") is not None, _prop_same_output),
)


# -------------------------------------------------------------------- equivalence transforms
def _quote_rows(text: str, quote: str, record: str = "\n", fieldsep: str = ",") -> str:
    rows = [row for row in text.split("\n") if row]
    return "".join(
        fieldsep.join(quote + value + quote for value in row.split(",")) + record for row in rows
    )


def _transform_quote_always(case: Case, ctx: RunContext) -> None:
    """gtest ``opserialization_expressions``: QuoteFields ALWAYS wraps every value."""
    out = dict((case.get("output_serialization", {}) or {}).get("CSV") or {})
    plain = {"CSV": {k: v for k, v in out.items() if k not in ("QuoteFields", "QuoteCharacter")}}
    second = ctx.execute(
        case, case.raw["equivalent_query"], case_input(case, ctx),
        input_serialization=input_serialization_of(case), output_serialization=plain,
    ).text
    if not second:
        raise CaseFailure("equivalent_query returned nothing: the equivalence proves nothing")
    for quote in _placeholder_choices(out.get("QuoteCharacter", '"')):
        spec = {"CSV": {**out, "QuoteCharacter": quote}}
        got = ctx.run_main(case, output_serialization=spec).text
        compare(got, _quote_rows(second, quote), f"QuoteFields ALWAYS with {quote!r}")


EQUIVALENT_TRANSFORMS: dict[str, Callable[[Case, RunContext], None]] = {
    "TestS3selectFunctions.opserialization_expressions": _transform_quote_always,
}


# ---------------------------------------------------------------------------------- driver
def run_case(case: Case, ctx: RunContext, skips: SkipRules | None = None) -> Outcome:
    """Judge one case: passed, failed (with detail) or skipped (with reason)."""
    reason = skips.reason(case) if skips is not None else None
    if reason is None and case.raw.get("only_in_nanosecond_build") and not ctx.nanosecond_build:
        reason = "only asserted in a NANO_SEC build of Ceph (run with --nanosecond-build)"
    query = case.raw.get("query")
    if reason is None and not isinstance(query, str):
        reason = "runner: the case has no query text"
    if reason is not None:
        return Outcome(case.id, SKIPPED, reason, query=query if isinstance(query, str) else None)
    check = KIND_CHECKS.get(case.kind)
    if check is None:
        return Outcome(case.id, SKIPPED, f"runner: unknown kind {case.kind!r}", query=query)
    try:
        check(case, ctx)
    except SkipCase as exc:
        return Outcome(case.id, SKIPPED, exc.reason, query=query)
    except CaseFailure as exc:
        return Outcome(case.id, FAILED, exc.detail, query, exc.expected, exc.got)
    except Exception as exc:
        if is_s3_error(exc):
            return Outcome(case.id, FAILED, f"engine error: {error_text(exc)}", query=query,
                           expected=_expected_summary(case))
        return Outcome(case.id, FAILED, f"runner crashed: {type(exc).__name__}: {exc}",
                       query=query)
    return Outcome(case.id, PASSED, query=query)


def _expected_summary(case: Case) -> str | None:
    value = case.raw.get("expected")
    return None if value is None else str(value)


def apply_known_failures(outcome: Outcome, known: Mapping[str, str]) -> Outcome:
    """Strict xfail: a known failure that fails is ``xfail``; one that passes is a failure."""
    if outcome.case_id not in known:
        return outcome
    if outcome.status == FAILED:
        return Outcome(outcome.case_id, XFAIL, outcome.detail, outcome.query, outcome.expected,
                       outcome.got)
    if outcome.status == PASSED:
        return Outcome(outcome.case_id, FAILED,
                       "known failure now passes: remove it from known_failures.json",
                       outcome.query)
    return outcome


def run_cases(
    cases: Iterable[Case], ctx: RunContext, skips: SkipRules | None = None,
    known: Mapping[str, str] | None = None,
) -> Iterator[tuple[Case, Outcome]]:
    """Judge every case in turn (known failures applied)."""
    for case in cases:
        yield case, apply_known_failures(run_case(case, ctx, skips), known or {})
