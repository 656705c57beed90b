"""Benchmarks: each module runs as ``python -m benchmarks.<name> [--quick]``.

They are never collected by pytest (no ``test_*`` names). Generated data goes to
``benchmarks/work/`` (gitignored); results (JSON, Markdown, PNG) go to ``benchmarks/results/``.
See ``docs/benchmarks.md``.
"""
