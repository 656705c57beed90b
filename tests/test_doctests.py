"""The examples in the packages' docstrings run and print what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from types import ModuleType

import pytest

PACKAGES = ("flight_storage", "select_dialect", "compute_client", "lazy_dataset")


def _modules() -> list[str]:
    names: list[str] = []
    for package in PACKAGES:
        root = importlib.import_module(package)
        names.append(package)
        names.extend(info.name for info in pkgutil.walk_packages(root.__path__, f"{package}."))
    return sorted(n for n in names if "_pb2" not in n and not n.endswith("__main__"))


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str) -> None:
    module: ModuleType = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False, report=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
