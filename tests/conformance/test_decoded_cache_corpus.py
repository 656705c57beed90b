"""A slice of the conformance corpus answered from a filled decoded cache
(``FLIGHT_SELECT_DECODED_CACHE=fill-first``: every query over a CSV object that DataFusion's
reader serves fills the object's entry first, then reads it) gives the same outcome, case by
case, as the corpus run without the cache."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest

from flight_storage.execution import entry_encodings
from flight_storage.execution.plan_types import EngineConfig
from flight_storage.execution.select_local import run_select

from . import corpus

_SLICE = ("minio.jsonl", "aws_docs.jsonl", "ceph_s3tests.jsonl")


@functools.cache
def _without_the_cache(corpus_dir: Path) -> tuple[list[corpus.Case], dict[str, corpus.Outcome]]:
    """The slice's cases and their outcomes without a cache (once for both tests)."""
    cases = corpus.load_cases([corpus_dir / name for name in _SLICE
                               if (corpus_dir / name).exists()])
    plain = corpus.RunContext(engine=run_select, corpus_dir=corpus_dir)
    skips = corpus.SkipRules.load(corpus.DEFAULT_SKIPS)
    return cases, {c.id: corpus.run_case(c, plain, skips) for c in cases}


@pytest.mark.parametrize("dictionaries", ["chosen", "every text column"])
def test_a_corpus_slice_through_a_filled_cache_answers_as_without(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dictionaries: str) -> None:
    """``every text column``: each entry types its text as dictionaries (the rule types only
    text of few distinct values so, which the corpus's small objects rarely have)."""
    corpus_dir = corpus.default_corpus_dir()
    paths = [corpus_dir / name for name in _SLICE if (corpus_dir / name).exists()]
    if not paths:
        pytest.skip(f"no conformance corpus at {corpus_dir}")
    cases, expected = _without_the_cache(corpus_dir)
    skips = corpus.SkipRules.load(corpus.DEFAULT_SKIPS)
    folder = tmp_path / "decoded"
    engine = functools.partial(run_select, config=EngineConfig(cache_dir=str(folder)))
    monkeypatch.setenv("FLIGHT_SELECT_DECODED_CACHE", "fill-first")
    if dictionaries == "every text column":
        monkeypatch.setattr(entry_encodings, "DICTIONARY_TYPE_SHARE", 1.0)
    cached = corpus.RunContext(engine=engine, corpus_dir=corpus_dir)
    for case in cases:
        got = corpus.run_case(case, cached, skips)
        want = expected[case.id]
        assert (got.status, got.got, got.detail) == (want.status, want.got, want.detail), case.id
    filled = [p for p in folder.iterdir() if p.suffix == ".parquet"]
    assert len(filled) >= 50  # the slice was answered from entries, not around them
