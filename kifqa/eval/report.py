"""The evaluation report: ``report.md`` with PNG plots beside it (matplotlib, Agg backend).

Plots: ``scores.png`` (precision, recall, F1, macro and micro, all and single-answer questions,
and linking accuracy), ``failures.png`` (failure classes), ``by_property.png`` (F1 of the most
frequent gold properties), ``latency.png`` (seconds per pipeline step), ``calibration.png``
(answer precision against coverage by confidence threshold).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kifqa.eval.traces import STEPS, step_timings

if TYPE_CHECKING:
    from kifqa.eval.evaluation import Evaluation

PLOTS = ("scores.png", "failures.png", "by_property.png", "latency.png", "calibration.png")

_MACRO, _MICRO = "#4C72B0", "#DD8452"
_FAILURE_COLORS = {"ok": "#55A868", "error": "#8C8C8C", "draft": "#C44E52", "entity": "#DD8452",
                   "relation": "#8172B3", "empty": "#CCB974", "partial": "#64B5CD",
                   "large": "#937860"}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def write_report(evaluation: Evaluation, out: Path, metrics: dict[str, Any] | None = None) -> Path:
    """Writes ``report.md`` and the plots into ``out``; returns the report's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    metrics = metrics or evaluation.metrics()
    plt = _pyplot()
    _scores_plot(plt, metrics, out / "scores.png")
    _failures_plot(plt, metrics, out / "failures.png")
    _property_plot(plt, metrics, out / "by_property.png")
    _latency_plot(plt, evaluation, out / "latency.png")
    _calibration_plot(plt, metrics, out / "calibration.png")
    path = out / "report.md"
    path.write_text(render(metrics))
    return path


# --- plots -------------------------------------------------------------------------------------------

def _bar_labels(ax: Any, bars: Any, fmt: str = "{:.2f}") -> None:
    for bar in bars:
        h = bar.get_height()
        ax.annotate(fmt.format(h), (bar.get_x() + bar.get_width() / 2, h), xytext=(0, 2),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8)


def _scores_plot(plt: Any, m: dict[str, Any], path: Path) -> None:
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2), gridspec_kw={"width_ratios": [3, 3, 2.4]})
    for ax, key, title in ((axes[0], "all", "All questions"), (axes[1], "single_answer", "Single-answer questions")):
        s = m[key]
        names = ["precision", "recall", "F1"]
        macro = [s["macro_precision"], s["macro_recall"], s["macro_f1"]]
        micro = [s["micro_precision"], s["micro_recall"], s["micro_f1"]]
        x = range(len(names))
        if s["n"]:
            _bar_labels(ax, ax.bar([i - 0.2 for i in x], macro, 0.4, label="macro", color=_MACRO))
            _bar_labels(ax, ax.bar([i + 0.2 for i in x], micro, 0.4, label="micro", color=_MICRO))
            ax.legend(loc="upper right", fontsize=8)
        ax.set_xticks(list(x), names)
        ax.set_xlim(-0.6, len(names) - 0.4)
        ax.set_ylim(0, 1.12)
        ax.set_title(f"{title} (n={s['n']})")
        ax.grid(axis="y", alpha=0.3)
        if not s["n"]:
            ax.text(1, 0.5, "no gold answers", ha="center", va="center", color="gray")
    ax = axes[2]
    link = m.get("linking", {})
    keys = [k for k in ("entity", "relation", "triple") if (link.get(k) or {}).get("n")]
    values = [link[k]["accuracy"] for k in keys]
    _bar_labels(ax, ax.bar(range(len(keys)), values, 0.6, color="#55A868"))
    link_names = _LINK_NAMES_SDBQA if str(m.get("dataset", "")).startswith("sdbqa") else {}
    ax.set_xticks(range(len(keys)), [f"{link_names.get(k, k)}\n(n={link[k]['n']})" for k in keys])
    ax.set_ylim(0, 1.12)
    ax.set_title("Linking accuracy")
    ax.grid(axis="y", alpha=0.3)
    if not keys:
        ax.text(0.5, 0.5, "no gold triple", ha="center", va="center", color="gray", transform=ax.transAxes)
    fig.suptitle(_title(m), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _failures_plot(plt: Any, m: dict[str, Any], path: Path) -> None:
    counts = m["failure_counts"]
    total = m["questions"] or 1
    names = ["ok", *counts]
    ok = m["questions"] - sum(counts.values())
    values = [ok, *counts.values()]
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    y = list(range(len(names)))[::-1]
    bars = ax.barh(y, values, color=[_FAILURE_COLORS.get(n, "#999999") for n in names])
    ax.set_yticks(y, names)
    for bar, v in zip(bars, values):
        ax.annotate(f"{v} ({v / total:.0%})", (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                    xytext=(3, 0), textcoords="offset points", va="center", fontsize=8)
    ax.set_xlim(0, max(values + [1]) * 1.25)
    ax.set_xlabel("questions")
    ax.set_title(f"Failure classes ({m['questions']} questions; ok = F1 1 or no failure found)", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _property_plot(plt: Any, m: dict[str, Any], path: Path) -> None:
    rows = m.get("by_property") or []
    use_f1 = any(r["f1"] is not None for r in rows)
    key = "f1" if use_f1 else "relation_accuracy"
    rows = [r for r in rows if r[key] is not None]
    fig, ax = plt.subplots(figsize=(8.5, 0.38 * max(len(rows), 3) + 1.2))
    y = list(range(len(rows)))[::-1]
    labels = [f"{_short(property_name(r['property'], r['label']), 48)} (n={r['questions']})" for r in rows]
    bars = ax.barh(y, [r[key] for r in rows], color=_MACRO)
    for bar, r in zip(bars, rows):
        ax.annotate(f"{r[key]:.2f}", (bar.get_width(), bar.get_y() + bar.get_height() / 2), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=8)
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xlim(0, 1.12)
    ax.set_xlabel("macro F1" if use_f1 else "relation-linking accuracy")
    ax.set_title(f"{'F1' if use_f1 else 'Relation accuracy'} by gold property "
                 f"({len(rows)} most frequent)", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    if not rows:
        ax.text(0.5, 0.5, "no gold properties", ha="center", va="center", color="gray", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _latency_plot(plt: Any, evaluation: Evaluation, path: Path) -> None:
    data, names = [], []
    timings = step_timings(s.trace for s in evaluation.scored)
    for step in STEPS:
        values = [v for v in timings[step] if v > 0]
        if values:
            data.append(values)
            names.append(f"{step}\n(n={len(values)})")
    fig, ax = plt.subplots(figsize=(8, 4))
    if data:
        ax.boxplot(data, showfliers=True, flierprops={"markersize": 3})
        ax.set_xticks(range(1, len(names) + 1), names)
        flat = [v for d in data for v in d]
        log = max(flat) / max(min(flat), 1e-9) > 50
        if log:
            ax.set_yscale("log")
        ax.set_ylabel("seconds (log scale)" if log else "seconds")
    else:
        ax.text(0.5, 0.5, "no timings", ha="center", va="center", color="gray", transform=ax.transAxes)
    ax.set_title("Latency per step (per question)", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _calibration_plot(plt: Any, m: dict[str, Any], path: Path) -> None:
    cal = m.get("calibration") or {}
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for points, label, style in ((cal.get("curve") or [], f"all ({cal.get('questions', 0)} questions)", "-"),
                                 ((cal.get("held_out") or {}).get("check_curve") or [],
                                  "check half (odd positions)", ":"),
                                 (cal.get("product_curve") or [], "all, hand-set product (before the fit)", "--")):
        if points:
            ax.plot([p["coverage"] for p in points], [p["precision"] for p in points], style, marker=".",
                    markersize=4, label=label)
    for target in (0.95, 0.99):
        ax.axhline(target, color="gray", linestyle="--", linewidth=0.8)
        point = (cal.get("thresholds") or {}).get(str(target))
        if point:
            ax.annotate(f"t={point['threshold']:.2f}", (point["coverage"], point["precision"]), xytext=(4, -12),
                        textcoords="offset points", fontsize=8)
    ax.set_xlim(0, 1.02)
    ax.set_ylim(min([0.5] + [p["precision"] for p in cal.get("curve") or [] if p["precision"] is not None]) - 0.02,
                1.01)
    ax.set_xlabel("coverage (share of questions kept)")
    ax.set_ylabel("answer precision of the kept questions")
    ax.set_title("Precision against coverage by confidence threshold", fontsize=10)
    ax.grid(alpha=0.3)
    if cal.get("curve"):
        ax.legend(loc="lower left", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no answered question with gold answers", ha="center", va="center", color="gray",
                transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


_LINK_NAMES_SDBQA = {"entity": "subject IRI", "relation": "predicate", "triple": "both"}

#: Prefixes that shorten property IRIs in plots.
PREFIXES = {"http://dbpedia.org/ontology/": "dbo:", "http://dbpedia.org/property/": "dbp:",
            "http://purl.org/linguistics/gold/": "gold:", "http://www.w3.org/1999/02/22-rdf-syntax-ns#": "rdf:",
            "http://www.w3.org/2000/01/rdf-schema#": "rdfs:", "http://xmlns.com/foaf/0.1/": "foaf:",
            "http://www.wikidata.org/prop/direct/": "wdt:"}


def property_name(prop: str, label: str) -> str:
    """``P19 place of birth``; an IRI by its prefixed name (``dbo:birthPlace``) or its label."""
    for iri, prefix in PREFIXES.items():
        if prop.startswith(iri):
            return prefix + prop[len(iri):]
    if "/" in prop or "#" in prop:
        return label
    return f"{prop} {label}" if label and label != prop else prop


def _short(text: str, n: int) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def _title(m: dict[str, Any]) -> str:
    parts = [m.get("dataset"), m.get("model"), m.get("kb")]
    return " · ".join(str(p) for p in parts if p) or "kifqa evaluation"


# --- report.md ---------------------------------------------------------------------------------------

def _f(x: Any) -> str:
    if x is None:
        return "–"
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(m: dict[str, Any]) -> str:
    """``report.md`` from the metrics."""
    sdbqa = str(m.get("dataset", "")).startswith("sdbqa")
    lines = [f"# Evaluation: {_title(m)}", ""]
    about = [f"{m['questions']} questions", f"{m['answers_scored']} with gold answers"]
    if m.get("examples"):
        about.append(f"examples {m['examples']}")
    if m.get("run"):
        about.append(f"run `{m['run']}`")
    lines += [", ".join(about) + ".", ""]
    if m.get("run_missing"):
        lines += [f"**{m['run_missing']} of these questions have no trace in the run** (unfinished shards): each "
                  "counts as an error (class `error`, step `missing`).", ""]
    if m.get("run_missing_unscored"):
        lines += [f"**{m['run_missing_unscored']} questions of the run's corpus have no trace** and are not scored "
                  "(the corpus file is gone or changed, so which ones is unknown).", ""]
    lines += ["![scores](scores.png)", ""]

    lines += ["## Answers", "",
              "Precision, recall and F1 over answer entities, gold extended as in the KIF-QA paper; precision 0 "
              "for an empty prediction. Macro: mean over questions; micro: summed counts.", "",
              "| questions | n | macro P | macro R | macro F1 | micro P | micro R | micro F1 |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for key, name in (("all", "all"), ("single_answer", "single-answer")):
        s = m[key]
        lines.append(f"| {name} | {s['n']} | {_f(s['macro_precision'])} | {_f(s['macro_recall'])} | "
                     f"{_f(s['macro_f1'])} | {_f(s['micro_precision'])} | {_f(s['micro_recall'])} | "
                     f"{_f(s['micro_f1'])} |")
    lines += ["", f"F1 = 1 on {m.get('correct', 0)} of {m['answers_scored']} questions.", ""]

    link = m.get("linking", {})
    names = ({"entity": "subject IRI", "relation": "predicate (with direction)",
              "property": "predicate (any direction)", "triple": "subject and predicate",
              "offered": "predicate, where a kept entity has it in the base"} if sdbqa else
             {"entity": "entity (gold topic kept)", "relation": "relation (gold property and direction chosen)",
              "property": "property (either direction)", "triple": "triple (both in one relation)",
              "offered": "relation, where among the options"})
    lines += ["## Linking", "", "| check | n | correct | accuracy |", "| --- | ---: | ---: | ---: |"]
    for key, name in names.items():
        c = link.get(key) or {}
        lines.append(f"| {name} | {c.get('n', 0)} | {c.get('correct', 0)} | {_f(c.get('accuracy'))} |")
    lines.append("")

    lines += ["## Failure classes", "", "![failures](failures.png)", "",
              "| class | questions | share | details |", "| --- | ---: | ---: | --- |"]
    for cls, count in m["failure_counts"].items():
        details = "; ".join(f"{k or '–'}: {v}" for k, v in (m.get("failure_details", {}).get(cls) or {}).items())
        lines.append(f"| {cls} | {count} | {m['failures'][cls]:.1%} | {_cell(details)} |")
    lines.append("")
    for cls, examples in (m.get("failure_examples") or {}).items():
        lines += [f"**{cls}**", ""]
        for e in examples:
            draft = " ".join(e["draft"]) or "no draft"
            lines.append(f"- `{e['id']}` {_cell(e['question'])} — draft `{_cell(draft)}` — {_cell(e['detail'])}")
        lines.append("")

    lines += _decisions_section(m.get("decisions") or {})
    lines += _oracle_section(m.get("oracle_drafts") or {})
    lines += _slices_section(m.get("slices") or {})
    lines += _calibration_section(m.get("calibration") or {})
    lines += ["## By property", "", "![by property](by_property.png)", "",
              "| property | label | questions | macro P | macro R | macro F1 | relation accuracy |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in m.get("by_property") or []:
        lines.append(f"| `{r['property']}` | {_cell(r['label'])} | {r['questions']} | {_f(r['precision'])} | "
                     f"{_f(r['recall'])} | {_f(r['f1'])} | {_f(r['relation_accuracy'])} |")
    lines.append("")

    lines += ["## Latency and cost", "", "![latency](latency.png)", "",
              "| step | n | mean s | p50 s | p90 s | p99 s | max s |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for step, st in (m.get("latency_s") or {}).items():
        if st.get("n"):
            lines.append(f"| {step} | {st['n']} | {st['mean']:.3f} | {st['p50']:.3f} | {st['p90']:.3f} | "
                         f"{st['p99']:.3f} | {st['max']:.3f} |")
    lines += ["", f"Per question: {m['llm_calls_per_question']:.2f} LLM calls, "
              f"{m['prompt_tokens_per_question']:.0f} prompt tokens ({m['uncached_prompt_tokens_per_question']:.0f} "
              f"uncached), {m['completion_tokens_per_question']:.1f} completion tokens, "
              f"{m['kb_calls_per_question']:.2f} KB calls, {m['seconds_per_question']:.2f} s. "
              f"Wall time {m['wall_s']:.1f} s ({m['questions_per_s']:.3f} questions/s).", ""]
    return "\n".join(lines)


_SLICE_NAMES = {"one_relation": "topic with one (property, direction)",
                "several_relations": "topic with several", "no_relation_in_base": "topic with none in the base",
                "topic_named": "question names its topic", "topic_not_named": "question names no name of its topic"}


def _decisions_section(decisions: dict[str, Any]) -> list[str]:
    """How often each rule fired and changed the outcome, and whether what it chose was gold where what it put
    aside was not (helped) or the other way round (hurt)."""
    if not decisions:
        return []
    lines = ["## Decisions", "",
             "Each rule that fired; taken: it changed the outcome; judged: taken, choosing between relations, with "
             "gold relations; helped / hurt: what it chose was gold and what it put aside not, or the other way "
             "round.", "",
             "| rule | fired | taken | judged | helped | hurt |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for rule, c in decisions.items():
        lines.append(f"| {rule} | {c['fired']} | {c['taken']} | {c['judged']} | {c['helped']} | {c['hurt']} |")
    return [*lines, ""]


def _slices_section(slices: dict[str, Any]) -> list[str]:
    if not slices:
        return []
    lines = ["## Slices", "",
             "The same metrics on the questions whose gold topic entity has one (property, direction) in the base "
             "(the relation step has nothing to choose) and on those with several; then on those whose words "
             "hold a name of their topic (label or alias) and on those whose words hold none.", "",
             "| slice | questions | scored | macro P | macro R | macro F1 | entity | relation | failures |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for key, m in slices.items():
        fails = ", ".join(f"{k} {v}" for k, v in m["failure_counts"].items() if v) or "none"
        a, link = m["all"], m.get("linking") or {}
        lines.append(f"| {_SLICE_NAMES.get(key, key)} | {m['questions']} | {m['answers_scored']} | "
                     f"{_f(a['macro_precision'] if a['n'] else None)} | {_f(a['macro_recall'] if a['n'] else None)} | "
                     f"{_f(a['macro_f1'] if a['n'] else None)} | {_f((link.get('entity') or {}).get('accuracy'))} | "
                     f"{_f((link.get('relation') or {}).get('accuracy'))} | {fails} |")
    return lines + [""]


def _calibration_section(cal: dict[str, Any]) -> list[str]:
    if not cal.get("questions"):
        return []
    held = cal.get("held_out") or {}
    lines = ["## Calibration of the silver confidence", "", "![calibration](calibration.png)", "",
             f"{cal['questions']} questions with gold answers, {cal['answered']} answered. Keeping the answers with "
             "confidence ≥ t: precision is the mean answer precision of the kept questions, coverage their share of "
             "all questions with gold answers. The check fits each threshold on the even positions "
             f"({held.get('fit_questions', 0)} questions) and measures it on the odd ones "
             f"({held.get('check_questions', 0)}), which did not take part in fitting it. The confidence: "
             f"{cal.get('method', 'hand-set product of four factors')}"
             + ("; the dashed curve is the hand-set product's on the same questions." if cal.get("product_curve")
                else "."), "",
             "| target precision | threshold | precision | coverage | kept | held-out: fitted threshold | "
             "precision on the check half | coverage | kept |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for target, point in (cal.get("thresholds") or {}).items():
        check = held.get(target) or {}
        fit, measured = check.get("fit") or {}, check.get("check") or {}
        if point:
            row = (f"| {target} | {point['threshold']:.4f} | {point['precision']:.3f} | {point['coverage']:.3f} "
                   f"| {point['n']} |")
        else:
            row = f"| {target} | not reached | – | – | – |"
        if fit:
            row += (f" {fit['threshold']:.4f} | {_f(measured.get('precision'))} | {_f(measured.get('coverage'))} | "
                    f"{measured.get('n', 0)} |")
        else:
            row += " not reached | – | – | – |"
        lines.append(row)
    return lines + [""]


def _oracle_section(oracle: dict[str, Any]) -> list[str]:
    if not oracle.get("questions"):
        return []
    loss = oracle["loss"]
    lines = ["## Where the loss is (oracle drafts)", "",
             f"The same {oracle['questions']} questions answered again with each one's gold draft (its gold triple "
             "written as the example pool writes it, `oracle-drafts/`): macro F1 "
             f"{oracle['macro_f1']:.3f} with the model's drafts, {oracle['macro_f1_oracle_drafts']:.3f} with the gold "
             "ones. The loss 1 − F1 by step: the draft's is what the gold draft gains, the others are the oracle "
             "run's shortfall by failure class.", "",
             "| step | loss of macro F1 |", "| --- | ---: |"]
    lines += [f"| {step} | {value:.4f} |" for step, value in loss.items()]
    lines += [f"| total (1 − F1) | {1 - oracle['macro_f1']:.4f} |", ""]
    return lines
