"""``kifqa eval``: answer a gold dataset and score it with the KIF-QA paper's metrics.

Three ways to get the answers, one scoring path: in-process (default), the batch job (``--batch``,
into the ``--out`` run folder) or an existing batch run folder (``--run DIR``). ``--compare A B``
sets two scored folders side by side, question by question; ``--table A B ...`` their figures, one row each.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kifqa.cli.location import Location
from kifqa.cli.options import concurrency_option, fail, load_settings, settings_options
from kifqa.config import Settings
from kifqa.data.dbpedia_map import DBpediaLinks
from kifqa.errors import ConfigError, KifqaError
from kifqa.llm.factory import in_process_instances
from kifqa.redact import redact

if TYPE_CHECKING:
    from kifqa.eval.datasets import Distractors, GoldExtender
    from kifqa.examples import Pool


@click.command("eval")
@click.argument("scored", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--dataset", default="sqwd:valid", show_default=True,
              help="sqwd:valid, sqwd:train (SimpleQuestions-Wikidata, answerable questions), sdbqa:valid "
                   "(SimpleDBpediaQA), or a gold file (JSONL/CSV/TSV/Parquet with question and answers columns).")
@click.option("--limit", type=int, help="Only the first N questions (from --start).")
@click.option("--start", type=click.IntRange(min=0), default=0, show_default=True,
              help="Skip the dataset's first N questions (ids keep their position: --start 200 begins at "
                   "sqwd-valid-200).")
@concurrency_option
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Write metrics.json, questions.jsonl, report.md and plots here (with --batch: the run folder).")
@click.option("--batch", is_flag=True, help="Answer with the Ray batch job (kifqa run) into --out, then score it.")
@click.option("--run", "run_dir", type=Location(exists=True, file_okay=False),
              help="Score an existing batch run folder (answers/, traces/), a path or a URI (s3://bucket/runs/x); "
                   "writes into it unless --out is given (needed for a URI).")
@click.option("--compare", nargs=2, type=click.Path(exists=True, file_okay=False, path_type=Path),
              metavar="RUN_A RUN_B", help="Compare two scored folders (or batch run folders, scored on --dataset).")
@click.option("--table", "table", multiple=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              metavar="DIR", help="Print scored folders side by side, one row each (repeat: --table A --table B).")
@click.option("--show", type=int, default=20, show_default=True, help="--compare: questions listed per direction.")
@click.option("--extend-gold", is_flag=True,
              help="Extend a gold file's answers with the local base's namesakes, as SimpleQuestions-Wikidata's are "
                   "(needs topic and Pn/Rn property columns).")
@click.option("--hard-gold", is_flag=True,
              help="Score against the hard base's gold (its synthetic namesakes extend it) whatever the KB spec: for "
                   "a run over the hard base behind other endpoints (`kifqa bench standins --hard`). Implied by "
                   "--kb local-hard.")
@click.option("--oracle-drafts", is_flag=True,
              help="Also answer each question given its gold draft (in-process) and split the loss by step; the "
                   "oracle run goes to OUT/oracle-drafts.")
@click.option("--allow-pool-overlap", is_flag=True,
              help="Score questions of which the example pool holds more than 5% (a pool drawn from the questions "
                   "it answers inflates their figures); metrics.json says so under pool.over_limit. Refused "
                   "without it.")
@click.option("--report/--no-report", default=True, show_default=True, help="Write report.md and plots with --out.")
@click.option("--fit-confidence", type=click.Path(dir_okay=False, path_type=Path), metavar="OUT.json",
              help="Fit the silver confidence (a logistic regression over each answered question's trace) on the "
                   "scored folders SCORED... (kifqa eval --out) and write it here, with its fit data's description.")
@click.option("--check", "check_dirs", multiple=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              metavar="DIR", help="--fit-confidence: measure the fitted confidence against the hand-set product on "
                                  "these other scored folders (repeat for several).")
@settings_options
def eval_(scored: tuple[Path, ...], dataset: str, limit: int | None, start: int, concurrency: int | None,
          out: Path | None, batch: bool, run_dir: Path | str | None, compare: tuple[Path, Path] | None,
          table: tuple[Path, ...], show: int, extend_gold: bool, hard_gold: bool, oracle_drafts: bool,
          allow_pool_overlap: bool,
          report: bool, fit_confidence: Path | None, check_dirs: tuple[Path, ...], config: Path | None, kb: str | None,
          model: str | None, examples: str | None) -> None:
    """Answer DATASET (or read a run) and print precision, recall, F1, linking accuracy, failure classes and costs;
    or, with --fit-confidence, fit the silver confidence on the scored folders SCORED..."""
    if (fit_confidence is None) != (not scored) or (check_dirs and fit_confidence is None):
        raise click.UsageError("--fit-confidence OUT.json takes the scored folders SCORED... (and --check DIR)")
    if fit_confidence is not None:
        if sum(bool(x) for x in (batch, run_dir, compare, table, out, oracle_drafts)):
            raise click.UsageError("--fit-confidence reads scored folders: not with --out, --batch, --run, "
                                   "--compare, --table or --oracle-drafts")
        return _fit_confidence(fit_confidence, scored, check_dirs)
    if sum(bool(x) for x in (batch, run_dir, compare, table)) > 1:
        raise click.UsageError("use one of --batch, --run, --compare and --table")
    if table:
        from kifqa.eval.table import render

        try:
            click.echo(render(list(table)))
        except KifqaError as err:
            raise fail(err) from err
        return
    if batch and out is None:
        raise click.UsageError("--batch needs --out (the run folder)")
    if isinstance(run_dir, str) and out is None:
        raise click.UsageError("--run at a URI needs --out (where to write the scores and the report)")
    if oracle_drafts and (batch or run_dir or compare):
        raise click.UsageError("--oracle-drafts answers in-process: not with --batch, --run or --compare")
    settings = load_settings(config, kb, model, examples)
    extender = gold_extender(settings, extend_other=extend_gold, hard=hard_gold or None)
    instances = in_process_instances(settings)
    concurrency = concurrency or settings.llm.in_flight * instances
    try:
        if compare:
            _compare(settings, dataset, compare, out, show, extender)
            return
        evaluation, oracle = _evaluate(settings, dataset, limit, start, concurrency, out, batch, run_dir, extender,
                                       oracle_drafts, allow_pool_overlap)
    except KifqaError as err:
        raise fail(err) from err
    target = out or run_dir  # a run at a URI has out (checked above)
    if isinstance(target, Path):
        from kifqa.report.sources import write_evaluation

        write_evaluation(evaluation, target, report=report)
        if oracle is not None:
            oracle.write(target / "oracle-drafts")
    click.echo(json.dumps(evaluation.metrics(), indent=2, ensure_ascii=False))


def _fit_confidence(dest: Path, scored: tuple[Path, ...], check: tuple[Path, ...]) -> None:
    """Fits the confidence on ``scored``, measures it on ``check`` (into its description) and writes it."""
    from kifqa.eval.confidence_fit import fit, held_out_check, render_check

    try:
        fitted = fit(scored)
        if check:
            measured = held_out_check(fitted, scored, check)
            click.echo(render_check(measured))
            fitted = replace(fitted, about={**fitted.about, "held_out_check": measured})
        fitted.write(dest)
    except KifqaError as err:
        raise fail(err) from err
    about = fitted.about
    click.echo(f"wrote {dest}: fitted on {about['questions']} answered questions ({about['right']} right)")


def _evaluate(settings: Settings, dataset: str, limit: int | None, start: int, concurrency: int, out: Path | None,
              batch: bool, run_dir: Path | str | None, extender: GoldExtender, oracle_drafts: bool,
              allow_pool_overlap: bool) -> tuple[Any, Any]:
    from kifqa.eval.datasets import load_gold
    from kifqa.eval.evaluation import About
    from kifqa.eval.oracle import gold_drafts, loss_by_step
    from kifqa.eval.pools import checked_pool, traced_pool
    from kifqa.eval.scoring import Scored
    from kifqa.eval.sources import (
        as_questions,
        evaluate_batch,
        evaluate_run,
        predict,
        score_predicted,
        scoring_progress,
    )
    from kifqa.examples import drawn_pool

    gold = "hard base" if extender.hard else None
    about = About(dataset=dataset, model=settings.llm.model, kb=redact(settings.kb.spec),
                  examples=f"{settings.examples.mode} k={settings.examples.k}", gold=gold)
    if run_dir is not None:
        evaluation = evaluate_run(run_dir, load_gold(dataset, settings.data_dir, start=start), extender, limit=limit)
        from kifqa.runs.results import run_about

        ran = run_about(run_dir)
        if not evaluation.scored:
            raise click.ClickException(f"no question of {dataset} is in the run {run_dir} (do the ids match?)")
        traced = traced_pool((s.trace.pool for s in evaluation.scored), lambda: _run_pool(run_dir, settings),
                             [s.gold for s in evaluation.scored], dataset=dataset, allow=allow_pool_overlap)
        evaluation.about = About(dataset=dataset, model=ran["model"], kb=ran["kb"], examples=ran["examples"],
                                 pool=traced, gold=gold)
        if traced is not None and traced.overlap is None:
            click.echo(f"warning: the example pool the run answered with ({traced.label}) cannot be opened again "
                       "from the run's settings (no manifest, or a pool file gone or changed): whether it holds the "
                       "scored questions is not checked", err=True)
        assert evaluation.run is not None
        if missing := evaluation.run.run_missing:
            click.echo(f"warning: {missing} questions of the run's corpus have no trace (unfinished shards?); "
                       "they count as errors", err=True)
        if unscored := evaluation.run.run_missing_unscored:
            click.echo(f"warning: {unscored} questions of the run's corpus have no trace and are not scored "
                       "(the corpus file is gone or changed)", err=True)
        return evaluation, None
    questions = load_gold(dataset, settings.data_dir, limit=limit, start=start)
    pool = drawn_pool(settings.examples, data_dir=settings.data_dir, kb_spec=settings.kb.spec)
    about = replace(about, pool=checked_pool(pool, questions, dataset=dataset, allow=allow_pool_overlap))
    if batch:
        assert out is not None
        evaluation = evaluate_batch(settings, questions, extender, out)
        evaluation.about = about
        return evaluation, None

    def progress(s: Scored) -> None:
        t = s.trace
        draft = " ".join(str(p) for p in t.draft)
        sys.stderr.write(f"{s.gold.id}\tF1={s.score.f1:.2f}\t{s.failure or 'ok'}\t{s.gold.text}\t"
                         f"{draft}\t{t.error or ''}\n")

    def answered(asked: list, drafts: dict[str, str] | None = None) -> Any:
        predicted = predict(settings, as_questions(asked), concurrency=concurrency, drafts=drafts,
                            progress=scoring_progress(asked, extender, progress))
        return score_predicted(asked, predicted, extender)

    evaluation = answered(questions)
    oracle = None
    if oracle_drafts:
        drafts = gold_drafts(questions, extender)
        oracle = answered([q for q in questions if q.id in drafts], drafts)
    evaluation.about = replace(about, concurrency=concurrency)
    if oracle is not None:
        oracle.about = replace(about, concurrency=concurrency, drafts="gold (oracle)")
        evaluation.oracle_drafts = loss_by_step(evaluation, oracle)
    return evaluation, oracle


def _run_pool(run_dir: Path | str, settings: Settings) -> Pool:
    """The example pool the settings of the run at ``run_dir`` name (its manifest's), over this data folder."""
    from kifqa.config import ExamplesSettings
    from kifqa.examples import drawn_pool
    from kifqa.runs.results import run_config

    config = run_config(run_dir)
    if not config:
        raise ConfigError(f"the run {run_dir} records no settings (no manifest)")
    try:
        examples = ExamplesSettings.model_validate(config.get("examples") or {})
    except ValueError as err:  # pydantic's ValidationError: settings of another kifqa version
        raise ConfigError(f"the run's examples settings: {err}") from err
    return drawn_pool(examples, data_dir=settings.data_dir, kb_spec=(config.get("kb") or {}).get("spec", ""))


def gold_extender(settings: Settings, *, extend_other: bool = False, hard: bool | None = None) -> GoldExtender:
    """The gold of the data folder (see :class:`~kifqa.eval.datasets.GoldExtender`); SimpleDBpediaQA's
    comes through the DBpedia build's links. ``hard``: extend it with the hard build's namesakes too (default: where
    the KB spec is ``local-hard``)."""
    from kifqa.eval.datasets import GoldExtender

    def dbpedia_links() -> DBpediaLinks:
        from kifqa.kb.dbpedia import locate

        return locate(settings).links()

    def distractors() -> Distractors:
        from kifqa.kb.build import locate
        from kifqa.kb.hard import read_exports

        return read_exports(locate(settings, hard=True).root)

    if hard is None:
        hard = settings.kb.spec.startswith("local-hard")
    return GoldExtender(settings.data_dir, extend_other=extend_other, dbpedia_links=dbpedia_links,
                        distractors=distractors if hard else None)


def _compare(settings: Settings, dataset: str, folders: tuple[Path, Path], out: Path | None, show: int,
             extender: GoldExtender) -> None:
    from kifqa.eval.compare import compare, load_scored, render

    loaded = []
    for folder in folders:
        if (folder / "questions.jsonl").is_file():
            loaded.append(load_scored(folder))
        else:  # a batch run folder that was never scored: score it on --dataset
            from kifqa.eval.datasets import load_gold
            from kifqa.eval.evaluation import About
            from kifqa.eval.sources import evaluate_run

            evaluation = evaluate_run(folder, load_gold(dataset, settings.data_dir), extender)
            evaluation.about = About(dataset=dataset)
            rows = {s.gold.id: {k: v for k, v in s.row().items() if k != "trace"} for s in evaluation.scored}
            loaded.append((evaluation.metrics(), rows))
    result = compare(loaded[0], loaded[1], names=(str(folders[0]), str(folders[1])))
    text = render(result, show=show)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(text)
        (out / "compare.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    click.echo(text)
