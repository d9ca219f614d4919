"""WDQS's Blazegraph dialect, as KIF's ``wdqs`` store writes it, rewritten into standard SPARQL 1.1 so that a
standard engine (the local Oxigraph) can answer it:

- named subqueries: ``WITH { SELECT ... } AS %name`` before ``WHERE``, and ``INCLUDE %name`` inside it, become
  the subquery itself at the ``INCLUDE`` (``{ SELECT ... }``);
- ``wikibase:isSomeValue(?x)`` becomes what it means on a dump: ``?x`` is a blank node or a
  ``.well-known/genid/`` IRI (the test KIF's standard mapping makes).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kifqa.errors import KBError

#: What may hold a brace without opening or closing a group: strings, IRIs, comments.
_OPAQUE = re.compile(r'"""(?:[^"\\]|\\.|"(?!""))*"""|\'\'\'(?:[^\'\\]|\\.|\'(?!\'\'))*\'\'\''
                     r'|"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|<[^<>"{}|^`\\\x00-\x20]*>|#[^\n]*')
_WITH = re.compile(r"\bWITH\s*\{", re.IGNORECASE)
_AS_NAME = re.compile(r"\s*AS\s+%(\w+)", re.IGNORECASE)
_INCLUDE = re.compile(r"\bINCLUDE\s+%(\w+)", re.IGNORECASE)
_IS_SOME_VALUE = re.compile(r"(?:<http://wikiba\.se/ontology#isSomeValue>|\bwikibase:isSomeValue)\s*\(\s*(\?\w+)\s*\)")
_GENID = "http://www.wikidata.org/.well-known/genid/"


def is_blazegraph(query: str) -> bool:
    """Whether ``query`` uses the Blazegraph dialect (named subqueries or ``wikibase:isSomeValue``)."""
    return bool(_find(_WITH, query) or _find(_IS_SOME_VALUE, query))


def to_standard(query: str) -> str:
    """``query`` in standard SPARQL 1.1 (see the module doc); :class:`KBError` for a named subquery it cannot
    read (unclosed, unnamed, or included but never defined)."""
    named: dict[str, str] = {}
    while (found := _find(_WITH, query)) is not None:
        start, brace = found.start(), found.end() - 1
        end = _closing(query, brace)
        name = _AS_NAME.match(query, end + 1)
        if name is None:
            raise KBError("a Blazegraph named subquery (WITH { ... }) without `AS %name`")
        named[name.group(1)] = query[brace + 1:end].strip()
        query = query[:start] + query[name.end():]

    def include(m: re.Match[str]) -> str:
        if m.group(1) not in named:
            raise KBError(f"INCLUDE %{m.group(1)} of a named subquery the query does not define")
        return "{ " + named[m.group(1)] + " }"

    query = _sub_outside(_INCLUDE, include, query)
    return _sub_outside(_IS_SOME_VALUE, _some_value, query)


def _some_value(m: re.Match[str]) -> str:
    return f'(isBlank({m[1]}) || (isIRI({m[1]}) && STRSTARTS(STR({m[1]}), "{_GENID}")))'


def _sub_outside(pattern: re.Pattern[str], replace: Callable[[re.Match[str]], str], query: str) -> str:
    """``pattern.sub(replace, query)`` on the matches outside strings, IRIs and comments."""
    return pattern.sub(lambda m: m[0] if _opaque_at(query, m.start()) is not None else replace(m), query)


def _find(pattern: re.Pattern[str], query: str) -> re.Match[str] | None:
    """The first match of ``pattern`` outside strings, IRIs and comments."""
    position = 0
    while (m := pattern.search(query, position)) is not None:
        opaque = _opaque_at(query, m.start())
        if opaque is None:
            return m
        position = opaque
    return None


def _opaque_at(query: str, index: int) -> int | None:
    """The end of the string, IRI or comment ``index`` lies inside (after its first character), if any."""
    for o in _OPAQUE.finditer(query):
        if o.start() >= index:
            return None
        if index < o.end():
            return o.end()
    return None


def _closing(query: str, brace: int) -> int:
    """The index of the ``}`` that closes the ``{`` at ``brace``."""
    depth, i = 0, brace
    while i < len(query):
        if (o := _OPAQUE.match(query, i)) is not None and o.end() > i:
            i = o.end()
            continue
        depth += {"{": 1, "}": -1}.get(query[i], 0)
        if depth == 0:
            return i
        i += 1
    raise KBError("a Blazegraph named subquery (WITH { ... }) that is never closed")
