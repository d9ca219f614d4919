// The kifqa report page: unpacks the embedded libraries and data (gzip + base64), draws the summary
// with Chart.js, lists the questions with Tabulator and opens a question into its trace.
"use strict";

// --- unpacking -------------------------------------------------------------------------------------

function base64Bytes(text) {
  if (Uint8Array.fromBase64) return Uint8Array.fromBase64(text);
  const s = atob(text);
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

async function unpack(element) {
  const bytes = base64Bytes(element.textContent.trim());
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return await new Response(stream).text();
}

async function loadLibrary(id) {
  const script = document.createElement("script");
  script.textContent = await unpack(document.getElementById(id));
  document.head.appendChild(script);
}

// --- small DOM helpers (text only through textContent: questions and traces are untrusted) -----------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

function fmt(x, digits) {
  if (x === undefined || x === null) return "–";
  if (typeof x === "number") {
    if (Number.isInteger(x) && digits === undefined) return x.toLocaleString("en");
    if (digits === undefined) digits = Math.abs(x) >= 100 ? 0 : Math.abs(x) >= 10 ? 1 : 3;
    return x.toLocaleString("en", {minimumFractionDigits: digits, maximumFractionDigits: digits});
  }
  if (typeof x === "boolean") return x ? "yes" : "no";
  return String(x);
}

function table(head, rows, cls) {
  return el("table", {class: cls || "plain"},
    el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
    el("tbody", {}, rows.map((r) => el("tr", r.attrs || {}, (r.cells || r).map((c) => el("td", {}, c))))));
}

function answerText(answers) {
  return (answers || []).map(([id, label]) => (label && label !== id ? `${label} (${id})` : id)).join("; ");
}

// --- the data ----------------------------------------------------------------------------------------

let D = null;          // meta, summary and table columns
let ROWS = [];         // one object per question for the table
const CHUNKS = new Map();  // trace chunk index -> decoded records

function makeRows() {
  const cols = D.columns;
  const names = Object.keys(cols).filter((name) => !name.startsWith("t_"));  // step timings only feed a plot
  const rows = new Array(D.n);
  for (let i = 0; i < D.n; i++) {
    const r = {i};
    for (const name of names) r[name] = cols[name][i];
    rows[i] = r;
  }
  return rows;
}

// What a search matches: id, question and answers, lower-cased (made on the first search).
function searchText(r) {
  if (r._text === undefined) {
    const answers = D.kind === "compare" ? answerText(r.a_answers) + " " + answerText(r.b_answers) : answerText(r.answers);
    r._text = `${r.id} ${r.question} ${answers}`.toLowerCase();
  }
  return r._text;
}

async function record(i) {
  const k = Math.floor(i / D.chunk);
  if (!CHUNKS.has(k)) {
    if (document.readyState === "loading") {  // the trace chunks come after the script
      await new Promise((resolve) => document.addEventListener("DOMContentLoaded", resolve, {once: true}));
    }
    const node = document.querySelector(`script.traces[data-chunk="${k}"]`);
    CHUNKS.set(k, JSON.parse(await unpack(node)));
  }
  return CHUNKS.get(k)[i % D.chunk];
}

// --- summary: figures and charts ---------------------------------------------------------------------

const COLORS = {ok: "#55A868", error: "#8C8C8C", draft: "#C44E52", entity: "#DD8452", relation: "#8172B3",
                empty: "#CCB974", partial: "#64B5CD", macro: "#4C72B0", micro: "#DD8452"};

function get(obj, path) {
  for (const key of path) {
    if (obj === null || typeof obj !== "object" || !(key in obj)) return undefined;
    obj = obj[key];
  }
  return obj;
}

const FIGURES = [
  ["questions", ["questions"]], ["with gold answers", ["answers_scored"]], ["F1 = 1", ["correct"]],
  ["macro F1", ["all", "macro_f1"]], ["micro F1", ["all", "micro_f1"]],
  ["single-answer macro F1", ["single_answer", "macro_f1"]],
  ["entity linking", ["linking", "entity", "accuracy"]], ["relation linking", ["linking", "relation", "accuracy"]],
  ["answered", ["answered"]], ["with an error", ["errors"]], ["silver rows", ["rows"]],
  ["LLM calls / question", ["llm_calls_per_question"]], ["prompt tokens / question", ["prompt_tokens_per_question"]],
  ["uncached prompt tokens / question", ["uncached_prompt_tokens_per_question"]],
  ["KB calls / question", ["kb_calls_per_question"]], ["seconds / question", ["seconds_per_question"]],
  ["wall seconds", ["wall_s"]], ["questions / second", ["questions_per_s"]],
];

function figureCards(summary, into) {
  for (const [name, path] of FIGURES) {
    const v = get(summary, path);
    if (typeof v !== "number") continue;
    into.append(el("div", {class: "figure", "data-key": path.join(".")},
      el("div", {class: "value"}, fmt(v)), el("div", {class: "name"}, name)));
  }
}

function chartBox(title, height, wide) {
  const canvas = el("canvas", {});
  const box = el("figure", {class: wide ? "chart wide" : "chart"}, el("figcaption", {}, title),
    el("div", {class: "canvas", style: `height:${height || 220}px`}, canvas));
  document.getElementById("charts").append(box);
  return canvas;
}

function barChart(canvas, labels, datasets, {horizontal = false, max, log = false, title} = {}) {
  const value = horizontal ? "x" : "y";
  const scales = {[value]: {beginAtZero: !log, type: log ? "logarithmic" : "linear"}};
  if (max !== undefined) scales[value].max = max;
  if (title) scales[value].title = {display: true, text: title};
  return new Chart(canvas, {
    type: "bar", data: {labels, datasets},
    options: {indexAxis: horizontal ? "y" : "x", animation: false, maintainAspectRatio: false, scales,
              plugins: {legend: {display: datasets.length > 1}}},
  });
}

function scoresChart(s) {
  const groups = [["all", "all"], ["single_answer", "single-answer"]].filter(([k]) => get(s, [k, "n"]));
  if (!groups.length) return;
  const datasets = [];
  for (const [key, name] of groups) {
    for (const kind of ["macro", "micro"]) {
      datasets.push({label: `${kind}, ${name} (n=${s[key].n})`, backgroundColor: COLORS[kind] + (key === "all" ? "" : "88"),
                     data: ["precision", "recall", "f1"].map((m) => s[key][`${kind}_${m}`])});
    }
  }
  barChart(chartBox("Precision, recall and F1"), ["precision", "recall", "F1"], datasets, {max: 1});
}

function linkingChart(s) {
  const keys = ["entity", "relation", "property", "triple"].filter((k) => get(s, ["linking", k, "n"]));
  if (!keys.length) return;
  barChart(chartBox("Linking accuracy"), keys.map((k) => `${k} (n=${s.linking[k].n})`),
           [{label: "accuracy", backgroundColor: COLORS.ok, data: keys.map((k) => s.linking[k].accuracy)}], {max: 1});
}

function failureChart(counts, title = "Failure classes (questions)") {
  const names = Object.keys(counts);
  if (!names.length) return;
  barChart(chartBox(title, 40 + 28 * names.length), names,
           [{label: "questions", data: names.map((n) => counts[n]), backgroundColor: names.map((n) => COLORS[n] || "#999")}],
           {horizontal: true});
}

function propertyChart(s) {
  const rows = (s.by_property || []).filter((r) => r.f1 !== null && r.f1 !== undefined);
  if (!rows.length) return;
  barChart(chartBox("Macro F1 by gold property", Math.min(300, 40 + 18 * rows.length), true),
           rows.map((r) => `${short(`${r.property} ${r.label || ""}`, 40)} (n=${r.questions})`),
           [{label: "macro F1", backgroundColor: COLORS.macro, data: rows.map((r) => r.f1)}], {horizontal: true, max: 1});
}

function short(text, n) {
  return text.length <= n ? text : text.slice(0, n - 1) + "…";
}

// The metrics on slices of the questions, where the summary holds them (kifqa eval).
function slicesChart(s) {
  const rows = Object.entries(s.slices || {}).filter(([, m]) => typeof get(m, ["all", "macro_f1"]) === "number" && m.all.n);
  if (!rows.length) return;
  barChart(chartBox("Macro F1 by slice", Math.min(300, 40 + 22 * rows.length), true),
           rows.map(([name, m]) => `${short(name.replaceAll("_", " "), 28)} (n=${m.all.n})`),
           [{label: "macro F1", backgroundColor: COLORS.macro, data: rows.map(([, m]) => m.all.macro_f1)}],
           {horizontal: true, max: 1});
}

// The calibration of the confidence, where the summary holds one (kifqa eval): precision against coverage.
function calibrationChart(s) {
  const cal = s.calibration || {};
  const curves = [[cal.curve, `all (${fmt(cal.questions)} questions)`],
                  [(cal.held_out || {}).check_curve, "check half"]].filter(([points]) => Array.isArray(points) && points.length);
  if (!curves.length) return;
  const datasets = curves.map(([points, label], k) => ({
    label, showLine: true, borderColor: k ? COLORS.micro : COLORS.macro, backgroundColor: k ? COLORS.micro : COLORS.macro,
    data: points.filter((p) => typeof p.precision === "number").map((p) => ({x: p.coverage, y: p.precision}))}));
  new Chart(chartBox("Precision against coverage by confidence threshold", 260, true), {
    type: "scatter", data: {datasets},
    options: {animation: false, maintainAspectRatio: false,
              scales: {x: {min: 0, max: 1, title: {display: true, text: "coverage (share of questions kept)"}},
                       y: {max: 1, title: {display: true, text: "precision of the kept"}}}},
  });
}

function quantile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.round(p * (sorted.length - 1)))];
}

function latencyChart(cols) {
  const stats = [];
  for (const step of ["draft", "entities", "relations", "answers", "total"]) {
    const column = cols[step === "total" ? "seconds" : `t_${step}`] || [];
    const values = Float64Array.from(column.filter((v) => typeof v === "number" && v > 0)).sort();
    if (!values.length) continue;
    stats.push({step, n: values.length, p50: quantile(values, 0.5), p90: quantile(values, 0.9),
                p99: quantile(values, 0.99), max: values[values.length - 1]});
  }
  if (!stats.length) return;
  const shades = {p50: "#4C72B0", p90: "#8FAADC", p99: "#C9D6EE", max: "#E5E5E5"};
  barChart(chartBox("Seconds per question and step (log scale)"), stats.map((s) => `${s.step} (n=${s.n})`),
           Object.keys(shades).map((p) => ({label: p, backgroundColor: shades[p], data: stats.map((s) => s[p])})),
           {log: true, title: "seconds"});
}

function confidenceChart(values) {
  const v = values.filter((x) => typeof x === "number");
  if (!v.length) return;
  const bins = new Array(10).fill(0);
  for (const x of v) bins[Math.min(9, Math.floor(x * 10))]++;
  barChart(chartBox("Confidence of the answered questions"), bins.map((_, i) => `${(i / 10).toFixed(1)}–${((i + 1) / 10).toFixed(1)}`),
           [{label: "questions", backgroundColor: COLORS.macro, data: bins}]);
}

function countBy(values) {
  const counts = {};
  for (const v of values) counts[v || "ok"] = (counts[v || "ok"] || 0) + 1;
  return counts;
}

// Every figure of the summary, whatever it holds: dicts as two-column tables, lists of dicts as tables.
function anyValue(v) {
  if (v === null || typeof v !== "object") return fmt(v);
  if (Array.isArray(v)) {
    if (v.length && v.every((x) => x && typeof x === "object" && !Array.isArray(x))) {
      const keys = [...new Set(v.flatMap(Object.keys))];
      return table(keys, v.map((x) => keys.map((k) => anyValue(x[k]))));
    }
    return v.map((x) => (typeof x === "object" ? JSON.stringify(x) : fmt(x))).join(", ");
  }
  return table(["", ""], Object.entries(v).map(([k, x]) => [k, anyValue(x)]), "plain keyed");
}

function drawSummary() {
  const s = D.summary || {};
  const figures = document.getElementById("figures");
  if (D.kind === "compare") {
    drawCompareSummary(s, figures);
  } else {
    figureCards(s, figures);
    scoresChart(s);
    linkingChart(s);
    failureChart(countBy(D.columns.failure));
    propertyChart(s);
    latencyChart(D.columns);
    slicesChart(s);
    calibrationChart(s);
    if (D.columns.confidence) confidenceChart(D.columns.confidence);
  }
  document.getElementById("all-figures-body").append(anyValue(s));
}

function drawCompareSummary(s, figures) {
  const [a, b] = D.names;
  const q = s.questions || {};
  figures.append(el("p", {class: "compare-about"},
    `A = ${a}, B = ${b}: ${fmt(q.common)} questions in both (${fmt(q.a)} in A, ${fmt(q.b)} in B); `,
    `${fmt(D.n)} changed: ${fmt(q.better)} better in B, ${fmt(q.worse)} worse.`));
  if ((s.metrics || []).length) {
    figures.append(table(["metric", "A", "B", "B − A"], s.metrics.map((m) =>
      [m.metric, fmt(m.a), fmt(m.b), m.delta === null ? "–" : (m.delta > 0 ? "+" : "") + fmt(m.delta)]), "plain deltas"));
    const shown = s.metrics.filter((m) => m.a !== null && m.b !== null && /F1|precision|recall|linking/.test(m.metric));
    barChart(chartBox("A and B"), shown.map((m) => m.metric),
             [{label: "A", backgroundColor: COLORS.macro, data: shown.map((m) => m.a)},
              {label: "B", backgroundColor: COLORS.micro, data: shown.map((m) => m.b)}], {max: 1});
  }
  failureChart(s.transitions || {}, "Failure class changes, A → B (questions)");
}

// --- the question table ------------------------------------------------------------------------------

function answersFormatter(cell) {
  const answers = cell.getValue() || [];
  const total = cell.getRow().getData()[cell.getField().replace("answers", "n_answers")] || 0;
  return el("span", {}, answers.map(([id, label], k) =>
    el("span", {class: "answer"}, k ? "; " : "", label || id, label && label !== id ? el("small", {}, ` ${id}`) : null)),
    total > answers.length ? el("small", {}, ` … ${fmt(total)} in all`) : null);
}

function numberColumn(title, field, digits) {
  return {title, field, hozAlign: "right", sorter: "number", width: 88,
          formatter: (cell) => (cell.getValue() === null || cell.getValue() === undefined ? "" : fmt(cell.getValue(), digits))};
}

function columnsOf() {
  const c = D.columns;
  const cols = [{title: "id", field: "id", width: 140, sorter: "alphanum"},
                {title: "question", field: "question", minWidth: 220, widthGrow: 3}];
  const side = (p, name) => [
    {title: `${name}answers`, field: `${p}answers`, minWidth: 180, widthGrow: 2, formatter: answersFormatter,
     sorter: (x, y) => answerText(x).localeCompare(answerText(y))},
    ...(c[`${p}f1`] && c[`${p}f1`].some((v) => v !== null) ? [numberColumn(`${name}F1`, `${p}f1`, 2)] : []),
    {title: `${name}failure`, field: `${p}failure`, width: 96},
  ];
  if (D.kind === "compare") {
    cols.push({title: "change", field: "change", width: 90}, ...side("a_", "A "), ...side("b_", "B "),
              numberColumn("A s", "a_seconds", 2), numberColumn("B s", "b_seconds", 2));
    return cols;
  }
  cols.push(...side("", ""));
  if (c.detail) cols.push({title: "detail", field: "detail", minWidth: 140, widthGrow: 1});
  cols.push({title: "step error", field: "error_step", width: 96}, numberColumn("seconds", "seconds", 2),
            numberColumn("LLM calls", "llm_calls", 0));
  if (c.confidence) cols.push(numberColumn("confidence", "confidence", 2));
  return cols;
}

function options(select, counts, all) {
  select.append(el("option", {value: ""}, all));
  for (const [value, n] of Object.entries(counts).sort((x, y) => y[1] - x[1])) {
    select.append(el("option", {value}, `${value} (${n.toLocaleString("en")})`));
  }
}

function drawTable() {
  const c = D.columns;
  const failures = D.kind === "compare" ? [c.a_failure, c.b_failure] : [c.failure];
  const steps = D.kind === "compare" ? [c.a_error_step, c.b_error_step] : [c.error_step];
  const failureCounts = {}, stepCounts = {};
  for (let i = 0; i < D.n; i++) {
    for (const f of new Set(failures.map((col) => col[i] || "ok"))) failureCounts[f] = (failureCounts[f] || 0) + 1;
    for (const s of new Set(steps.map((col) => col[i] || "none"))) stepCounts[s] = (stepCounts[s] || 0) + 1;
  }
  const failureSelect = document.getElementById("failure-filter");
  const stepSelect = document.getElementById("step-filter");
  options(failureSelect, failureCounts, "all classes");
  options(stepSelect, stepCounts, "any");
  const search = document.getElementById("search");
  const fields = D.kind === "compare" ? [["a_failure", "a_error_step"], ["b_failure", "b_error_step"]] : [["failure", "error_step"]];

  const table = new Tabulator("#table", {
    data: ROWS, index: "i", maxHeight: "480px", layout: "fitColumns", columns: columnsOf(),
    placeholder: "No question matches", selectableRows: false,
  });
  const shown = document.getElementById("shown");
  const apply = () => {
    const text = search.value.trim().toLowerCase();
    const failure = failureSelect.value, step = stepSelect.value;
    if (!text && !failure && !step) table.clearFilter(true);
    else table.setFilter((row) => (!text || searchText(row).includes(text)) &&
      fields.some(([f, s]) => (!failure || (row[f] || "ok") === failure) && (!step || (row[s] || "none") === step)));
  };
  table.on("dataFiltered", (filters, rows) => { shown.textContent = `${rows.length.toLocaleString("en")} of ${D.n.toLocaleString("en")} questions`; });
  table.on("rowClick", (e, row) => openQuestion(row.getData().i));
  search.addEventListener("input", apply);
  failureSelect.addEventListener("change", apply);
  stepSelect.addEventListener("change", apply);
  return new Promise((resolve) => table.on("tableBuilt", () => {
    shown.textContent = `${D.n.toLocaleString("en")} of ${D.n.toLocaleString("en")} questions`;
    resolve(table);
  }));
}

// --- one question's trace ----------------------------------------------------------------------------

function step(title, ...body) {
  return el("section", {class: "step"}, el("h3", {}, title), ...body);
}

function same(a, b) {
  return a && b && a.entity === b.entity && a.property === b.property && a.direction === b.direction;
}

function traceView(side) {
  const t = side.trace || {};
  const out = el("div", {class: "side"});
  const gold = side.gold ? new Set(side.gold) : null;
  out.append(el("dl", {class: "outcome"},
    el("dt", {}, "answers"), el("dd", {}, side.answers && side.answers.length ? el("ul", {class: "answers"},
      side.answers.map(([id, label]) => el("li", {"data-id": id, class: gold ? (gold.has(id) ? "right" : "wrong") : null},
        label || id, label && label !== id ? el("small", {}, ` ${id}`) : null))) : "none"),
    gold ? [el("dt", {}, "gold"), el("dd", {class: "gold"}, side.gold.length ? side.gold.join(", ") : "none")] : null,
    side.f1 !== null && side.f1 !== undefined ? [el("dt", {}, "P / R / F1"),
      el("dd", {class: "score"}, `${fmt(side.precision, 2)} / ${fmt(side.recall, 2)} / ${fmt(side.f1, 2)}`)] : null,
    el("dt", {}, "failure"), el("dd", {class: "failure"}, side.failure || "none", side.detail ? ` — ${side.detail}` : ""),
    side.confidence !== undefined && side.confidence !== null ? [el("dt", {}, "confidence"), el("dd", {}, fmt(side.confidence, 2))] : null,
    t.error ? [el("dt", {}, "error"), el("dd", {class: "error"}, `${t.error_step || "?"}: ${t.error}`)] : null,
    el("dt", {}, "model · KB"), el("dd", {}, `${t.model || "–"} · ${t.kb || "–"}`)));

  const draft = t.draft || [];
  out.append(step("1 · Draft",
    el("pre", {class: "draft-output"}, t.draft_output || "(no model output)"),
    draft.length ? table(["subject", "predicate", "object"], draft.map((p) => [p.subject, p.predicate, p.object]), "plain patterns")
                 : el("p", {}, "no pattern"),
    (t.examples || []).length ? el("details", {}, el("summary", {}, `${t.examples.length} few-shot examples`),
      el("ul", {}, t.examples.map((x) => el("li", {}, x)))) : null));

  const kept = new Set(t.entities || []);
  const candidates = t.candidates || [];
  const total = t.candidates_total || candidates.length;
  out.append(step(`2 · Entities: ${kept.size} kept of ${fmt(total)} candidates` +
                  (total > candidates.length ? ` (the first ${D.candidates_shown} and the kept ones shown)` : ""),
    candidates.length ? table(["kept", "id", "label", "aliases", "description", "score"], candidates.map((c) => ({
      attrs: {class: kept.has(c.id) ? "kept" : null, "data-id": c.id},
      cells: [kept.has(c.id) ? "✓" : "", c.id, c.label, (c.aliases || []).join(", "), c.description, fmt(c.score, 2)]})),
      "plain candidates") : el("p", {}, "no candidate")));

  const chosen = t.relations || [];
  const opts = t.options || [];
  out.append(step(`3 · Relations: ${chosen.length} chosen of ${opts.length} options`,
    opts.length ? table(["chosen", "entity", "property", "direction"], opts.map((o) => ({
      attrs: {class: chosen.some((r) => same(r, o)) ? "kept" : null},
      cells: [chosen.some((r) => same(r, o)) ? "✓" : "", o.entity, o.property, o.direction]})), "plain options")
      : el("p", {}, "no option")));

  const filters = t.filters || [];
  out.append(step(`4 · Filters: ${filters.length}`, filters.length ? filters.map((f) => el("div", {class: "filter"},
    el("p", {}, `${f.relation.entity} ${f.relation.property} ${f.relation.direction}: ${fmt(f.n_statements)} statements, `,
       `${fmt(f.seconds, 3)} s`, f.truncated ? " (truncated)" : ""),
    el("pre", {class: "sparql"}, f.sparql),
    el("details", {}, el("summary", {}, "KIF filter"), el("pre", {class: "kif"}, f.filter)))) : el("p", {}, "no filter")));

  const timings = Object.entries(t.timings || {});
  out.append(step("Timings", timings.length ? table(["step", "seconds"], timings.map(([k, v]) => [k, fmt(v, 3)]), "plain timings")
                                            : el("p", {}, "none"),
                  el("p", {}, `${fmt(t.kb_calls || 0)} KB calls, ${fmt(t.n_answers || 0)} answers`)));

  const calls = t.llm_calls || [];
  out.append(step(`Model calls: ${calls.length}`, calls.length ? table(
    ["step", "prompt tokens", "cached prompt tokens", "completion tokens", "seconds", "replayed", "output", "error"],
    calls.map((c) => [c.step, fmt(c.prompt_tokens), fmt(c.cached_prompt_tokens), fmt(c.completion_tokens),
                      fmt(c.latency_s, 3), c.cache_hit ? "yes" : "no", el("code", {}, c.output || ""), c.error || ""]),
    "plain calls") : el("p", {}, "none")));
  if ((t.notes || []).length) out.append(step("Notes", el("ul", {}, t.notes.map((n) => el("li", {}, n)))));
  return out;
}

async function openQuestion(i, {scroll = true} = {}) {
  const row = ROWS[i];
  const rec = await record(i);
  const view = document.getElementById("trace");
  view.hidden = false;
  view.replaceChildren(el("h2", {}, el("span", {class: "qid"}, row.id), " ", el("span", {class: "question"}, row.question)));
  view.dataset.id = row.id;
  if (D.kind === "compare") {
    const side = (p, r) => ({...r, answers: row[`${p}answers`].concat(r.more_answers), f1: row[`${p}f1`],
                             failure: row[`${p}failure`]});
    view.append(el("div", {class: "sides"},
      el("div", {class: "side-a"}, el("h3", {}, `A: ${D.names[0]}`), traceView(side("a_", rec.a))),
      el("div", {class: "side-b"}, el("h3", {}, `B: ${D.names[1]}`), traceView(side("b_", rec.b)))));
  } else {
    view.append(traceView({...rec, answers: row.answers.concat(rec.more_answers), f1: row.f1, failure: row.failure,
                           detail: row.detail, confidence: row.confidence}));
  }
  history.replaceState(null, "", `#${encodeURIComponent(row.id)}`);
  if (getComputedStyle(view).position === "sticky") view.scrollTop = 0;  // beside the table
  else if (scroll) view.scrollIntoView({block: "start"});
}

// report.html#ID opens question ID.
async function openFromHash() {
  const id = decodeURIComponent(location.hash.slice(1));
  const row = id && ROWS.find((r) => r.id === id);
  if (row) await openQuestion(row.i, {scroll: false});
}

// --- start -------------------------------------------------------------------------------------------

async function main() {
  const status = document.getElementById("status");
  try {
    await loadLibrary("lib-tabulator");
    await loadLibrary("lib-chart");
    performance.mark("kifqa:libraries");
    D = JSON.parse(await unpack(document.getElementById("data")));
    document.body.classList.add(D.kind);
    document.getElementById("title").textContent = D.title;
    document.getElementById("about").textContent = D.about || "";
    ROWS = makeRows();
    performance.mark("kifqa:data");
    drawSummary();
    performance.mark("kifqa:summary");
    await drawTable();
    performance.mark("kifqa:table");
    await openFromHash();
    status.textContent = "";
    document.documentElement.dataset.state = "ready";
  } catch (err) {
    status.textContent = `The report could not be shown: ${err}`;
    document.documentElement.dataset.state = "error";
    throw err;
  }
}

main();
