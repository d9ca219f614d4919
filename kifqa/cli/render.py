"""How ``kifqa ask`` (in-process or through ``kifqa serve``) prints a question's answers and trace."""

from __future__ import annotations

import json

from kifqa.types import Result, Trace


def render(result: Result, *, explain: bool, as_json: bool, title: bool, seconds: float) -> str:
    """One question's answers (and trace): JSON (one line when ``title``), or lines headed by the
    question and its seconds when ``title``."""
    if as_json:
        return json.dumps({"answers": result.answer_rows(), "trace": result.trace.to_dict()},
                          ensure_ascii=False, indent=None if title else 2)
    parts = [f"# {result.question.text}  ({seconds:.1f} s)"] if title else []
    if explain:
        parts += [render_trace(result.trace), ""]
    parts.append(render_answers(result))
    return "\n".join(parts)


def render_answers(result: Result) -> str:
    """One line per answer: its id, label and the statement behind it."""
    if not result.answers:
        why = f" ({result.trace.error_step}: {result.trace.error})" if result.trace.error else ""
        return f"no answer{why}"
    return "\n".join(
        f"{a.answer}\t{a.answer_label}\t({a.fact.subject_label} | {a.fact.property_label} | "
        f"{a.fact.value_label})" for a in result.answers)


def render_trace(trace: Trace) -> str:
    """The trace as readable lines, one block per step."""
    lines = [f"question  {trace.question}", f"kb        {trace.kb}", f"model     {trace.model}"]
    if trace.examples:
        lines.append(f"examples  {len(trace.examples)}: " + " / ".join(trace.examples))
    if trace.draft:
        lines.append("draft     " + "  ".join(str(p) for p in trace.draft))
    if trace.candidates:
        kept = set(trace.entities)
        lines.append("entities")
        for c in trace.candidates[:10]:
            mark = "*" if c.id in kept else " "
            extra = f" aka {'; '.join(c.aliases[:3])}" if c.aliases else ""
            lines.append(f"  {mark} {c.id:<12} {c.score:6.2f}  {c.label}{extra}")
    if trace.relations:
        lines.append("relations " + ", ".join(f"{r.entity} {r.property} {r.direction}" for r in trace.relations)
                     + f"  (of {len(trace.options)} options)")
    for f in trace.filters:
        lines.append(f"filter    {f.filter}  -> {f.n_statements} statements in {f.seconds * 1000:.0f} ms")
        if f.sparql:
            lines.extend("          " + line for line in f.sparql.splitlines())
    for call in trace.llm_calls:
        cached = " (cache hit)" if call.cache_hit else ""
        lines.append(f"llm       {call.step}: {call.prompt_tokens} prompt ({call.cached_prompt_tokens} "
                     f"prefix-cached) + {call.completion_tokens} tokens, {call.latency_s:.2f} s{cached} "
                     f"-> {call.output!r}")
    lines.extend(f"decision  {d.step}: {d.rule}{'' if d.taken else ' (not taken)'} "
                 + ", ".join(f"{k}={v}" for k, v in d.inputs.items()) for d in trace.decisions)
    lines.extend(f"note      {n}" for n in [*trace.notes, *map(str, trace.constraints)])
    lines.append("timings   " + ", ".join(f"{k} {v:.3f} s" for k, v in trace.timings.items()))
    lines.append(f"kb calls  {trace.kb_calls}")
    if trace.error:
        lines.append(f"error     {trace.error_step}: {trace.error}")
    return "\n".join(lines)
