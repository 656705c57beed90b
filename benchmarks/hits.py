"""A synthetic table shaped like ClickBench's ``hits``: wide, mixed types, one Parquet object.

ClickBench's ``hits`` has 105 columns of web-analytics events (integers of every width, URLs
and other strings, timestamps, a date), stored sorted by ``CounterID, EventDate, UserID,
EventTime``. This one has 70 of its columns, the same kinds of values, the same sort order
(counters skewed as in the real data), and a ``URL`` column where about 0.1% of the values
contain ``google``: the shape of ClickBench's ``SELECT * ... WHERE URL LIKE '%google%' ORDER BY
EventTime LIMIT 10``, which decodes every column of the rows it keeps and only ``URL`` of the
others when the reader filters while it decodes (late materialisation).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

from benchmarks import common

log = logging.getLogger("benchmarks.hits")

ROW_GROUP_ROWS = 100_000
GOOGLE_SHARE = 0.001
"""Share of ``URL`` values that contain ``google``."""
_WORDS = np.array(["news", "sport", "video", "music", "shop", "mail", "maps", "auto", "games",
                   "books", "travel", "weather"])
_COUNTERS = (np.array([62, 1143, 7, 3922, 105]), [0.5, 0.2, 0.15, 0.1, 0.05])
_START = np.datetime64("2013-07-01T00:00:00", "s")
_MONTH_S = 31 * 86400

# (names, kind, argument): "int16"/"int32"/"int64" draw integers below the argument; "text"
# draws (prefix, words) paths; "time" is the event's time; "url" is a text with some google.
_COLUMNS: tuple[tuple[tuple[str, ...], str, object], ...] = (
    (("WatchID",), "int64", 2**62),
    (("JavaEnable",), "int16", 2),
    (("Title",), "text", ("Title ", 4)),
    (("GoodEvent",), "int16", 2),
    (("EventTime",), "time", None),
    (("EventDate",), "date", None),
    (("CounterID",), "counter", None),
    (("ClientIP", "RegionID", "UserID"), "int32", 10**6),
    (("CounterClass", "OS", "UserAgent"), "int16", 100),
    (("URL",), "url", ("http://example.ru/", 3)),
    (("Referer",), "text", ("http://ref.example.com/", 3)),
    (("IsRefresh", "RefererCategoryID", "RefererRegionID", "URLCategoryID", "URLRegionID",
      "ResolutionWidth", "ResolutionHeight", "ResolutionDepth", "FlashMajor", "FlashMinor"),
     "int16", 2000),
    (("FlashMinor2",), "text", ("", 1)),
    (("NetMajor", "NetMinor", "UserAgentMajor"), "int16", 100),
    (("UserAgentMinor",), "text", ("", 1)),
    (("CookieEnable", "JavascriptEnable", "IsMobile", "MobilePhone"), "int16", 3),
    (("MobilePhoneModel",), "text", ("", 1)),
    (("Params",), "text", ("p=", 2)),
    (("IPNetworkID", "TraficSourceID", "SearchEngineID"), "int32", 10**5),
    (("SearchPhrase",), "text", ("", 2)),
    (("AdvEngineID", "IsArtifical", "WindowClientWidth", "WindowClientHeight",
      "ClientTimeZone"), "int16", 3000),
    (("ClientEventTime",), "time", None),
    (("SilverlightVersion1", "SilverlightVersion2", "SilverlightVersion3",
      "SilverlightVersion4"), "int16", 10),
    (("PageCharset",), "text", ("", 1)),
    (("CodeVersion",), "int32", 10**4),
    (("IsLink", "IsDownload", "IsNotBounce"), "int16", 2),
    (("FUniqID",), "int64", 2**62),
    (("OriginalURL",), "text", ("http://orig.example.ru/", 2)),
    (("HID",), "int32", 2**31 - 1),
    (("IsOldCounter", "IsEvent", "IsParameter", "DontCountHits", "WithHash"), "int16", 2),
    (("HitColor",), "text", ("", 1)),
    (("LocalEventTime",), "time", None),
    (("Age", "Sex", "Income", "Interests", "Robotness"), "int16", 100),
)


def hits_parquet(rows: int, seed: int = 11) -> Path:
    """The hits-like Parquet object of ``rows`` rows (generated once, cached under WORK)."""
    path = common.WORK / "hits" / f"hits_{rows}.parquet"
    if path.exists():
        return path
    import pyarrow.parquet as pq

    path.parent.mkdir(parents=True, exist_ok=True)
    log.info("generating %s", path.name)
    table = hits_table(rows, seed)
    partial = path.with_suffix(".tmp")
    pq.write_table(table, partial, row_group_size=ROW_GROUP_ROWS)
    partial.rename(path)
    return path


def hits_table(rows: int, seed: int = 11) -> pa.Table:
    """The hits-like table, sorted as ClickBench's is."""
    rng = np.random.default_rng(seed)
    times = _START + rng.integers(0, _MONTH_S, rows).astype("timedelta64[s]")
    kinds: dict[str, Callable[[object], pa.Array]] = {
        "int16": lambda top: pa.array(rng.integers(0, top, rows).astype(np.int16)),
        "int32": lambda top: pa.array(rng.integers(0, top, rows).astype(np.int32)),
        "int64": lambda top: pa.array(rng.integers(0, top, rows)),
        "text": lambda spec: _text(rng, rows, spec, 0.0),
        "url": lambda spec: _text(rng, rows, spec, GOOGLE_SHARE),
        "time": lambda _: pa.array(times),
        "date": lambda _: pa.array(times.astype("datetime64[D]")),
        "counter": lambda _: pa.array(rng.choice(_COUNTERS[0], rows, p=_COUNTERS[1])
                                      .astype(np.int32)),
    }
    columns = {name: kinds[kind](argument)
               for names, kind, argument in _COLUMNS for name in names}
    table = pa.table(columns)
    return table.sort_by([("CounterID", "ascending"), ("EventDate", "ascending"),
                          ("UserID", "ascending"), ("EventTime", "ascending")])


def _text(rng: np.random.Generator, rows: int, spec: object, google: float) -> pa.Array:
    """``prefix`` + ``words`` random words as a path + a number; ``google`` of them behind a
    google.com search URL."""
    assert isinstance(spec, tuple)
    prefix, words = spec
    picked = rng.integers(0, len(_WORDS), (rows, words))
    text = np.full(rows, prefix, dtype=object)
    for i in range(words):
        text = text + _WORDS[picked[:, i]].astype(object) + "/"
    text = text + rng.integers(0, 10**6, rows).astype(str).astype(object)
    if google:
        hit = rng.random(rows) < google
        text[hit] = "http://www.google.com/search?q=" + text[hit]
    return pa.array(text, type=pa.string())
