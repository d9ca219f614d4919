"""``kifqa bench kb``: KIF call latencies on the same RDF in the in-process Oxigraph store, the Oxigraph
server (KIF ``wikidata-sparql``) and KIF's RDFLib store (``sparql-rdflib``), as speed-ups over RDFLib.

The filters are the ones :class:`~kifqa.kb.kifkb.KifKnowledgeBase` sends (datatype masks from the label
index, typed properties), one per sampled statement. Oxigraph rows give the median of the whole KIF
call and, in brackets, of the SPARQL engine alone. RDFLib is slow enough on these joins that it runs in
a forked child with a time budget per operation; a cut-short row is compared on the queries it finished
(if none: the first query, whose time is a lower bound).
"""

from __future__ import annotations

import multiprocessing
import random
import statistics
import time
from collections.abc import Callable, Iterator
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import click
from kif_lib import Filter, Item, LabelProperty, Search, Store, Text

from kifqa.cli.options import fail, load_settings
from kifqa.data import wikidata
from kifqa.data.ids import WD
from kifqa.errors import KifqaError
from kifqa.kb.build import build
from kifqa.kb.index import LabelIndex
from kifqa.kb.kifkb import masks, typed_property
from kifqa.kb.server import OxigraphServer
from kifqa.kb.sparql import compile_filter, sparql_store

#: One page for every result (Oxigraph's order is unstable across pages; RDFLib pages are slow).
PAGE_SIZE = 100_000


def _seconds(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _operations(index: LabelIndex, data_dir: Path, samples: int,
                seed: int) -> tuple[dict[str, list[Filter]], list[str]]:
    """The filters of each operation, one per sampled statement, and the labels of the sampled subjects."""
    dataset = wikidata.load(data_dir)
    chosen = random.Random(seed).sample(dataset.triples, samples)
    labels = [dataset.items[t.subject].label for t in chosen
              if t.subject in dataset.items and dataset.items[t.subject].label]
    m = masks(index)
    real: dict[str, Any] = {"property_mask": Filter.PropertyMask.REAL, "snak_mask": Filter.VALUE_SNAK, **m}
    return {
        "filter_p(subject=)": [Filter(subject=Item(WD + t.subject), **real) for t in chosen],
        "filter(subject=, property=)": [
            Filter(subject=Item(WD + t.subject), property=typed_property(t.property, index),
                   snak_mask=Filter.VALUE_SNAK, **m) for t in chosen],
        "label lookup (filter_s)": [
            Filter(property=LabelProperty(), value=Text(label, "en"), subject_mask=m["subject_mask"])
            for label in labels],
    }, labels


def _call(store: Store, op: str) -> Callable[[Filter], list[Any]]:
    project = store.filter_p if op.startswith("filter_p") else store.filter_s if "filter_s" in op else store.filter
    return lambda f: list(project(filter=f))


def _measure(store: Store, op: str, filters: list[Filter]) -> tuple[list[float], list[float]]:
    """Seconds of each KIF call and of the SPARQL engine alone (each compiled query sent to the backend)."""
    call, core = _call(store, op), sparql_store(store)
    assert core is not None
    call(filters[0])  # warm up: first compile, connections
    kif = [_seconds(partial(call, f)) for f in filters]
    engine = [_seconds(partial(core.backend.select, q))
              for f in filters for q in compile_filter(store, f, limit=PAGE_SIZE).split("\n\n")]
    return kif, engine


def _child(store: Store, op: str, filters: list[Filter], out: Connection) -> None:
    call = _call(store, op)
    for f in filters:
        out.send(_seconds(partial(call, f)))


def _measure_budgeted(store: Store, op: str, filters: list[Filter], budget_s: float) -> tuple[list[float], float]:
    """KIF call seconds of the filters done within ``budget_s`` (in a forked child), and the time spent."""
    receiver, sender = multiprocessing.Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(target=_child, args=(store, op, filters, sender), daemon=True)
    started = time.perf_counter()
    child.start()
    sender.close()
    done: list[float] = []
    try:
        while len(done) < len(filters):
            left = budget_s - (time.perf_counter() - started)
            if left <= 0 or not receiver.poll(left):
                break
            done.append(receiver.recv())
    except EOFError:
        pass
    finally:
        child.kill()
        child.join()
    return done, time.perf_counter() - started


def _rows(ops: dict[str, list[Filter]], stores: dict[str, Store], rdflib: Store,
          budget_s: float) -> Iterator[str]:
    """The table; speed-ups compare RDFLib and Oxigraph on the same queries (those RDFLib finished)."""
    yield (f"{'operation':<28}{'in-process':>16}{'server':>16}{'rdflib':>30}"
           f"{'in-process x':>14}{'server x':>10}")
    for op, filters in ops.items():
        fast = {name: _measure(store, op, filters) for name, store in stores.items()}
        done, spent = _measure_budgeted(rdflib, op, filters, budget_s)
        cells = "".join(f"{f'{_ms(kif):.1f} ({_ms(engine):.1f})':>16}" for kif, engine in fast.values())
        if done:
            slow = f"{_ms(done):.1f}" + ("" if len(done) == len(filters) else f" ({len(done)}/{len(filters)} done)")
            speedups = [f"{_ms(done) / _ms(fast[n][0][:len(done)]):.0f}x" for n in stores]
        else:  # not even the first query finished
            slow = f"first query > {spent:.0f} s"
            speedups = [f">{spent / fast[n][0][0]:.0f}x" for n in stores]
        yield f"{op:<28}{cells}{slow:>30}{speedups[0]:>14}{speedups[1]:>10}"


@click.command()
@click.option("--samples", type=int, default=20, show_default=True, help="Statements sampled per operation.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--rdflib-budget", "budget_s", type=float, default=120.0, show_default=True,
              help="Seconds RDFLib may take per operation before it is cut short.")
@click.option("--rebuild", is_flag=True, help="Rebuild the base first, to time the build.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="A YAML settings file.")
def kb(samples: int, seed: int, budget_s: float, rebuild: bool, config: Path | None) -> None:
    """Compare the in-process Oxigraph store, the Oxigraph server and RDFLib on the built base."""
    try:
        settings = load_settings(config)
        built, _ = build(settings, force=rebuild)
        counts = built.manifest["counts"]
        click.echo(f"build: {built.manifest['seconds']} s ({counts['statements']:,} statements, "
                   f"{counts['rdf_triples']:,} RDF triples, {counts['items']:,} items, label index included)")
        index = LabelIndex(built.index_path)
        ops, labels = _operations(index, settings.data_dir, samples, seed)
        load_s = time.perf_counter()
        rdflib = Store("sparql-rdflib", location=str(built.rdf_path), format="nt", skolemize=False,
                       page_size=PAGE_SIZE)
        click.echo(f"RDFLib load of the same N-Triples: {time.perf_counter() - load_s:.1f} s")
        click.echo(f"\nmedian ms per KIF call over {samples} sampled statements (Oxigraph: SPARQL engine alone in "
                   "brackets); speed-up = RDFLib / Oxigraph on the same queries")
        with OxigraphServer(built.store_dir) as server:
            stores = {"in-process": Store("kifqa-oxigraph", built.store_dir, page_size=PAGE_SIZE),
                      "server": Store("wikidata-sparql", server.url, page_size=PAGE_SIZE)}
            for row in _rows(ops, stores, rdflib, budget_s):
                click.echo(row)
        search = Search("kifqa-local", index)

        def find(text: str) -> list[Any]:
            return list(search.item(text, limit=10))

        search_ms = _ms([_seconds(partial(find, q)) for q in labels])
        click.echo(f"\nlabel/alias search (kifqa-local, SQLite FTS5), same labels: {search_ms:.1f} ms median")
    except KifqaError as err:
        raise fail(err) from err
