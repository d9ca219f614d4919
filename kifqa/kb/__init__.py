"""Knowledge bases through KIF: the :class:`~kifqa.kb.base.KnowledgeBase` interface and its KIF
implementation, KB specs (:mod:`kifqa.kb.spec`), the local builds (Oxigraph store, DBpedia encoding on
Virtuoso) with their label index and search, and the guard around every KB call.

Importing this package registers its KIF plugins, as importing ``kif_lib`` registers KIF's own: the
stores ``kifqa-oxigraph`` and ``kifqa-virtuoso`` and the searches ``kifqa-local`` and ``kifqa-dbpedia``.
"""

from __future__ import annotations

from kifqa.kb import search, store, virtuoso  # noqa: F401 - registers the KIF plugins

__all__: list[str] = []
