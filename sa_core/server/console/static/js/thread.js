// One thread: header (status, parent link, stop/terminate), tabs for the conversation, the
// subagent tree, the queue and effects, the files, and the logs with cost. One server-sent
// event stream per open thread keeps every tab live.

import { pkg, stream } from "./api.js";
import { clear, debounce, h } from "./dom.js";
import { errorBox } from "./app.js";
import { conversationTab } from "./conversation.js";
import { filesTab } from "./files.js";
import { logsTab, queueTab, subagentsTab } from "./panels.js";
import { lineageBox, replayButton } from "./timetravel.js";

const TABS = [
  ["conversation", "Conversation"],
  ["subagents", "Subagents"],
  ["queue", "Queue & effects"],
  ["files", "Files"],
  ["logs", "Logs & cost"],
];

export function threadStatus(thread) {
  if (thread.terminated_at) return "terminated";
  if (thread.running) return "running";
  if (thread.stopped) return "stopped";
  return thread.status || "new";
}

export async function threadView(main, packageName, threadId, initialTab) {
  const call = pkg(packageName);
  const ctx = {
    packageName,
    threadId,
    call,
    thread: await call(`/threads/${encodeURIComponent(threadId)}`),
    agent: null,
    listeners: new Set(),
  };
  try {
    ctx.agent = await call(`/agents/${encodeURIComponent(ctx.thread.agent)}`);
  } catch {
    // Subagents are not entry agents, so the catalog does not describe them: the graph does.
    const graph = await call("/graph").catch(() => ({ nodes: [] }));
    const node = graph.nodes.find((n) => n.id === `agent:${ctx.thread.agent}`);
    ctx.agent = node
      ? {
        name: node.name,
        title: node.title,
        type: node.type,
        sides: Object.entries(node.side_labels || {}).map(([side, label]) => ({ side, label })),
      }
      : null;
  }
  const statusEl = h("span", { class: "badge", role: "status", "aria-live": "polite" });
  const refreshThread = debounce(async () => {
    try {
      ctx.thread = await call(`/threads/${encodeURIComponent(threadId)}`);
      const status = threadStatus(ctx.thread);
      statusEl.className = `badge s-${status}`;
      statusEl.textContent = status.replace("_", " ");
      for (const listener of ctx.listeners) listener({ type: "thread", thread: ctx.thread });
    } catch {
      /* the next frame tries again */
    }
  }, 250);
  ctx.refreshThread = refreshThread;
  const status = threadStatus(ctx.thread);
  statusEl.className = `badge s-${status}`;
  statusEl.textContent = status.replace("_", " ");
  const notice = h("div", { role: "alert" });
  const action = (name, label, confirmText) =>
    h("button", {
      type: "button",
      class: name === "terminate" ? "danger" : "",
      onclick: async () => {
        if (confirmText && !window.confirm(confirmText)) return;
        try {
          await call(`/threads/${encodeURIComponent(threadId)}/${name}`, { method: "POST" });
          clear(notice);
          refreshThread();
        } catch (error) {
          clear(notice, errorBox(error));
        }
      },
    }, label);
  const parentLink = ctx.thread.parent_id
    ? h("a", { class: "parent", href: `#/p/${encodeURIComponent(packageName)}/t/${ctx.thread.parent_id}` },
      "↑ Back to the parent thread")
    : null;
  const panel = h("section", { id: "tab-panel", role: "tabpanel", tabindex: "0" });
  const tabButtons = TABS.map(([id, label]) =>
    h("button", {
      type: "button",
      role: "tab",
      id: `tab-${id}`,
      "aria-controls": "tab-panel",
      onclick: () => show(id),
      onkeydown: (event) => {
        const index = TABS.findIndex(([t]) => t === id);
        const step = event.key === "ArrowRight" ? 1 : event.key === "ArrowLeft" ? -1 : 0;
        if (!step) return;
        const next = TABS[(index + step + TABS.length) % TABS.length][0];
        show(next);
        document.getElementById(`tab-${next}`).focus();
      },
    }, label));
  let teardown = null;
  let current = initialTab;
  ctx.reloadTab = () => show(current);
  const lineage = h("div", {});
  const replayBox = h("section", { class: "replay-report", "aria-label": "Replay report", "aria-live": "polite" });
  const refreshLineage = async () => clear(lineage, await lineageBox(ctx));
  async function show(id) {
    current = id;
    if (teardown) teardown();
    teardown = null;
    ctx.listeners.clear();
    for (const button of tabButtons) {
      const selected = button.id === `tab-${id}`;
      button.setAttribute("aria-selected", String(selected));
      button.tabIndex = selected ? 0 : -1;
    }
    panel.setAttribute("aria-labelledby", `tab-${id}`);
    history.replaceState(null, "", `#/p/${encodeURIComponent(packageName)}/t/${threadId}/${id}`);
    clear(panel, h("p", { class: "muted" }, "Loading…"));
    const tabs = { conversation: conversationTab, subagents: subagentsTab, queue: queueTab, files: filesTab, logs: logsTab };
    try {
      teardown = await (tabs[id] || conversationTab)(panel, ctx);
    } catch (error) {
      clear(panel, errorBox(error));
    }
  }
  const title = ctx.agent ? ctx.agent.title || ctx.agent.name : ctx.thread.agent;
  clear(main,
    h("div", { class: "thread-head" },
      parentLink,
      h("h1", {}, title, " ", statusEl),
      h("p", { class: "muted" },
        `Thread ${threadId} · agent ${ctx.thread.agent} · package ${packageName}`,
        ctx.thread.tags.length ? ` · tags ${ctx.thread.tags.join(", ")}` : ""),
      ctx.thread.env.length
        ? h("p", { class: "muted" }, "Variables: ", ctx.thread.env.map((v) => `${v.name} (${v.type})`).join(", "))
        : null,
      h("div", { class: "actions" },
        action("stop", "Stop"),
        action("terminate", "Terminate", "Terminate this thread for good? It will refuse every later message."),
        replayButton(ctx, replayBox, notice)),
      notice,
      lineage,
      replayBox),
    h("div", { role: "tablist", "aria-label": "Thread views", class: "tabs" }, tabButtons),
    panel);
  let opened = 0;
  const source = stream(packageName, threadId, {
    // After a dropped connection the browser reconnects; reload the tab for what was missed.
    open: () => {
      opened += 1;
      if (opened > 1) {
        refreshThread();
        show(current);
      }
    },
    frame: (frame) => {
      if (frame.type === "message_data" || frame.type === "event" || frame.type === "queued") refreshThread();
      if ((frame.type === "fork" || frame.type === "rewind") && !frame.subagent_id) {
        refreshThread();
        refreshLineage();
      }
      for (const listener of ctx.listeners) listener(frame);
    },
  });
  refreshLineage();
  await show(TABS.some(([t]) => t === initialTab) ? initialTab : "conversation");
  return () => {
    source.close();
    if (teardown) teardown();
  };
}
