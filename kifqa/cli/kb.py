"""``kifqa kb``: build, serve, inspect and query the knowledge base."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from kifqa.cli.options import fail, load_settings
from kifqa.config import Settings
from kifqa.errors import KifqaError
from kifqa.kb import build as kb_build
from kifqa.kb import dbpedia
from kifqa.kb.kifkb import KifKnowledgeBase
from kifqa.kb.server import OxigraphServer
from kifqa.kb.spec import open_kb, resolve
from kifqa.kb.split import ScholarlySplit
from kifqa.kb.virtuoso import DEFAULT_PORT, VirtuosoServer

T = TypeVar("T")

_config_option = click.option("--config", "config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                              help="A YAML settings file.")
_kb_option = click.option("--kb", "spec", metavar="SPEC", default=None,
                          help="Knowledge base: local (default), local-server[:PORT], local-hard, "
                               "local-hard-server[:PORT], local-dbpedia, local-dbpedia-server[:PORT], wikidata, "
                               "dbpedia, "
                               "sparql+wikidata:URL, sparql+dbpedia:URL, kif:STORE[?K=V...].")
_json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


def _friendly(command: Callable[..., None]) -> Callable[..., None]:
    """Reports kifqa's own errors as one-line CLI errors instead of tracebacks."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            command(*args, **kwargs)
        except KifqaError as err:
            raise fail(err) from err

    return wrapper


def _with_kb(settings: Settings, call: Callable[[KifKnowledgeBase | ScholarlySplit], Awaitable[T]]) -> T:
    async def run() -> T:
        kb = open_kb(None, settings)
        try:
            return await call(kb)
        finally:
            await kb.aclose()

    return asyncio.run(run())


def _dump(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


@click.group()
def kb() -> None:
    """Build, serve, inspect and query the knowledge base."""


@kb.command()
@click.option("--force", is_flag=True, help="Rebuild even if a build of the same inputs exists.")
@click.option("--hard", is_flag=True, help="The hard base: every real statement plus seeded synthetic distractors "
                                           "(property fan-out, homonyms); `--kb local-hard` uses it.")
@click.option("--encoding", type=click.Choice(["wikidata", "dbpedia"]), default="wikidata", show_default=True,
              help="wikidata: Wikibase-dump RDF in Oxigraph + label index; dbpedia: the same facts converted to "
                   "DBpedia resources and ontology properties (N-Triples for Virtuoso) + label index.")
@_config_option
@_friendly
def build(force: bool, hard: bool, encoding: str, config: Path | None) -> None:
    """Build the local knowledge base from the data folder."""
    settings = load_settings(config)
    if hard and encoding == "dbpedia":
        raise click.UsageError("--hard builds the Wikidata encoding only")
    if encoding == "dbpedia":
        built_db, new = dbpedia.build(settings, force=force)
        c = built_db.manifest["counts"]
        click.echo(f"{'built' if new else 'up to date'}: {built_db.root}")
        click.echo(f"  hash {built_db.digest}, {c['statements']:,} of {c['wikidata_statements']:,} "
                   "statements converted "
                   f"({c['statements_without_dbpedia_property']:,} without a DBpedia property, "
                   f"{c['statements_with_datatype_property_only']:,} with only a datatype property), "
                   f"{c['resources']:,} resources ({c['resources_qualified_by_kind']:,} disambiguated by kind, "
                   f"{c['resources_qualified_by_id']:,} by Wikidata id), "
                   f"{c['rdf_triples']:,} RDF triples; build took {built_db.manifest['seconds']} s")
        return
    built, new = kb_build.build(settings, force=force, hard=hard)
    counts = built.manifest["counts"]
    click.echo(f"{'built' if new else 'up to date'}: {built.root}")
    click.echo(f"  hash {built.digest}, {counts['statements']:,} statements, {counts['rdf_triples']:,} RDF triples, "
               f"{counts['items']:,} items, {counts['properties']:,} properties; build took "
               f"{built.manifest['seconds']} s")
    if stats := built.manifest.get("hard"):
        click.echo(_hard_summary(stats, built.manifest))


def _hard_summary(stats: dict[str, Any], manifest: dict[str, Any]) -> str:
    real, fan_out = stats["fan_out_real"], stats["fan_out_hard"]
    size = f", {manifest['bytes'] / 2 ** 20:,.0f} MiB" if "bytes" in manifest else ""
    added = (f"  synthetic (seed {stats['seed']}): {stats['statements_added']:,} statements and "
             f"{stats['items_added']:,} items added, {stats['kinds']} kinds{size}")
    if not fan_out:
        return added + "\n  (no train and valid files: no test-split statistics)"
    return (f"{added}\n"
            f"  {stats['test_topics']:,} test-split topics: (property, direction) pairs median {fan_out['median']:g}, "
            f"p90 {fan_out['p90']:g} (real base: {real['median']:g}, {real['p90']:g}); "
            f"{stats['homonym_share']:.0%} of their labels are shared by synthetic items")


@kb.command()
@click.option("--port", type=int, default=None, help="Port (default: kb.server_port, 7878, for oxigraph; 8890 for "
                                                     "virtuoso).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--engine", type=click.Choice(["oxigraph", "virtuoso"]), default="oxigraph", show_default=True,
              help="oxigraph: the Wikidata-encoded build; virtuoso: the DBpedia-encoded build (loaded at start).")
@click.option("--hard", is_flag=True, help="Serve the hard base (oxigraph; query it with --kb local-hard-server).")
@_config_option
@_friendly
def serve(port: int | None, host: str, engine: str, hard: bool, config: Path | None) -> None:
    """Serve a built base over SPARQL until interrupted."""
    settings = load_settings(config)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop the server on `kill` too
    if engine == "virtuoso":
        built = dbpedia.locate(settings)
        virtuoso = VirtuosoServer(built.rdf_path, graph=dbpedia.GRAPH, port=port or DEFAULT_PORT, host=host)
        click.echo(f"starting Virtuoso on {built.rdf_path} ...")
        with virtuoso:
            click.echo(f"serving at {virtuoso.url}: up in {virtuoso.startup_s:.1f} s, {virtuoso.triples:,} triples "
                       f"loaded in {virtuoso.load_s:.1f} s (query it with --kb local-dbpedia-server:{virtuoso.port}); "
                       "Ctrl-C stops")
            _wait(virtuoso.wait)
        return
    built_kb = kb_build.locate(settings, hard=hard)
    server = OxigraphServer(built_kb.store_dir, port=port or settings.kb.server_port, host=host)
    with server:
        client = "local-hard-server" if hard else "local-server"
        click.echo(f"serving {built_kb.store_dir} at {server.url} (query it with --kb {client}:{server.port}); "
                   "Ctrl-C stops")
        _wait(server.wait)


def _wait(wait: Callable[[], int]) -> None:
    try:
        wait()
    except KeyboardInterrupt:
        pass


@kb.command()
@_kb_option
@_config_option
@_json_option
@_friendly
def info(spec: str | None, config: Path | None, as_json: bool) -> None:
    """Where the knowledge base is: the local build (path, hash, counts) and the endpoints of SPEC."""
    settings = load_settings(config, kb=spec)
    spec = settings.kb.spec
    report: dict[str, Any] = {"spec": spec, "data_dir": str(settings.data_dir)}
    try:
        built = kb_build.locate(settings, hard=spec.startswith("local-hard"))
        report["local_build"] = {"path": str(built.root), **built.manifest}
    except KifqaError as err:
        report["local_build"] = f"none ({err})"
    report["endpoints"] = resolve(spec, settings).info
    if as_json:
        _dump(report)
        return
    for key, value in report.items():
        if isinstance(value, dict):
            click.echo(f"{key}:")
            for k, v in value.items():
                click.echo(f"  {k}: {v}")
        else:
            click.echo(f"{key}: {value}")


@kb.command()
@click.argument("text")
@click.option("--property", "properties", is_flag=True, help="Search properties instead of items.")
@click.option("--limit", type=int, default=10, show_default=True)
@_kb_option
@_config_option
@_json_option
@_friendly
def search(text: str, properties: bool, limit: int, spec: str | None, config: Path | None, as_json: bool) -> None:
    """Search items (or properties) by label and alias, best first."""
    found = _with_kb(load_settings(config, kb=spec),
                     lambda kb: (kb.search_properties if properties else kb.search_entities)(text, limit=limit))
    if as_json:
        _dump([dataclasses.asdict(c) for c in found])
        return
    for rank, c in enumerate(found, 1):
        aliases = f"  aka {', '.join(c.aliases)}" if c.aliases else ""
        description = f"  — {c.description}" if c.description else ""
        click.echo(f"{rank:2}. {c.id:<12} {c.label or '(no label)'}{aliases}{description}  [{c.score:.2f}]")


@kb.command()
@click.argument("entity")
@_kb_option
@_config_option
@_json_option
@_friendly
def properties(entity: str, spec: str | None, config: Path | None, as_json: bool) -> None:
    """The properties ENTITY has as subject (forward) and as value (backward)."""
    found = _with_kb(load_settings(config, kb=spec), lambda kb: kb.properties_of(entity))
    if as_json:
        _dump(dataclasses.asdict(found))
        return
    for u in found.uses:
        click.echo(f"{u.direction:<8} {u.property.id:<8} {u.property.label}")
    if found.truncated:
        click.echo("(cut at kb.max_results distinct properties in a direction)")


@kb.command("filter")
@click.option("--subject", metavar="ID", help="Subject id (Q42 or IRI).")
@click.option("--property", "prop", metavar="ID", help="Property id (P19 or IRI).")
@click.option("--value", metavar="ID", help="Value id (Q42 or IRI).")
@click.option("--sparql", is_flag=True, help="Also print the SPARQL the filter compiled to.")
@_kb_option
@_config_option
@_json_option
@_friendly
def filter_(subject: str | None, prop: str | None, value: str | None, sparql: bool, spec: str | None,
            config: Path | None, as_json: bool) -> None:
    """Print the statements matching a KIF filter, with labels (on ``wikidata``, of the main graph; the scholarly
    articles' graph answers ``kifqa kb properties``)."""
    result = _with_kb(load_settings(config, kb=spec), lambda kb: (
        kb.main if isinstance(kb, ScholarlySplit) else kb).filter(subject=subject, property=prop, value=value))
    if as_json:
        _dump(dataclasses.asdict(result))
        return
    for f in result.facts:
        click.echo(f"{f.subject} ({f.subject_label})  {f.property} ({f.property_label})  {f.value} ({f.value_label})")
    more = " (truncated: raise kb.max_results)" if result.truncated else ""
    click.echo(f"{len(result.facts)} statement(s){more}; filter: {result.filter}", err=True)
    if sparql:
        click.echo(result.sparql)
