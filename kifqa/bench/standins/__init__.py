"""Stand-ins for the public services ``--kb wikidata`` and ``--kb dbpedia`` query, on 127.0.0.1 over the local
builds, speaking the services' own request and answer shapes (``kb.endpoints`` points kifqa at them):

- :class:`~kifqa.bench.standins.wikidata_api.WikidataAPILike`: the Wikidata API's ``wbsearchentities`` and
  ``wbgetentities``, its ``maxlag`` refusals and a per-client rate;
- :class:`~kifqa.bench.wdqs_like.WDQSLike` with ``dialect="blazegraph"``: WDQS's budget in front of a standard
  SPARQL engine, its Blazegraph dialect rewritten (:mod:`kifqa.bench.standins.blazegraph`);
- :class:`~kifqa.bench.standins.dbpedia_lookup.DBpediaLookupLike`: DBpedia Lookup's ``/api/search``.

Each counts what a service would hold against a client: requests sent while a ``Retry-After`` it had received
still ran (:class:`~kifqa.bench.standins.ledger.Ledger`).
"""
