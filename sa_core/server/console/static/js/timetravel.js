// Time travel in the console: "Fork from here" and "Rewind to here" on each message that is a
// quiescent point, and the thread's lineage (the fork it is, its forks, its rewinds).

import { h, clear, time } from "./dom.js";
import { errorBox } from "./app.js";

// The message a cut "here" names: a user message, an answer without tool calls, or (for an
// answer with tool calls, whose results show inside it) the round's last result once all are in.
export function cutOf(message, results) {
  if (message.depth || message.status === "pending") return null;
  if (message.role === "user") return message.id;
  if (message.role !== "assistant") return null;
  const calls = message.tool_calls || [];
  if (!calls.length) return message.id;
  const answers = calls.map((call) => results.get(call.id));
  if (answers.some((answer) => !answer)) return null;
  answers.sort((a, b) => a.created_at - b.created_at);
  return answers[answers.length - 1].id;
}

const short = (id) => (id ? `…${id.slice(-6)}` : "");

// The two buttons of one message (nothing for a message that is no quiescent point). On a
// rewound message, "Rewind to here" undoes the rewind that took it out.
export function messageActions(ctx, message, results, notice) {
  const cut = cutOf(message, results);
  if (!cut) return null;
  const base = `/threads/${encodeURIComponent(ctx.threadId)}`;
  const fork = async () => {
    try {
      const made = await ctx.call(`${base}/fork`, { method: "POST", body: { at: cut } });
      location.hash = `#/p/${encodeURIComponent(ctx.packageName)}/t/${made.id}`;
    } catch (error) {
      clear(notice, errorBox(error));
    }
  };
  const rewind = async () => {
    const question = "Rewind this thread to here? Later messages leave its history (they stay " +
      "listed under Show rewound messages, and rewinding to one of them undoes this); files " +
      "and values go back to what they were here.";
    if (!window.confirm(question)) return;
    try {
      await ctx.call(`${base}/rewind`, { method: "POST", body: { to: cut } });
      clear(notice);
      ctx.reloadTab();
    } catch (error) {
      clear(notice, errorBox(error));
    }
  };
  return h("span", { class: "cut-actions" },
    h("button", { type: "button", class: "link", onclick: fork, "aria-label": `Fork from here (message ${short(cut)})` }, "Fork from here"),
    h("button", { type: "button", class: "link", onclick: rewind, "aria-label": `Rewind to here (message ${short(cut)})` }, "Rewind to here"));
}

function threadLink(ctx, id) {
  return h("a", { href: `#/p/${encodeURIComponent(ctx.packageName)}/t/${id}` }, `thread ${short(id)}`);
}

// The lineage of the thread: what it was forked from, the forks made from it, its rewinds.
export async function lineageBox(ctx) {
  const box = h("section", { class: "lineage", "aria-label": "Lineage" });
  let entries = [];
  try {
    entries = (await ctx.call(`/threads/${encodeURIComponent(ctx.threadId)}/lineage`)).entries;
  } catch {
    return box;
  }
  const items = entries.map((entry) => {
    if (entry.kind === "fork" && entry.thread_id === ctx.threadId) {
      return h("li", {}, "Forked from ", threadLink(ctx, entry.source_id),
        entry.message_id ? ` after message ${short(entry.message_id)}` : " at its latest message",
        ` · ${time(entry.created_at)}`);
    }
    if (entry.kind === "fork") {
      return h("li", {}, "Fork: ", threadLink(ctx, entry.thread_id),
        entry.message_id ? ` (after message ${short(entry.message_id)})` : "", ` · ${time(entry.created_at)}`);
    }
    if (entry.kind === "rewind") {
      return h("li", {}, `Rewound to message ${short(entry.message_id)}: ${entry.data.rewound} message(s) left the history`,
        ` · ${time(entry.created_at)}`);
    }
    return h("li", {}, `${entry.kind[0].toUpperCase()}${entry.kind.slice(1)}`,
      entry.source_id ? [" of ", threadLink(ctx, entry.source_id)] : "", ` · ${time(entry.created_at)}`);
  });
  if (items.length) clear(box, h("h2", {}, "Lineage"), h("ul", {}, items));
  return box;
}

// "Replay": the thread run again from its recording (every model answer served from it, tool
// results as recorded), and its report next to the thread: identical, or the first divergence
// (kind, thread path, ordinal, what changed, a readable diff) with a jump to where the replay
// stopped (the replay thread; a child's divergence is under its Subagents tab).
export function replayButton(ctx, box, notice) {
  const run = async (event) => {
    const button = event.currentTarget;
    button.disabled = true;
    clear(box, h("p", { class: "muted" }, "Replaying from the recording…"));
    try {
      const report = await ctx.call(`/threads/${encodeURIComponent(ctx.threadId)}/replay`,
        { method: "POST", body: { tools: "recorded", stop_at_first: true } });
      clear(notice);
      clear(box, ...replayReport(ctx, report));
    } catch (error) {
      clear(box);
      clear(notice, errorBox(error));
    } finally {
      button.disabled = false;
    }
  };
  return h("button", { type: "button", onclick: run }, "Replay");
}

export function replayReport(ctx, report) {
  const counts = `${report.model_calls} model answer(s) served from the recording, ` +
    `${report.tool_results_served} tool result(s) served, ${report.tool_executions} tool(s) run.`;
  const replayHref = (tab) => `#/p/${encodeURIComponent(ctx.packageName)}/t/${report.thread_id}${tab ? `/${tab}` : ""}`;
  const opened = h("a", { href: replayHref("") }, `replay thread ${short(report.thread_id)}`);
  if (report.identical || !report.divergence) {
    return [h("h2", {}, "Replay report"),
      h("p", { class: "identical" }, "Identical: the replay did what the recording did."),
      h("p", { class: "muted" }, counts, " ", opened)];
  }
  const d = report.divergence;
  const where = `${d.path}${d.ordinal ? `, call ${d.ordinal}` : ""}`;
  const more = report.divergences.length > 1 ? ` (and ${report.divergences.length - 1} more)` : "";
  return [h("h2", {}, "Replay report"),
    h("p", { class: "diverged" }, `Diverged${more}: `, h("strong", {}, d.kind.replaceAll("_", " ")), ` at ${where}`),
    h("p", {}, d.summary),
    d.diff ? h("figure", {}, h("figcaption", { class: "muted" }, "What changed"), h("pre", { class: "diff" }, d.diff)) : null,
    h("p", {},
      h("a", { href: replayHref(d.path === "root" ? "" : "subagents"), class: "jump" }, "Jump to the divergence"),
      " · ", opened),
    h("p", { class: "muted" }, counts)];
}
