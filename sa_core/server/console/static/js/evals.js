// The Evals view: a package's eval runs, a run's cases x trials matrix coloured by score, a
// trial beside the expectations that decided it, and two runs side by side.

import { pkg } from "./api.js";
import { ago, clear, h, json, money } from "./dom.js";

const base = (p) => `#/p/${encodeURIComponent(p)}/evals`;
const pct = (value) => `${Math.round(Number(value) * 100)}%`;

function scoreClass(score, passed) {
  if (passed) return "cell s-pass";
  return score > 0 ? "cell s-partial" : "cell s-fail";
}

export async function evalsView(main, packageName) {
  const { runs, total } = await pkg(packageName)("/evals/runs?limit=50");
  const rows = runs.map((r) =>
    h("tr", {},
      h("td", {}, h("a", { href: `${base(packageName)}/${r.id}` }, r.id)),
      h("td", {}, r.suite),
      h("td", {}, r.target),
      h("td", {}, h("span", { class: `badge s-${r.status === "finished" ? "done" : "running"}` }, r.status)),
      h("td", {}, String(r.trials)),
      h("td", {}, pct(r.pass_at_1)),
      h("td", {}, money(r.cost_usd)),
      h("td", {}, ago(r.created_at))));
  const options = (selected) => runs.map((r, i) =>
    h("option", { value: r.id, selected: i === selected }, `${r.id} · ${r.suite} · ${pct(r.pass_at_1)}`));
  const before = h("select", { id: "cmp-a" }, options(1));
  const after = h("select", { id: "cmp-b" }, options(0));
  const compare = runs.length > 1 ? h("form", {
    class: "filters",
    "aria-label": "Compare two runs",
    onsubmit: (event) => {
      event.preventDefault();
      location.hash = `${base(packageName)}/${after.value}/vs/${before.value}`;
    },
  },
  h("span", { class: "pair" }, h("label", { for: "cmp-a" }, "Baseline"), before),
  h("span", { class: "pair" }, h("label", { for: "cmp-b" }, "Run"), after),
  h("button", { type: "submit" }, "Compare")) : null;
  clear(main,
    h("h1", {}, `Evals of ${packageName}`),
    h("p", { class: "muted" }, total
      ? `${total} run(s). Run a suite with 'sa eval run SUITE.yaml' on this server's database.`
      : "No eval runs yet: run a suite with 'sa eval run SUITE.yaml' on this server's database."),
    compare,
    runs.length ? h("div", { class: "scroll" }, h("table", {},
      h("caption", { class: "sr-only" }, "Eval runs, newest first"),
      h("thead", {}, h("tr", {}, ["Run", "Suite", "Target", "Status", "Trials", "pass@1", "Cost", "Started"]
        .map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows))) : null);
}

function matrix(packageName, run, label) {
  const byCase = new Map();
  for (const trial of run.trials) {
    if (!byCase.has(trial.case_id)) byCase.set(trial.case_id, []);
    byCase.get(trial.case_id).push(trial);
  }
  const width = Math.max(1, ...[...byCase.values()].map((t) => t.length));
  const k = run.summary.k || width;
  const rows = run.cases.map((c) => h("tr", {},
    h("th", { scope: "row" }, c.id),
    Array.from({ length: width }, (_, i) => {
      const trial = (byCase.get(c.id) || []).find((t) => t.trial === i);
      if (!trial) return h("td", {});
      const text = trial.passed ? "pass" : "fail";
      return h("td", {}, h("a", {
        class: scoreClass(trial.score, trial.passed),
        href: `${base(packageName)}/${run.run_id}/c/${encodeURIComponent(c.id)}/${i}`,
        "aria-label": `${c.id} trial ${i}: ${text}, score ${trial.score.toFixed(2)}`,
        title: trial.scores.filter((s) => !s.passed).map((s) => `${s.name}: ${s.reason}`).join("\n") || "all expectations passed",
      }, `${text} ${trial.score.toFixed(2)}`));
    }),
    h("td", {}, `${c.passed}/${c.n}`),
    h("td", {}, pct(c.pass_at_k[String(k)] ?? c.pass_rate)),
    h("td", {}, pct(c.pass_hat_k[String(k)] ?? c.pass_rate)),
    h("td", {}, money(c.cost_usd)),
    h("td", {}, `${c.latency_p50.toFixed(2)} / ${c.latency_p95.toFixed(2)} s`)));
  return h("div", { class: "scroll" }, h("table", { class: "matrix", "aria-label": label },
    h("caption", { class: "sr-only" }, label),
    h("thead", {}, h("tr", {},
      h("th", { scope: "col" }, "Case"),
      Array.from({ length: width }, (_, i) => h("th", { scope: "col" }, `Trial ${i}`)),
      [ "Passed", `pass@${k}`, `pass^${k}`, "Cost", "p50 / p95"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows)));
}

export async function evalRunView(main, packageName, runId) {
  const run = await pkg(packageName)(`/evals/runs/${encodeURIComponent(runId)}`);
  const s = run.summary;
  clear(main,
    h("p", {}, h("a", { href: base(packageName) }, "← Eval runs")),
    h("h1", {}, `${run.suite} · ${run.run_id}`),
    h("dl", { class: "facts" },
      h("dt", {}, "Target"), h("dd", {}, run.target),
      h("dt", {}, "Status"), h("dd", {}, run.status),
      h("dt", {}, "pass@1"), h("dd", {}, pct(s.pass_at_1)),
      h("dt", {}, "Cost"), h("dd", {}, money(s.cost_usd)),
      h("dt", {}, "Latency p50 / p95"), h("dd", {}, `${s.latency_p50.toFixed(2)} / ${s.latency_p95.toFixed(2)} s`),
      h("dt", {}, "Cache"), h("dd", {}, run.cache),
      run.comparison ? [h("dt", {}, "Regressions"), h("dd", {}, run.comparison.regressions.join(", ") || "none")] : null),
    h("h2", {}, "Cases × trials"),
    matrix(packageName, run, `Cases and trials of ${run.run_id}`));
}

function scoreItem(score) {
  const samples = score.details && score.details.samples;
  return h("li", { class: `card expectation ${score.passed ? "ok" : "bad"}` },
    h("h3", {}, h("span", { class: `badge s-${score.passed ? "done" : "failed"}` }, score.passed ? "pass" : "fail"),
      h("code", {}, score.name), score.required ? h("span", { class: "tag" }, "required") : null),
    h("p", {}, score.reason),
    samples ? h("ol", { class: "samples" }, samples.map((x) =>
      h("li", {}, `${x.verdict === true ? "yes" : x.verdict === false ? "no" : "?"}: ${x.reasoning}`))) : null);
}

function messageItem(message) {
  const calls = (message.tool_calls || []).map((c) =>
    h("li", {}, h("code", {}, c.function.name), " ", h("span", { class: "muted" }, c.function.arguments)));
  return h("li", { class: `msg r-${message.role}` },
    h("strong", {}, message.role === "tool" ? `tool result (${message.name || ""})` : message.role),
    message.content ? h("pre", { class: "wrap" }, message.role === "tool" ? json(message.content) : message.content) : null,
    calls.length ? h("ul", { class: "calls", "aria-label": "Tool calls" }, calls) : null);
}

function childItem(packageName, child) {
  return h("li", { class: "msg r-assistant" },
    h("strong", {}, `${child.path} · ${child.mode} · ${child.status}`), " ",
    h("a", { href: `#/p/${encodeURIComponent(packageName)}/t/${child.thread_id}` }, "open"),
    child.calls.length
      ? h("ul", { class: "calls", "aria-label": `Tool calls of ${child.path}` }, child.calls.map((c) =>
        h("li", {}, h("code", {}, c.name), " ", h("span", { class: "muted" }, JSON.stringify(c.arguments)),
          c.ok ? null : h("span", { class: "badge s-failed" }, "failed"))))
      : h("p", { class: "muted" }, "No tool calls."));
}

export async function evalTrialView(main, packageName, runId, caseId, index) {
  const call = pkg(packageName);
  const run = await call(`/evals/runs/${encodeURIComponent(runId)}`);
  const trial = run.trials.find((t) => t.case_id === caseId && t.trial === Number(index));
  if (!trial) throw new Error(`no trial ${index} of case ${caseId} in ${runId}`);
  const failed = trial.scores.filter((s) => !s.passed);
  const messages = trial.thread_id
    ? (await call(`/threads/${trial.thread_id}/messages?limit=200&include_silent=true`)).messages
    : [];
  clear(main,
    h("p", {}, h("a", { href: `${base(packageName)}/${runId}` }, `← ${run.suite} · ${runId}`)),
    h("h1", {}, `${caseId} · trial ${index}: ${trial.passed ? "passed" : "failed"}`),
    trial.thread_id ? h("p", {}, h("a", { href: `#/p/${encodeURIComponent(packageName)}/t/${trial.thread_id}` }, "Open the thread →")) : null,
    trial.error ? h("p", { class: "error" }, trial.error) : null,
    h("div", { class: "split" },
      h("section", { "aria-labelledby": "trial-messages" },
        h("h2", { id: "trial-messages" }, "Messages and tool calls"),
        h("ol", { class: "messages" }, messages.map(messageItem)),
        trial.tree.length ? [
          h("h2", { id: "trial-tree" }, "Subagent threads"),
          h("ol", { class: "messages", "aria-labelledby": "trial-tree" }, trial.tree.map((c) => childItem(packageName, c))),
        ] : null),
      h("section", { "aria-labelledby": "trial-expectations" },
        h("h2", { id: "trial-expectations" }, failed.length ? `Deciding expectations (${failed.length} failed)` : "Expectations (all passed)"),
        h("ul", { class: "expectations" }, [...failed, ...trial.scores.filter((s) => s.passed)].map(scoreItem)))));
}

export async function evalCompareView(main, packageName, runId, baselineId) {
  const call = pkg(packageName);
  const [after, before, cmp] = await Promise.all([
    call(`/evals/runs/${encodeURIComponent(runId)}`),
    call(`/evals/runs/${encodeURIComponent(baselineId)}`),
    call(`/evals/runs/${encodeURIComponent(runId)}/compare/${encodeURIComponent(baselineId)}`),
  ]);
  const was = new Map(before.cases.map((c) => [c.id, c]));
  const verdict = (id) => cmp.regressions.includes(id) ? "regression"
    : cmp.improvements.includes(id) ? "improvement" : cmp.flaky.includes(id) ? "flaky"
      : cmp.added.includes(id) ? "new" : "same";
  const rows = after.cases.map((c) => h("tr", { class: `v-${verdict(c.id)}` },
    h("th", { scope: "row" }, c.id),
    h("td", {}, was.has(c.id) ? pct(was.get(c.id).pass_rate) : "–"),
    h("td", {}, pct(c.pass_rate)),
    h("td", {}, h("span", { class: `badge s-${verdict(c.id) === "regression" ? "failed" : verdict(c.id) === "improvement" ? "done" : "idle"}` }, verdict(c.id)))));
  clear(main,
    h("p", {}, h("a", { href: base(packageName) }, "← Eval runs")),
    h("h1", {}, `${runId} against ${baselineId}`),
    h("p", {}, `Regressions: ${cmp.regressions.join(", ") || "none"} · improvements: ${cmp.improvements.join(", ") || "none"} · flaky: ${cmp.flaky.join(", ") || "none"}`),
    h("div", { class: "scroll" }, h("table", { "aria-label": "Cases of both runs" },
      h("thead", {}, h("tr", {}, ["Case", `Baseline ${baselineId}`, `Run ${runId}`, "Verdict"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows))),
    h("div", { class: "split" },
      h("section", {}, h("h2", {}, `Baseline ${baselineId}`), matrix(packageName, before, `Cases and trials of ${baselineId}`)),
      h("section", {}, h("h2", {}, `Run ${runId}`), matrix(packageName, after, `Cases and trials of ${runId}`))));
}
