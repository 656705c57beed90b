"""The parser's function list and the lowering's agree: a function the parser reads as a call by
name has a lowering, and the lowering has no entry the parser never produces.

Adding a function touches both tables (docs/architecture.md, "Adding a function"); a name in
one only is either a parsed call that fails as "unsupported" at translation or a lowering
nobody reaches.
"""

from __future__ import annotations

import pytest
from sqlglot import exp

from select_dialect import parse, translate
from select_dialect.errors import SelectDialectError, UnsupportedFeatureError
from select_dialect.flavors import FLAVOR_NAMES, FLAVORS
from select_dialect.lowering import Lowering
from select_dialect.s3select import ANONYMOUS_FUNCTIONS


def _lowered_function_names() -> set[str]:
    lowering = Lowering(input_format="csv", flavor=FLAVORS["ceph"], columns=None, header=None,
                        table_names=["s3object"], aliases={})
    # The lowering's table of calls by name (exp.Anonymous), what the parser's list feeds.
    return set(lowering._functions)


def test_the_parser_and_the_lowering_name_the_same_functions() -> None:
    parsed = set(ANONYMOUS_FUNCTIONS)
    lowered = _lowered_function_names()
    assert sorted(parsed - lowered) == [], "parsed but never lowered"
    assert sorted(lowered - parsed) == [], "lowered but never parsed as a call by name"


@pytest.mark.parametrize("flavor", FLAVOR_NAMES)
@pytest.mark.parametrize("name", ANONYMOUS_FUNCTIONS)
def test_every_listed_function_parses_to_a_call_by_name(name: str, flavor: str) -> None:
    statement = parse(f"select {name.lower()}(_1) from s3object", flavor)
    call = statement.expressions[0]
    assert isinstance(call, exp.Anonymous)
    assert call.this == name


@pytest.mark.parametrize("name", ANONYMOUS_FUNCTIONS)
def test_every_listed_function_reaches_its_lowering(name: str) -> None:
    # Wrong arity or argument types may be refused, but never as an unknown function.
    try:
        translate(f"select {name.lower()}(_1) from s3object", input_format="csv")
    except UnsupportedFeatureError as error:  # either outcome may be right: not this one
        assert "unsupported function" not in error.message  # noqa: PT017
    except SelectDialectError:
        pass


def test_an_unlisted_function_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedFeatureError, match="unsupported function: no_such_fn"):
        translate("select no_such_fn(_1) from s3object", input_format="csv")
