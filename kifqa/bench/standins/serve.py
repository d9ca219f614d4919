"""``kifqa bench standins``: serve the stand-ins of ``--kb wikidata`` (``--hard``: over the hard base) or ``--kb
dbpedia`` on 127.0.0.1 until interrupted, and write the settings file that points kifqa at them; on exit, print what
they saw."""

from __future__ import annotations

import dataclasses
import json
import signal
import threading
from pathlib import Path
from typing import Any

import click
import yaml

from kifqa.bench.standins.stack import dbpedia_standins, wikidata_standins
from kifqa.bench.standins.wikidata_api import Lag
from kifqa.cli.options import load_settings


@click.command()
@click.option("--kb", "kind", type=click.Choice(["wikidata", "dbpedia"]), default="wikidata", show_default=True,
              help="Which public knowledge base to stand in for.")
@click.option("--write-config", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Write a settings file here (kb.spec and kb.endpoints) for `--config` of kifqa eval/run.")
@click.option("--hard", is_flag=True,
              help="Wikidata: serve the hard base (`kifqa kb build --hard`), its homonyms in the API's search.")
@click.option("--counts", type=click.Path(dir_okay=False, path_type=Path),
              help="On exit, also write what each stand-in saw here (JSON).")
@click.option("--lag", default=None, metavar="LAG_S/EVERY_S/FOR_S",
              help="Wikidata API: a replication lag of LAG_S seconds during the first FOR_S of every EVERY_S "
                   "seconds (e.g. 8/30/3); default: none.")
@click.option("--latency-s", type=float, default=0.05, show_default=True, help="Added to every answer.")
@click.option("--config", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="A YAML settings file.")
def standins(kind: str, write_config: Path, hard: bool, counts: Path | None, lag: str | None, latency_s: float,
             config: Path | None) -> None:
    """Serve the stand-ins of KIND's public services over the local builds until interrupted (Ctrl-C or
    SIGTERM)."""
    if hard and kind != "wikidata":
        raise click.BadParameter("the hard base is Wikidata's: use it with --kb wikidata", param_hint="--hard")
    settings = load_settings(config)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    if kind == "wikidata":
        api: dict[str, Any] = {"latency_s": latency_s, **({"lag": _lag(lag)} if lag else {})}
        with wikidata_standins(settings, sparql={"latency_s": latency_s}, api=api, hard=hard) as wd:
            seen = _serve(wd.endpoints, "wikidata", write_config, stop,
                          lambda: {"query.wikidata.org": wd.sparql.counts, "www.wikidata.org": wd.api.counts})
    else:
        with dbpedia_standins(settings, lookup={"latency_s": latency_s}) as db:
            seen = _serve(db.endpoints, "dbpedia", write_config, stop,
                          lambda: {"lookup.dbpedia.org": db.lookup.counts})
    text = json.dumps(seen, indent=2)
    click.echo(text)
    if counts:
        counts.write_text(text + "\n")


def _serve(endpoints: dict[str, str], spec: str, path: Path, stop: threading.Event,
           seen: Any) -> dict[str, Any]:
    path.write_text(yaml.safe_dump({"kb": {"spec": spec, "endpoints": endpoints}}, sort_keys=False))
    click.echo(f"serving {', '.join(f'{host} at {url}' for host, url in endpoints.items())}; "
               f"settings in {path}; Ctrl-C stops", err=True)
    stop.wait()
    return {host: dataclasses.asdict(c) for host, c in seen().items()}


def _lag(text: str) -> Lag:
    try:
        lag_s, every_s, for_s = (float(x) for x in text.split("/"))
    except ValueError:
        raise click.BadParameter(f"{text!r} is not LAG_S/EVERY_S/FOR_S (e.g. 8/30/3)", param_hint="--lag") from None
    return Lag(lag_s=lag_s, every_s=every_s, for_s=for_s)
