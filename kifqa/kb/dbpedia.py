"""The DBpedia-encoded base: the same Wikidata statements converted to DBpedia resources and ontology properties.

A conversion, not a DBpedia dump. Each statement of ``kb_triples.tsv`` whose Wikidata property has an
``owl:equivalentProperty`` in the DBpedia ontology becomes ``dbr:S dbo:p dbr:O``; every item is a
``dbr:`` resource (``a owl:Thing; rdfs:label "…"@en; owl:sameAs wd:Q``) named from its English label as
DBpedia (English Wikipedia) titles pages, disambiguated as Wikipedia does from the item's own statements; no
evaluation file is read. The ontology is loaded as is, plus ``a rdf:Property`` on each of its properties
(what KIF's DBpedia mapping asks).

A build lives in ``<cache_dir>/kb/dbpedia-<hash>/`` (``kb.nt``, ``labels.sqlite``, ``manifest.json``),
written beside the others and switched to atomically when complete, like :mod:`kifqa.kb.build`.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import rdflib
from rdflib.namespace import OWL, RDF, RDFS, XSD

from kifqa.config import Settings
from kifqa.data import paths
from kifqa.data.dbpedia_map import DBpediaLinks, read_links
from kifqa.data.ids import WD
from kifqa.data.ontology import english, read_ontology
from kifqa.data.wikidata import Dataset, ItemRecord, PropertyRecord, Triple
from kifqa.data.wikidata import load as load_wikidata
from kifqa.errors import KBError
from kifqa.kb import index
from kifqa.kb.build import MANIFEST, Build, build_once, kb_dir, read_build

#: The converter's version: part of the build hash.
VERSION = "6"

#: The DBpedia inputs besides the Wikidata ones: the ontology only (no question file of any dataset).
INPUTS = (paths.ONTOLOGY,)

DBR = "http://dbpedia.org/resource/"
DBO = "http://dbpedia.org/ontology/"
#: The named graph the data is loaded into (Virtuoso's endpoint reads all graphs by default).
GRAPH = "urn:kifqa:dbpedia"

#: Characters DBpedia percent-encodes in resource names (its IRIs keep other non-ASCII characters).
_ESCAPED = frozenset('"#%<>?[\\]^`{|}')
#: Properties whose values name what kind of thing their subject is: instance of, occupation.
_TYPE_PROPERTIES = ("P31", "P106")
#: The Wikipedia qualifier a statement of the property implies for its subject, tried in this order after
#: :data:`_TYPE_PROPERTIES`.
_KIND_OF_SUBJECT = {"P57": "film", "P58": "film", "P272": "film", "P344": "film", "P364": "film", "P1040": "film",
                    "P178": "video game", "P404": "video game", "P175": "album", "P50": "novel",
                    "P1303": "musician", "P264": "band"}
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
    """A hash of the converter's and the label index's versions, the Wikidata inputs and the DBpedia inputs."""
    return paths.inputs_digest(data_dir, paths.inputs_digest(data_dir, f"{VERSION}/index-{index.VERSION}"), INPUTS)


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
    ontology = read_ontology(data_dir / paths.ONTOLOGY)
    property_map = _property_map(ontology)
    datatype_only = {str(o)[len(WD):] for o in ontology.objects(None, OWL.equivalentProperty)
                     if str(o).startswith(WD)} - property_map.keys()
    degree = Counter(x for t in wikidata.triples for x in (t.subject, t.value))
    iris, qualified = _resource_iris(wikidata, degree)
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
              "resources": len(iris), "resources_qualified_by_kind": qualified["kind"],
              "resources_qualified_by_id": qualified["id"],
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


def _resource_iris(wikidata: Dataset, degree: Counter[str]) -> tuple[dict[str, str], Counter[str]]:
    """Wikidata item -> unique ``dbr:`` IRI named from its label (unlabelled: ``dbr:Q…``), and how many IRIs got
    a ``kind`` and how many an ``id`` as qualifier. Of the items of one name, the one in most statements (then
    the lowest id) gets the bare title; the others, in the same order, ``Name (kind)`` with the first free kind
    of :func:`_kinds`, else ``Name (Q…)``."""
    items = wikidata.items.keys() | {
        x for t in wikidata.triples for x in (t.subject, t.value)
        if x.startswith("Q") and wikidata.properties[t.property].datatype == "wikibase-item"}
    labels = {q: record.label if (record := wikidata.items.get(q)) else "" for q in items}
    order = sorted(items, key=lambda q: (-degree[q], int(q[1:])))
    first_of_title: dict[str, str] = {}
    for q in order:
        first_of_title.setdefault(resource_name(labels[q] or q), q)
    iris = {q: DBR + title for title, q in first_of_title.items()}
    taken, kinds, qualified = set(iris.values()), _kinds(wikidata), Counter[str]()
    for q in (q for q in order if q not in iris):
        free = [iri for kind in kinds.get(q, ()) if (iri := DBR + resource_name(f"{labels[q]} ({kind})")) not in taken]
        iris[q] = free[0] if free else DBR + resource_name(f"{labels[q]} ({q})")
        qualified["kind" if free else "id"] += 1
        taken.add(iris[q])
    return iris, qualified


def _kinds(wikidata: Dataset) -> dict[str, list[str]]:
    """Item -> the kinds its statements give it, as Wikipedia's title qualifiers: the labels of its
    :data:`_TYPE_PROPERTIES` values ("asteroid", "actor"; for ``… player`` the sport: "baseball"), then the
    kinds of :data:`_KIND_OF_SUBJECT` ("film" for an item with a director)."""
    typed: dict[str, list[tuple[int, str]]] = defaultdict(list)
    properties: dict[str, set[str]] = defaultdict(set)
    for t in wikidata.triples:
        properties[t.subject].add(t.property)
        if t.property in _TYPE_PROPERTIES and (record := wikidata.items.get(t.value)) and record.label:
            typed[t.subject].append((_TYPE_PROPERTIES.index(t.property), record.label.removesuffix(" player")))
    return {q: list(dict.fromkeys([label for _, label in sorted(typed[q], key=lambda x: x[0])]
                                  + [kind for p, kind in _KIND_OF_SUBJECT.items() if p in found]))
            for q, found in properties.items()}


def _item(iri: str, record: ItemRecord | None) -> ItemRecord:
    """The resource ``iri`` named as the Wikidata item ``record`` (unnamed without one)."""
    return ItemRecord(id=iri, label=record.label if record else "", aliases=record.aliases if record else ())


def _property_map(ontology: rdflib.Graph) -> dict[str, str]:
    """Wikidata property id -> DBpedia object property, from ``owl:equivalentProperty``. Among several, the one
    the ontology applies most widely and describes most fully: no ``rdfs:domain`` before one, then a stated
    ``rdfs:range`` before none, then the first by IRI (``dbo:nationality``, not ``dbo:citizenship``, for P27;
    ``dbo:occupation``, not ``dbo:activity``, for P106). No evaluation file takes part in the choice."""
    objects = {str(p) for p in ontology.subjects(RDF.type, OWL.ObjectProperty)}
    candidates: dict[str, list[str]] = {}
    for s, o in ontology.subject_objects(OWL.equivalentProperty):
        if str(o).startswith(WD) and str(s) in objects and str(s).startswith(DBO):
            candidates.setdefault(str(o)[len(WD):], []).append(str(s))

    def preference(iri: str) -> tuple[bool, bool, str]:
        p = rdflib.URIRef(iri)
        return (ontology.value(p, RDFS.domain) is not None, ontology.value(p, RDFS.range) is None, iri)

    return {p: min(found, key=preference) for p, found in sorted(candidates.items())}


def _properties(ontology: rdflib.Graph) -> dict[str, PropertyRecord]:
    """The ontology's ``dbo:`` properties with English label, comment and the KIF datatype of their values."""
    found = {}
    for p in set(ontology.subjects(RDF.type, RDF.Property)):
        iri = str(p)
        if not iri.startswith(DBO):
            continue
        found[iri] = PropertyRecord(id=iri, label=english(ontology, p, RDFS.label), aliases=(),
                                    description=english(ontology, p, RDFS.comment),
                                    datatype=_datatype(ontology, p))
    return found


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
