// Subagent tree, queue and effects, logs and cost.

import { api, pkg } from "./api.js";
import { ago, clear, debounce, h, json, money, time } from "./dom.js";
import { errorBox } from "./app.js";

const enc = encodeURIComponent;

// A child thread lives under its own package: try the parent's first, then the others.
async function findThread(ctx, id) {
  try {
    return { packageName: ctx.packageName, thread: await ctx.call(`/threads/${enc(id)}`) };
  } catch (error) {
    if (error.status !== 404) throw error;
  }
  const { packages } = await api("/packages");
  for (const p of packages) {
    if (p.name === ctx.packageName) continue;
    try {
      return { packageName: p.name, thread: await pkg(p.name)(`/threads/${enc(id)}`) };
    } catch {
      /* not in this package */
    }
  }
  return null;
}

// [{entry, packageName, thread, children: [...]}] for every descendant, depth first.
export async function subagentTree(ctx, thread = ctx.thread, depth = 0) {
  if (depth > 8) return [];
  return Promise.all(thread.children.map(async (entry) => {
    const found = await findThread(ctx, entry.reference).catch(() => null);
    return {
      entry,
      packageName: found ? found.packageName : ctx.packageName,
      thread: found ? found.thread : null,
      children: found ? await subagentTree(ctx, found.thread, depth + 1) : [],
    };
  }));
}

function flatten(nodes) {
  return nodes.flatMap((node) => [node, ...flatten(node.children)]);
}

function treeList(nodes) {
  return h("ul", { class: "tree" }, nodes.map(({ entry, packageName, thread, children }) => {
    const relation = [
      entry.blocking ? "blocking" : "non-blocking",
      entry.resumable ? "resumable" : null,
      entry.parent_communication ? `${entry.parent_communication} reports` : null,
    ].filter(Boolean).join(", ");
    return h("li", {},
      h("a", { href: `#/p/${enc(packageName)}/t/${entry.reference}`, class: "child-link" },
        entry.thread_name ? `${entry.name} · ${entry.thread_name}` : entry.name),
      " ",
      h("span", { class: `badge s-${entry.status}` }, entry.status),
      h("span", { class: "muted" }, ` ${relation}${thread ? ` · agent ${thread.agent}` : ""} · ${ago(entry.created_at)}`),
      children.length ? treeList(children) : null);
  }));
}

export async function subagentsTab(panel, ctx) {
  async function load() {
    try {
      const thread = await ctx.call(`/threads/${enc(ctx.threadId)}`);
      const tree = await subagentTree(ctx, thread);
      clear(panel,
        h("h2", {}, "Subagents"),
        tree.length ? treeList(tree) : h("p", { class: "muted" }, "This thread has started no subagents."));
    } catch (error) {
      clear(panel, errorBox(error));
    }
  }
  const reload = debounce(load, 400);
  const listener = (frame) => {
    if (frame.type === "message_data" || frame.type === "event") reload();
  };
  ctx.listeners.add(listener);
  await load();
  return () => ctx.listeners.delete(listener);
}

export async function queueTab(panel, ctx) {
  const base = `/threads/${enc(ctx.threadId)}`;
  async function load() {
    try {
      const [{ queue }, { effects }] = await Promise.all([ctx.call(`${base}/queue`), ctx.call(`${base}/effects`)]);
      const cancel = (url, label) => h("button", {
        type: "button",
        class: "danger",
        "aria-label": label,
        onclick: async () => {
          try {
            await ctx.call(url, { method: "DELETE" });
          } catch (error) {
            panel.prepend(errorBox(error));
          }
          await load();
        },
      }, "Cancel");
      clear(panel,
        h("h2", {}, "Queued messages"),
        queue.length
          ? h("ul", { class: "plain" }, queue.map((q) => h("li", {},
            h("span", { class: "badge" }, q.role), q.silent ? h("span", { class: "badge" }, "silent") : null, " ",
            q.content.slice(0, 200), " ", h("span", { class: "muted" }, ago(q.created_at)), " ",
            cancel(`${base}/queue/${enc(q.id)}`, `Cancel queued message ${q.id}`))))
          : h("p", { class: "muted" }, "Nothing is queued."),
        h("h2", {}, "Scheduled effects"),
        effects.length
          ? h("ul", { class: "plain" }, effects.map((e) => h("li", {},
            h("strong", {}, e.name), ` at ${time(e.scheduled_at)} `, h("code", {}, json(e.args)), " ",
            cancel(`${base}/effects/${enc(e.id)}`, `Cancel effect ${e.name}`))))
          : h("p", { class: "muted" }, "No effects are scheduled."));
    } catch (error) {
      clear(panel, errorBox(error));
    }
  }
  const reload = debounce(load, 300);
  const listener = (frame) => {
    if (frame.type === "queued" || frame.type === "message_data") reload();
  };
  ctx.listeners.add(listener);
  await load();
  return () => ctx.listeners.delete(listener);
}

function totals(logs) {
  const sum = { calls: 0, input: 0, cacheRead: 0, cacheWrite: 0, output: 0, cost: 0, errors: 0, priced: false };
  for (const log of logs) {
    if (log.type !== "llm_call") continue;
    const d = log.data;
    sum.calls += 1;
    sum.input += d.input_tokens || 0;
    sum.cacheRead += d.cached_tokens || 0;
    sum.cacheWrite += d.cache_write_tokens || 0;
    sum.output += d.output_tokens || 0;
    if (d.cost_total !== null && d.cost_total !== undefined) {
      sum.cost += d.cost_total;
      sum.priced = true;
    }
    if (d.error) sum.errors += 1;
  }
  return sum;
}

function totalsLine(label, sum) {
  return h("tr", {},
    h("th", { scope: "row" }, label),
    h("td", {}, String(sum.calls)),
    h("td", {}, String(sum.input)),
    h("td", {}, String(sum.cacheRead)),
    h("td", {}, String(sum.cacheWrite)),
    h("td", {}, String(sum.output)),
    h("td", {}, sum.priced ? money(sum.cost) : "–"),
    h("td", {}, String(sum.errors)));
}

async function allLogs(call, threadId) {
  const logs = [];
  for (let offset = 0; offset < 5000; offset += 500) {
    const page = await call(`/threads/${enc(threadId)}/logs?limit=500&offset=${offset}&order=desc`);
    logs.push(...page.logs);
    if (page.logs.length < 500) break;
  }
  return logs;
}

export async function logsTab(panel, ctx) {
  async function load() {
    const thread = await ctx.call(`/threads/${enc(ctx.threadId)}`);
    const [logs, tree] = await Promise.all([allLogs(ctx.call, ctx.threadId), subagentTree(ctx, thread)]);
    const descendants = flatten(tree).filter((n) => n.thread);
    const childLogs = (await Promise.all(descendants.map((n) => allLogs(pkg(n.packageName), n.entry.reference)))).flat();
    const own = totals(logs);
    const all = totals([...logs, ...childLogs]);
    const rows = logs.map((log) => {
      const d = log.data || {};
      if (log.type !== "llm_call") {
        return h("tr", { class: "other" }, h("td", {}, time(log.created_at)), h("td", { colspan: 10 }, `${log.type}: ${d.error || d.name || json(d).slice(0, 200)}`));
      }
      return h("tr", { class: d.error ? "failed" : "" },
        h("td", {}, time(log.created_at)),
        h("td", {}, d.provider || "–"),
        h("td", {}, d.model || "–", d.model_name && d.model_name !== d.model ? h("span", { class: "muted" }, ` (${d.model_name})`) : null),
        h("td", { class: "num" }, String(d.input_tokens ?? 0)),
        h("td", { class: "num" }, String(d.cached_tokens ?? 0)),
        h("td", { class: "num" }, String(d.cache_write_tokens ?? 0)),
        h("td", { class: "num" }, String(d.output_tokens ?? 0)),
        h("td", { class: "num" }, money(d.cost_total)),
        h("td", { class: "num" }, d.latency_ms !== null && d.latency_ms !== undefined ? `${Math.round(d.latency_ms)} ms` : "–"),
        h("td", {}, d.finish_reason || "–"),
        h("td", {}, d.error ? `${d.error_type || "error"}: ${d.error}` : ""));
    });
    clear(panel,
      h("h2", {}, "Totals"),
      h("div", { class: "scroll" }, h("table", { class: "totals" },
        h("thead", {}, h("tr", {}, ["", "Model calls", "Input tokens", "Cache read", "Cache write", "Output tokens", "Cost", "Errors"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {},
          totalsLine("This thread", own),
          totalsLine(`With ${descendants.length} descendant thread(s)`, all)))),
      h("h2", {}, "Model calls and events"),
      logs.length
        ? h("div", { class: "scroll" }, h("table", { class: "logs" },
          h("caption", { class: "sr-only" }, "Log rows, newest first"),
          h("thead", {}, h("tr", {}, ["Time", "Provider", "Model", "In", "Cache read", "Cache write", "Out", "Cost", "Latency", "Finish", "Error"].map((c) => h("th", { scope: "col" }, c)))),
          h("tbody", {}, rows)))
        : h("p", { class: "muted" }, "No model calls yet."));
  }
  const reload = debounce(() => load().catch((error) => clear(panel, errorBox(error))), 500);
  const listener = (frame) => {
    if (frame.type === "message_data") reload();
  };
  ctx.listeners.add(listener);
  await load();
  return () => ctx.listeners.delete(listener);
}
