"""The one gate for text that comes from a submission.

Every string a submission controls (its folder and file names, zip member names,
notebook metadata, exception messages and type names sent back by a worker,
printed text) passes through :func:`clean` or :func:`line` where it enters the
trusted side. What comes out is always valid UTF-8 (a lone surrogate, which
``json.dumps(..., ensure_ascii=False)`` lets through and ``.encode("utf-8")``
refuses, becomes U+FFFD), holds no control character a terminal would obey
(escape sequences, carriage returns, bidirectional overrides) and has a
bounded length, with a visible marker where it was cut. Everything downstream
(result JSON, feedback, reports, CSV files, the terminal) then handles plain
text and no writer can fail on it.

Two more gates live here because every writer needs them:

* :func:`file_stem`: a name that is safe as a file name on any file system
  (bounded in UTF-8 bytes, not in characters: 80 Chinese characters are 240 bytes);
* :func:`csv_rows`: CSV text whose every cell is neutralized against formula
  injection as OWASP recommends (a cell starting with ``=``, ``+``, ``-``,
  ``@``, tab or carriage return gets a leading apostrophe).
"""
from __future__ import annotations

import csv
import hashlib
import io
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

#: Appended where a text was cut.
TRUNCATED = " …[truncated]"
#: Default bounds, in characters.
NAME_CHARS = 120
MESSAGE_CHARS = 2000

_SURROGATES = re.compile("[\ud800-\udfff]")
#: C0 and C1 controls (tab and newline are handled apart), DEL, and the format characters that
#: reorder or hide text on a terminal or in a spreadsheet (bidi overrides and isolates, zero widths).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
_LINE_BREAKS = re.compile("[\t\n\u2028\u2029\x85]+")


def clean(value: Any, limit: int = MESSAGE_CHARS) -> str:
    """Printable, valid UTF-8 text of at most ``limit`` characters (plus the marker); keeps newlines and tabs.

    ``value`` may be anything: bytes are decoded (invalid sequences replaced), other
    objects are ignored (an empty string), never ``str()``-ed: a hostile ``__str__``
    must not run on the trusted side.
    """
    if type(value) is str and len(value) <= limit and (
            value.isprintable() or ("\r" not in value and value.replace("\n", "").replace("\t", "").isprintable())):
        # The common case, and the same answer: printable text (newlines and tabs apart, which clean keeps)
        # holds no surrogate, control, format character or other line break (str.isprintable is False for
        # categories Cc, Cf, Cs, Co, Cn, Zl, Zp).
        return value
    if isinstance(value, (bytes, bytearray)):
        text = bytes(value[: limit * 4 + 4]).decode("utf-8", errors="replace")
    elif type(value) is str:
        text = value
    else:
        return ""
    if len(text) > limit * 2:   # cut before the regular expressions, which are linear but not free
        text = text[: limit * 2]
        cut = True
    else:
        cut = False
    text = _SURROGATES.sub("\ufffd", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROLS.sub("", text)
    if len(text) > limit:
        text, cut = text[:limit], True
    return text + TRUNCATED if cut else text


def line(value: Any, limit: int = NAME_CHARS) -> str:
    """:func:`clean` on one line: every line break and tab becomes a space."""
    if type(value) is str and len(value) <= limit and value.isprintable():
        return value    # as clean's own fast path: nothing to break, replace or remove
    return clean(_LINE_BREAKS.sub(" ", value) if type(value) is str else value, limit).replace("\n", " ")


def path_text(name: str, limit: int = 1000) -> str:
    """A file or folder name as one clean line. Bytes that are not UTF-8 (which Python keeps as
    surrogate escapes) are shown as ``\\xff``, so two such names stay two names."""
    try:
        raw = name.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError:      # a lone surrogate that no file system name decodes to
        return line(name, limit)
    return line(raw.decode("utf-8", errors="backslashreplace"), limit)


def scrub(value: Any, limit: int = MESSAGE_CHARS) -> Any:
    """``value`` (JSON-like: dicts, lists, strings, numbers) with every string and key :func:`clean`-ed."""
    if type(value) is str:
        return clean(value, limit)
    if isinstance(value, dict):
        return {clean(k, NAME_CHARS) if type(k) is str else k: scrub(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v, limit) for v in value]
    return value


#: Hex digits of the hash a changed name gets (48 bits: a class of thousands has no collision).
STEM_HASH = 12
_HASHED = re.compile(r"-[0-9a-f]{6,}$")


def file_stem(text: str, max_bytes: int = 100) -> str:
    """A file-name-safe form of a name; distinct names give distinct stems.

    Letters of any script, digits, ``-`` and ``_`` are kept; anything else becomes
    ``_``; at most ``max_bytes`` bytes of UTF-8 (a file name may hold 255, and the
    kit appends ``__<assignment>.json`` and the like). When that changes the name,
    a hash of the original is appended so ``a b`` and ``a_b`` do not collide. A name
    that already ends like such a hash (a folder named ``Ada_Lovelace-<hash>``, the
    stem of "Ada Lovelace") gets one too: a name kept as it is never ends like one,
    so no name can take another's stem (short of a 48-bit hash collision).
    """
    norm = unicodedata.normalize("NFC", clean(text, 4096))
    cleaned = re.sub(r"[^\w\-]+", "_", norm, flags=re.UNICODE).strip("_-") or "student"
    encoded = cleaned.encode("utf-8")
    if len(encoded) > max_bytes:
        cleaned = encoded[:max_bytes].decode("utf-8", errors="ignore").strip("_-") or "student"
    if cleaned != text or _HASHED.search(text):
        cleaned += "-" + hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:STEM_HASH]
    return cleaned


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any, reserved: Iterable[str] = ()) -> Any:
    """One CSV cell, safe to open in a spreadsheet.

    Numbers pass as they are. Text is cleaned to one line; text that starts like a
    formula, or that equals one of the ``reserved`` markers of the file's format
    (Canvas' "Points Possible" row), gets a leading apostrophe.
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    text = line(value if type(value) is str else "" if value is None else str(value), MESSAGE_CHARS)
    if text.startswith(_FORMULA_START) or text.strip().casefold() in {r.casefold() for r in reserved}:
        return "'" + text
    return text


def csv_rows(trusted: list[list[Any]], rows: Iterable[list[Any]], reserved: Iterable[str] = ()) -> str:
    """CSV text (``\\n`` line ends): the kit's own ``trusted`` rows (the header, Canvas' "Points
    Possible") as written, then every other row's cells through :func:`csv_cell`."""
    reserved = tuple(reserved)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerows(trusted)
    for row in rows:
        writer.writerow([csv_cell(v, reserved) for v in row])
    return buf.getvalue()
