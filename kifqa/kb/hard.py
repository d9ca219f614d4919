"""The hard base: every real statement plus synthetic distractors, so that items look as crowded as on Wikidata.

Synthetic, seeded and deterministic; built from the data folder's statements, labels and properties and
the DBpedia ontology only (no evaluation split's questions or gold take part):

- **kinds.** An item's kind is a DBpedia class, from the ``rdfs:domain`` (as subject) and ``rdfs:range``
  (as value) of the ontology properties ``owl:equivalentProperty`` to its real properties, refined by
  co-occurrence over the whole base: a (property, direction) takes the deepest class that at least a fifth
  of the items carrying it have (P19 forward: a person, not any animal). Items none of whose properties
  has a class get a kind named after their commonest (property, direction).
- **profile of a kind.** The (property, direction) pairs its items carry in the data; the ontology's
  equivalent properties whose domain (forward) or range (backward) is the class or one of its ancestors
  (dates, quantities and identifiers among them); and :data:`_IDS_PER_KIND` external identifiers of
  ``properties_en.json`` whose description names the class (``identifier for a film ...``).
- **fan-out.** Each item with statements gets pairs of its kind's profile that it lacks, up to a seeded
  target (median :data:`_MEDIAN_PAIRS`): a forward pair ``(item, p, value)`` takes its value from ``p``'s
  real values (so hubs such as countries gain backlinks), else from the items of the range class, else a
  synthetic date, number or identifier; a backward pair ``(subject, p, item)`` takes a subject of a kind
  that carries ``p`` forward. A synthetic statement never gives an item a property it has in the data
  as subject: real facts keep their real answers.
- **homonyms.** For a seeded :data:`_HOMONYM_SHARE` of the labels of items with statements, 1-5
  synthetic items (ids from :data:`SYNTHETIC_BASE` up, far above Wikidata's) carry the label (or, one
  in four, another data label with it as an alias), each of its own kind (half the original's) with a
  fan-out of its own.
"""

from __future__ import annotations

import hashlib
import heapq
import json
import math
import random
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import rdflib
from rdflib.namespace import OWL, RDFS

from kifqa.data import paths
from kifqa.data.ids import WD
from kifqa.data.sqwd import read_sqwd
from kifqa.data.text import index_key
from kifqa.data.wikidata import Dataset, ItemRecord, Triple
from kifqa.errors import DataError

#: The generator's version and seed: part of the hard build's hash.
VERSION = "1"
SEED = 23
#: Synthetic item ids are ``Q<SYNTHETIC_BASE + n>``: Wikidata's ids are below 200,000,000.
SYNTHETIC_BASE = 1_000_000_000
#: Distractor files of the build folder.
DISTRACTORS = "distractors.tsv"
DISTRACTOR_LABELS = "distractor_labels.json"

DBO = "http://dbpedia.org/ontology/"
_DATATYPES = {"wikibase-item", "external-id", "string", "quantity", "time"}
_MEDIAN_PAIRS = 22
_SIGMA = 0.75
_MAX_PAIRS = 110
_HOMONYM_SHARE = 0.3
_HOMONYM_COUNTS = (1, 2, 3, 4, 5)
_HOMONYM_WEIGHTS = (0.45, 0.25, 0.15, 0.1, 0.05)
_HOMONYM_MEDIAN_PAIRS = 8
_IDS_PER_KIND = 20
#: A class a (property, direction) takes must be the kind of at least this share of the items carrying it.
_REFINE_SHARE = 0.2

Pair = tuple[str, str]  # (property, "forward" | "backward")
_WORDS = re.compile(r"\w+")


@dataclass(frozen=True)
class Distractors:
    """What the hard base adds to the real one."""

    triples: list[Triple]
    #: The synthetic items (homonyms), with their names.
    items: dict[str, ItemRecord]
    #: Kind (class or pseudo-kind) of each item with statements and each synthetic item.
    kinds: dict[str, str]

    def extend(self, data: Dataset) -> Dataset:
        """``data`` with the distractors added (its own statements and items unchanged)."""
        return Dataset({**data.items, **self.items}, data.properties, [*data.triples, *self.triples])

    def write(self, root: Path) -> None:
        """``distractors.tsv`` (the added statements) and ``distractor_labels.json`` (the added items)."""
        with open(root / DISTRACTORS, "w", encoding="utf-8") as f:
            f.writelines(f"{t.subject}\t{t.property}\t{t.value}\n" for t in self.triples)
        labels = {id: [r.label, *r.aliases] for id, r in self.items.items()}
        (root / DISTRACTOR_LABELS).write_text(json.dumps(labels, ensure_ascii=False, indent=0) + "\n",
                                              encoding="utf-8")


def read_exports(root: Path) -> tuple[list[tuple[str, str, str]], dict[str, list[str]]]:
    """The added statements and the added items' names that a hard build folder exports."""
    try:
        with open(root / DISTRACTORS, encoding="utf-8") as f:
            statements = [tuple(line.rstrip("\n").split("\t")) for line in f if line.strip()]
        names = json.loads((root / DISTRACTOR_LABELS).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise DataError(f"cannot read the distractors of the hard base in {root} ({err}); "
                        "rebuild it with `kifqa kb build --hard --force`") from err
    return statements, names  # type: ignore[return-value]


@dataclass(frozen=True)
class _Ontology:
    #: Wikidata property -> (domain classes, range classes) of its DBpedia equivalents.
    classes: dict[str, tuple[frozenset[str], frozenset[str]]]
    #: Class -> itself and its ancestors.
    ancestors: dict[str, frozenset[str]]
    labels: dict[str, str]

    def up(self, c: str) -> frozenset[str]:
        return self.ancestors.get(c, frozenset((c,)))

    def depth(self, c: str) -> int:
        return len(self.up(c))


def read_ontology(path: Path) -> _Ontology:
    graph = rdflib.Graph()
    try:
        graph.parse(path, format="turtle")
    except Exception as err:
        raise DataError(f"{path} is not valid Turtle: {err}") from err
    parents: dict[str, set[str]] = defaultdict(set)
    for s, o in graph.subject_objects(RDFS.subClassOf):
        if str(s).startswith(DBO) and str(o).startswith(DBO):
            parents[str(s)[len(DBO):]].add(str(o)[len(DBO):])
    ancestors: dict[str, frozenset[str]] = {}

    def up(c: str, seen: frozenset[str] = frozenset()) -> frozenset[str]:
        if c not in ancestors:
            found = {c}
            for p in parents.get(c, ()):
                if p not in seen:
                    found |= up(p, seen | {c})
            ancestors[c] = frozenset(found)
        return ancestors[c]

    classes: dict[str, tuple[set[str], set[str]]] = defaultdict(lambda: (set(), set()))
    for s, o in graph.subject_objects(OWL.equivalentProperty):
        if not str(o).startswith(WD):
            continue
        domains, ranges = classes[str(o)[len(WD):]]
        domains.update(str(d)[len(DBO):] for d in graph.objects(s, RDFS.domain) if str(d).startswith(DBO))
        ranges.update(str(r)[len(DBO):] for r in graph.objects(s, RDFS.range) if str(r).startswith(DBO))
    labels = {str(c)[len(DBO):]: str(label) for c, label in graph.subject_objects(RDFS.label)
              if str(c).startswith(DBO) and getattr(label, "language", None) == "en"}
    for c in {*parents, *(c for d, r in classes.values() for c in d | r)}:
        up(c)
    return _Ontology({p: (frozenset(d), frozenset(r)) for p, (d, r) in classes.items()}, ancestors, labels)


def generate(data: Dataset, ontology: _Ontology, *, seed: int = SEED) -> Distractors:
    """The distractors of ``data`` (deterministic for a seed)."""
    return _Generator(data, ontology, seed).run()


class _Generator:
    def __init__(self, data: Dataset, ontology: _Ontology, seed: int) -> None:
        self.data, self.ontology, self.seed = data, ontology, seed
        self.rng = random.Random(seed)
        self.pairs: dict[str, set[Pair]] = defaultdict(set)
        #: Property -> the values an item statement may take: its real values (with their multiplicity,
        #: so hubs gain the most backlinks), else the items of its range class (filled on first use).
        self.values: dict[str, list[str]] = {}
        for t in data.triples:
            self.pairs[t.subject].add((t.property, "forward"))
            if data.properties[t.property].datatype == "wikibase-item":
                self.pairs[t.value].add((t.property, "backward"))
                self.values.setdefault(t.property, []).append(t.value)
        self.real_forward = {id: {p for p, d in ps if d == "forward"} for id, ps in self.pairs.items()}
        self.added: list[Triple] = []
        self.seen: set[tuple[str, str, str]] = {(t.subject, t.property, t.value) for t in data.triples}

    def run(self) -> Distractors:
        kinds = self._kinds()
        profiles = self._profiles(kinds)
        members: dict[str, list[str]] = defaultdict(list)  # class -> items of it or a subclass
        by_kind: dict[str, list[str]] = defaultdict(list)
        for id in sorted(kinds, key=_id_order):
            by_kind[kinds[id]].append(id)
            for c in self.ontology.up(kinds[id]) if not kinds[id].startswith("~") else ():
                members[c].append(id)
        subjects: dict[str, list[str]] = defaultdict(list)  # property -> items whose kind carries it forward
        for kind, pairs in sorted(profiles.items()):
            for p, d in pairs:
                if d == "forward":
                    subjects[p].extend(by_kind[kind])
        self.members, self.subjects, self.profiles = members, subjects, profiles
        for id in sorted(kinds, key=_id_order):
            self._fan_out(id, kinds[id], _MEDIAN_PAIRS)
        items = self._homonyms(kinds, by_kind)
        return Distractors(self.added, items, kinds)

    # --- kinds -------------------------------------------------------------------------------------

    def _direct(self, pair: Pair) -> frozenset[str]:
        domains, ranges = self.ontology.classes.get(pair[0], (frozenset(), frozenset()))
        return domains if pair[1] == "forward" else ranges

    def _deepest(self, classes: Iterable[str]) -> str | None:
        return max(classes, key=lambda c: (self.ontology.depth(c), c), default=None)

    def _kinds(self) -> dict[str, str]:
        first = {id: self._deepest(c for pair in pairs for c in self._direct(pair)) for id, pairs in self.pairs.items()}
        carriers: dict[Pair, Counter[str]] = defaultdict(Counter)
        for id, pairs in self.pairs.items():
            kind = first[id]
            if kind and len(pairs) > 1:  # co-occurrence: only items with other pairs say more
                for pair in pairs:
                    carriers[pair].update(self.ontology.up(kind))  # inclusive votes: a subclass counts
        refined: dict[Pair, str] = {}
        for pair in frequency_of(self.pairs):
            votes = carriers.get(pair)
            direct = self._deepest(self._direct(pair)) or ""
            if not votes:
                refined[pair] = direct
                continue
            total = max(votes.values())
            refined[pair] = self._deepest(c for c, n in votes.items() if n >= _REFINE_SHARE * total) or direct
        frequency = frequency_of(self.pairs)
        kinds = {}
        for id, pairs in self.pairs.items():
            votes = Counter(refined[p] for p in pairs if refined.get(p))
            kind = max(votes, key=lambda c: (votes[c], self.ontology.depth(c), c), default=None)
            if kind is None:
                p, d = max(pairs, key=lambda pair: (frequency[pair], pair))
                kind = f"~{p}:{d}"
            kinds[id] = kind
        return kinds

    def _profiles(self, kinds: dict[str, str]) -> dict[str, dict[Pair, float]]:
        """Each kind's (property, direction) pairs with a weight: how many of its items carry them in the
        data, else 1 (the ontology's and the identifiers)."""
        carried: dict[str, Counter[Pair]] = defaultdict(Counter)
        for id, kind in kinds.items():
            carried[kind].update(self.pairs[id])
        usable = {p for p, r in self.data.properties.items() if r.datatype in _DATATYPES}
        self._external = [(p.id, f" {' '.join(_WORDS.findall(p.description.lower()))} ")
                          for p in self.data.properties.values() if p.datatype == "external-id" and p.description]
        self._ids: dict[str, list[str]] = {}
        profiles: dict[str, dict[Pair, float]] = {}
        for kind, counts in sorted(carried.items()):
            profile: dict[Pair, float] = {pair: float(n) for pair, n in counts.items() if n >= 2 or len(counts) < 5}
            up = self.ontology.up(kind) if not kind.startswith("~") else frozenset()
            for p, (domains, ranges) in sorted(self.ontology.classes.items()):
                if p not in usable:
                    continue
                if not domains or domains & up:  # a property without a domain fits any kind
                    profile.setdefault((p, "forward"), 1.0)
                if ranges & up and self.data.properties[p].datatype == "wikibase-item":
                    profile.setdefault((p, "backward"), 1.0)
            if up:
                for p in next((found for c in sorted(up, key=lambda c: (-self.ontology.depth(c), c))
                               if (found := self._identifiers(c))), []):
                    profile.setdefault((p, "forward"), 1.0)
            profiles[kind] = dict(sorted(profile.items()))  # an order of its own, not the sets' (hash-seeded)
        return profiles

    def _identifiers(self, c: str) -> list[str]:
        """:data:`_IDS_PER_KIND` external-identifier properties whose description names the class ``c``
        (fewer than that: none)."""
        if c not in self._ids:
            phrase = f" {' '.join(_WORDS.findall(self.ontology.labels.get(c, '').lower()))} "
            matching = sorted((p for p, text in self._external if phrase.strip() and phrase in text), key=_id_order)
            self._ids[c] = (random.Random(f"{self.seed}:{c}").sample(matching, _IDS_PER_KIND)
                            if len(matching) >= _IDS_PER_KIND else [])
        return self._ids[c]

    # --- statements --------------------------------------------------------------------------------

    def _target(self, median: int) -> int:
        return min(_MAX_PAIRS, max(4, round(median * math.exp(self.rng.gauss(0, _SIGMA)))))

    def _fan_out(self, id: str, kind: str, median: int) -> None:
        have = self.pairs[id]
        missing = [(pair, w) for pair, w in self.profiles.get(kind, {}).items() if pair not in have]
        want = self._target(median) - len(have)
        if want <= 0 or not missing:
            return
        # weighted sampling without replacement (Efraimidis-Spirakis: the largest log(u) / w)
        random_ = self.rng.random
        keyed = heapq.nlargest(want, ((math.log(1.0 - random_()) / w, pair) for pair, w in missing))
        for _, pair in keyed:
            self._realise(id, pair)

    def _realise(self, id: str, pair: Pair) -> None:
        p, direction = pair
        if direction == "forward":
            if p in self.real_forward.get(id, ()):
                return
            value = self._value(p, id)
            if value is not None:
                self._add(id, p, value)
            return
        pool = self.subjects.get(p, ())
        for _ in range(4):
            if not pool:
                return
            subject = pool[self.rng.randrange(len(pool))]
            if subject != id and p not in self.real_forward.get(subject, ()):
                self._add(subject, p, id)
                return

    def _value(self, p: str, subject: str) -> str | None:
        datatype = self.data.properties[p].datatype
        rng = self.rng
        if datatype == "wikibase-item":
            pool = self.values.get(p)
            if pool is None:
                ranges = sorted(self.ontology.classes.get(p, ((), ()))[1])
                pool = self.values[p] = [m for c in ranges for m in self.members.get(c, ())]
            if not pool:
                return None
            value = pool[rng.randrange(len(pool))]
            return value if value != subject else None
        if datatype == "time":
            return f"{rng.randint(1700, 2020)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        if datatype == "quantity":
            return str(round(10 ** rng.uniform(0, 6), rng.choice((0, 0, 1, 2))))
        if datatype == "external-id":
            return str(rng.randrange(10 ** 5, 10 ** 9))
        return "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(3))  # string: a code

    def _add(self, s: str, p: str, o: str) -> None:
        if (s, p, o) in self.seen:
            return
        self.seen.add((s, p, o))
        self.added.append(Triple(subject=s, property=p, value=o, line=0))
        self.pairs[s].add((p, "forward"))
        if self.data.properties[p].datatype == "wikibase-item":
            self.pairs[o].add((p, "backward"))

    # --- homonyms ----------------------------------------------------------------------------------

    def _homonyms(self, kinds: dict[str, str], by_kind: dict[str, list[str]]) -> dict[str, ItemRecord]:
        labelled = sorted((id for id in kinds if self.data.items.get(id) and self.data.items[id].label), key=_id_order)
        by_label: dict[str, str] = {}
        for id in labelled:
            by_label.setdefault(index_key(self.data.items[id].label), id)
        kind_names = sorted(by_kind)
        kind_sizes = [len(by_kind[k]) for k in kind_names]
        items: dict[str, ItemRecord] = {}
        next_id = SYNTHETIC_BASE
        for key, original in sorted(by_label.items()):
            if _chance(f"{self.seed}:homonym:{key}") >= _HOMONYM_SHARE:
                continue
            label = self.data.items[original].label
            for _ in range(self.rng.choices(_HOMONYM_COUNTS, _HOMONYM_WEIGHTS)[0]):
                next_id += 1
                id = f"Q{next_id}"
                if self.rng.random() < 0.25:
                    other = self.data.items[labelled[self.rng.randrange(len(labelled))]].label
                    record = ItemRecord(id=id, label=other, aliases=(label,) if index_key(other) != key else ())
                else:
                    record = ItemRecord(id=id, label=label, aliases=())
                items[id] = record
                kind = kinds[original] if self.rng.random() < 0.5 else self.rng.choices(kind_names, kind_sizes)[0]
                kinds[id] = kind
                self._fan_out(id, kind, _HOMONYM_MEDIAN_PAIRS)
        return items


def frequency_of(pairs: dict[str, set[Pair]]) -> Counter[Pair]:
    return Counter(pair for found in pairs.values() for pair in found)


def _chance(key: str) -> float:
    """A number in [0, 1) fixed by ``key`` (not by the order things are drawn in)."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2 ** 64


def _id_order(id: str) -> tuple[int, str]:
    return (int(id[1:]), id) if id[1:].isdigit() else (0, id)


# --- statistics ------------------------------------------------------------------------------------

def test_topics(data_dir: Path, data: Dataset) -> list[str]:
    """The topics of SimpleQuestions-Wikidata's test split, which the data folder holds only as statements:
    each statement of ``kb_triples.tsv`` that no train or valid question asks about, its subject when
    train's questions about its property mostly ask for the value, else its value (none without the
    train and valid files). Statistics only."""
    if not all((data_dir / paths.sqwd(split)).is_file() for split in paths.SQWD_SPLITS):
        return []
    asked, forward = set(), Counter[str]()
    for split in paths.SQWD_SPLITS:
        for row in read_sqwd(data_dir, split):
            p, inverse = "P" + row.property[1:], row.property.startswith("R")
            asked.add((row.answer, p, row.topic) if inverse else (row.topic, p, row.answer))
            if split == "train":
                forward[p] += -1 if inverse else 1
    return [t.value if forward[t.property] < 0 else t.subject
            for t in data.triples if (t.subject, t.property, t.value) not in asked]


def statistics_of(data: Dataset, distractors: Distractors, topics: list[str]) -> dict[str, object]:
    """Fan-out (distinct (property, direction) pairs) of the test topics before and after, and the share of
    their labels that synthetic items also carry."""
    def fan_out(triples: Iterable[Triple]) -> Counter[str]:
        pairs: dict[str, set[Pair]] = defaultdict(set)
        for t in triples:
            pairs[t.subject].add((t.property, "forward"))
            if data.properties[t.property].datatype == "wikibase-item":
                pairs[t.value].add((t.property, "backward"))
        return Counter({id: len(p) for id, p in pairs.items()})

    real = fan_out(data.triples)
    hard = fan_out([*data.triples, *distractors.triples])
    synthetic_names = {index_key(n) for r in distractors.items.values() for n in (r.label, *r.aliases)}
    labels = {index_key(data.items[t].label) for t in topics if data.items.get(t) and data.items[t].label}

    def summary(counts: Counter[str]) -> dict[str, float] | None:
        values = sorted(counts[t] for t in topics)
        if not values:
            return None
        return {"median": statistics.median(values), "p90": values[int(0.9 * (len(values) - 1))],
                "one_pair_share": round(sum(v == 1 for v in values) / len(values), 3)}

    return {"test_topics": len(topics), "fan_out_real": summary(real), "fan_out_hard": summary(hard),
            "topic_labels": len(labels),
            "homonym_share": round(len(labels & synthetic_names) / len(labels), 3) if labels else 0.0,
            "statements_added": len(distractors.triples), "items_added": len(distractors.items),
            "kinds": len(set(distractors.kinds.values()))}
