"""The DBpedia-encoded base: the same Wikidata statements converted to DBpedia resources and ontology properties.

A conversion, not a DBpedia dump. Each statement of ``kb_triples.tsv`` whose Wikidata property has an
``owl:equivalentProperty`` in the DBpedia ontology becomes ``dbr:S dbo:p dbr:O``; every item is a
``dbr:`` resource (``a owl:Thing; rdfs:label "…"@en; owl:sameAs wd:Q``) named by SimpleDBpediaQA where
a question of both datasets links them, else from its English label as DBpedia names pages; the ontology
is loaded as is, plus ``a rdf:Property`` on each of its properties (what KIF's DBpedia mapping asks).

A build lives in ``<cache_dir>/kb/dbpedia-<hash>/`` (``kb.nt``, ``labels.sqlite``, ``manifest.json``),
written beside the others and switched to atomically when complete, like :mod:`kifqa.kb.build`.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import rdflib
from rdflib.namespace import OWL, RDF, RDFS, XSD

from kifqa.config import Settings
from kifqa.data import paths
from kifqa.data.dbpedia_map import DBpediaLinks, read_links
from kifqa.data.ids import WD
from kifqa.data.sdbqa import read_sdbqa
from kifqa.data.sqwd import read_sqwd
from kifqa.data.text import question_key
from kifqa.data.wikidata import Dataset, ItemRecord, PropertyRecord, Triple
from kifqa.data.wikidata import load as load_wikidata
from kifqa.errors import DataError, KBError
from kifqa.kb import index
from kifqa.kb.build import MANIFEST, Build, build_once, kb_dir, read_build

#: The converter's version: part of the build hash.
VERSION = "4"

SDBQA = paths.sdbqa("valid")
#: The DBpedia inputs; the SimpleQuestions-Wikidata questions are matched to SimpleDBpediaQA's to link
#: items to real DBpedia IRIs.
INPUTS = (paths.ONTOLOGY, SDBQA, *(paths.sqwd(split) for split in paths.SQWD_SPLITS))

DBR = "http://dbpedia.org/resource/"
DBO = "http://dbpedia.org/ontology/"
#: The named graph the data is loaded into (Virtuoso's endpoint reads all graphs by default).
GRAPH = "urn:kifqa:dbpedia"

#: Characters DBpedia percent-encodes in resource names (its IRIs keep other non-ASCII characters).
_ESCAPED = frozenset('"#%<>?[\\]^`{|}')
_NUMERIC = {XSD.decimal, XSD.double, XSD.float, XSD.integer, XSD.nonNegativeInteger, XSD.positiveInteger,
            XSD.nonPositiveInteger, XSD.negativeInteger, XSD.int, XSD.long}


class DBpediaBuild(Build):
    """A complete build of the DBpedia-encoded base (N-Triples for Virtuoso + label index)."""

    def complete(self) -> bool:
        return self.rdf_path.is_file() and super().complete()

    def links(self) -> DBpediaLinks:
        """The resource and property links the conversion made."""
        return read_links(self.manifest)


def resource_name(label: str) -> str:
    """A page name as DBpedia writes it in an IRI: spaces as underscores, first letter upper-cased,
    ``"#%<>?[\\]^`{|}`` and control characters percent-encoded."""
    name = "_".join(label.replace("_", " ").split())
    name = name[:1].upper() + name[1:]
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED or ord(c) < 0x20 else c for c in name)


def inputs_digest(data_dir: Path) -> str:
    """A hash of the converter's version, the Wikidata inputs and the DBpedia inputs."""
    return paths.inputs_digest(data_dir, paths.inputs_digest(data_dir, VERSION), INPUTS)


def locate(settings: Settings) -> DBpediaBuild:
    """The DBpedia build of the current data folder; :class:`KBError` if there is none."""
    digest = inputs_digest(settings.data_dir)
    built = read_build(DBpediaBuild, _final(settings, digest), digest)
    if built is None:
        raise KBError(f"no DBpedia-encoded knowledge base is built for the data in {settings.data_dir} "
                      f"(hash {digest}); run `kifqa kb build --encoding dbpedia`")
    return built


def build(settings: Settings, *, force: bool = False) -> tuple[DBpediaBuild, bool]:
    """Builds the DBpedia-encoded base unless an identical build exists; returns it and whether it was built now."""
    digest = inputs_digest(settings.data_dir)
    return build_once(DBpediaBuild, _final(settings, digest), digest,
                      lambda root: _write(root, settings.data_dir, digest), force=force)


def _final(settings: Settings, digest: str) -> Path:
    return kb_dir(settings) / f"dbpedia-{digest}"


@dataclass(frozen=True)
class Conversion:
    """The converted base: label-index dataset (ids are IRIs), ontology graph and counts."""

    dataset: Dataset
    ontology: rdflib.Graph
    property_map: dict[str, str]
    #: Wikidata item -> ``dbr:`` IRI.
    resources: dict[str, str]
    counts: dict[str, int]


def convert(data_dir: Path) -> Conversion:
    """Converts the data folder's statements and items to the DBpedia encoding."""
    wikidata = load_wikidata(data_dir)
    ontology = _read_ontology(data_dir / paths.ONTOLOGY)
    questions = _read_sdbqa(data_dir / SDBQA)
    property_map = _property_map(ontology)
    datatype_only = {str(o)[len(WD):] for o in ontology.objects(None, OWL.equivalentProperty)
                     if str(o).startswith(WD)} - property_map.keys()
    degree = Counter(x for t in wikidata.triples for x in (t.subject, t.value))
    iris, real = _resource_iris(wikidata, _sdbqa_links(data_dir, questions), degree)
    triples, skipped = [], Counter[str]()
    for t in wikidata.triples:
        dbo = property_map.get(t.property)
        if dbo is None:
            skipped["datatype_property" if t.property in datatype_only else "no_equivalent_property"] += 1
        elif wikidata.properties[t.property].datatype != "wikibase-item" or t.subject not in iris:
            skipped["not_item_to_item"] += 1
        else:
            triples.append(Triple(subject=iris[t.subject], property=dbo, value=iris[t.value], line=t.line))
    items = {iri: _item(iri, wikidata.items.get(q)) for q, iri in iris.items()}
    counts = {"wikidata_statements": len(wikidata.triples), "statements": len(triples),
              "statements_without_dbpedia_property": skipped["no_equivalent_property"],
              "statements_with_datatype_property_only": skipped["datatype_property"],
              "statements_not_item_to_item": skipped["not_item_to_item"],
              "resources": len(iris), "resources_with_sdbqa_iri": real, "resources_named_from_label": len(iris) - real,
              "mapped_wikidata_properties": len(property_map)}
    return Conversion(Dataset(items, _properties(ontology), triples), ontology, property_map, iris, counts)


def rdf_lines(conversion: Conversion) -> Iterator[str]:
    """The N-Triples of the base: ontology (with ``a rdf:Property``), resources, statements."""
    yield from (line + "\n" for line in conversion.ontology.serialize(format="nt").splitlines() if line)
    a, thing, label, same = f"<{RDF.type}>", f"<{OWL.Thing}>", f"<{RDFS.label}>", f"<{OWL.sameAs}>"
    for iri, item in conversion.dataset.items.items():
        yield f"<{iri}> {a} {thing} .\n"
        if item.label:
            yield f"<{iri}> {label} {json.dumps(item.label, ensure_ascii=False)}@en .\n"
    yield from (f"<{iri}> {same} <{WD}{q}> .\n" for q, iri in conversion.resources.items())
    yield from (f"<{t.subject}> <{t.property}> <{t.value}> .\n" for t in conversion.dataset.triples)


def _write(root: Path, data_dir: Path, digest: str) -> None:
    started = time.perf_counter()
    conversion = convert(data_dir)
    built = DBpediaBuild(root, {})
    rdf_triples = 0
    with open(built.rdf_path, "w", encoding="utf-8") as f:
        for line in rdf_lines(conversion):
            f.write(line)
            rdf_triples += 1
    index_counts = index.build(built.index_path, conversion.dataset)
    manifest = {
        "hash": digest,
        "version": VERSION,
        "encoding": "dbpedia",
        "data_dir": str(data_dir),
        "graph": GRAPH,
        "built_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": round(time.perf_counter() - started, 2),
        "counts": {**conversion.counts, "rdf_triples": rdf_triples, "ontology_triples": len(conversion.ontology),
                   "indexed_items": index_counts["items"], "indexed_properties": index_counts["properties"]},
        "property_map": conversion.property_map,
        "resources": conversion.resources,
    }
    (root / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")


# -- reading -----------------------------------------------------------------


def _read_ontology(path: Path) -> rdflib.Graph:
    graph = rdflib.Graph()
    try:
        graph.parse(path, format="turtle")
    except Exception as err:
        raise DataError(f"{path} is not valid Turtle: {err}") from err
    for kind in (OWL.ObjectProperty, OWL.DatatypeProperty):
        for p in graph.subjects(RDF.type, kind):
            graph.add((p, RDF.type, RDF.Property))
    return graph


def _read_sdbqa(path: Path) -> list[dict[str, Any]]:
    error = DataError(f"{path}: expected SimpleDBpediaQA JSON "
                      "{'Questions': [{'Query', 'Subject', 'PredicateList': [{'Predicate', ...}]}]}")
    questions = read_sdbqa(path)
    try:
        if all(isinstance(q["Subject"], str) and isinstance(q["Query"], str)
               and all(isinstance(p["Predicate"], str) for p in q["PredicateList"]) for q in questions):
            return list(questions)
    except (KeyError, TypeError) as err:
        raise error from err
    raise error


def _sdbqa_links(data_dir: Path, questions: list[dict[str, Any]]) -> dict[str, str]:
    """Wikidata item -> DBpedia IRI, where a SimpleQuestions question is in both datasets (its topic entity
    is column 1 of SimpleQuestions-Wikidata and the ``Subject`` of SimpleDBpediaQA); most frequent pairs win,
    each item and each IRI used once."""
    subjects = {question_key(q["Query"]): q["Subject"] for q in questions}
    pairs: Counter[tuple[str, str]] = Counter()
    for split in paths.SQWD_SPLITS:
        for row in read_sqwd(data_dir, split):
            if (iri := subjects.get(question_key(row.question))) is not None:
                pairs[row.topic, iri] += 1
    links: dict[str, str] = {}
    used: set[str] = set()
    for (q, iri), _ in sorted(pairs.items(), key=lambda x: (-x[1], x[0])):
        if q not in links and iri not in used:
            links[q] = iri
            used.add(iri)
    return links


def _resource_iris(wikidata: Dataset, links: dict[str, str], degree: Counter[str]) -> tuple[dict[str, str], int]:
    """Wikidata item -> unique ``dbr:`` IRI: SimpleDBpediaQA's first, then names from labels (the item in more
    statements first; a name already taken gets `` (Q…)``); and how many IRIs are SimpleDBpediaQA's."""
    items = wikidata.items.keys() | {
        x for t in wikidata.triples for x in (t.subject, t.value)
        if x.startswith("Q") and wikidata.properties[t.property].datatype == "wikibase-item"}
    iris = {q: iri for q, iri in links.items() if q in items}
    taken = set(iris.values())
    for q in sorted(items - iris.keys(), key=lambda q: (-degree[q], int(q[1:]))):
        record = wikidata.items.get(q)
        name = resource_name(record.label) if record and record.label else q
        iri = DBR + name
        if iri in taken:
            iri = DBR + resource_name(f"{record.label if record else ''} ({q})")
        iris[q] = iri
        taken.add(iri)
    return iris, len(links.keys() & iris.keys())


def _item(iri: str, record: ItemRecord | None) -> ItemRecord:
    """The resource ``iri`` named as the Wikidata item ``record`` (unnamed without one)."""
    return ItemRecord(id=iri, label=record.label if record else "", aliases=record.aliases if record else ())


def _property_map(ontology: rdflib.Graph) -> dict[str, str]:
    """Wikidata property id -> DBpedia object property, from ``owl:equivalentProperty``; among several, the
    first by IRI (the ontology lists its properties in that order). No evaluation split takes part in the choice."""
    objects = {str(p) for p in ontology.subjects(RDF.type, OWL.ObjectProperty)}
    candidates: dict[str, list[str]] = {}
    for s, o in ontology.subject_objects(OWL.equivalentProperty):
        if str(o).startswith(WD) and str(s) in objects and str(s).startswith(DBO):
            candidates.setdefault(str(o)[len(WD):], []).append(str(s))
    return {p: min(found) for p, found in sorted(candidates.items())}


def _properties(ontology: rdflib.Graph) -> dict[str, PropertyRecord]:
    """The ontology's ``dbo:`` properties with English label, comment and the KIF datatype of their values."""
    found = {}
    for p in set(ontology.subjects(RDF.type, RDF.Property)):
        iri = str(p)
        if not iri.startswith(DBO):
            continue
        found[iri] = PropertyRecord(id=iri, label=_english(ontology, p, RDFS.label), aliases=(),
                                    description=_english(ontology, p, RDFS.comment),
                                    datatype=_datatype(ontology, p))
    return found


def _english(graph: rdflib.Graph, subject: rdflib.term.Node, predicate: rdflib.URIRef) -> str:
    texts = [o for o in graph.objects(subject, predicate) if isinstance(o, rdflib.Literal)]
    best = [o for o in texts if o.language == "en"] or [o for o in texts if not o.language]
    return " ".join(str(min(best)).split()) if best else ""


def _datatype(graph: rdflib.Graph, p: rdflib.term.Node) -> str:
    """The Wikidata datatype name KIF reads the property's values as."""
    if (p, RDF.type, OWL.ObjectProperty) in graph:
        return "wikibase-item"
    ranges = set(graph.objects(p, RDFS.range))
    if ranges & _NUMERIC:
        return "quantity"
    if XSD.date in ranges:
        return "time"
    if RDF.langString in ranges:
        return "monolingualtext"
    return "string"
