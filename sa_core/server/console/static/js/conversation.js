// The conversation: Markdown messages, live streaming, tool calls, attachments, the composer.

import { filePath } from "./api.js";
import { bytes, clear, h, json, time } from "./dom.js";
import { errorBox } from "./app.js";
import { renderMarkdown } from "./markdown.js";
import { messageActions } from "./timetravel.js";

export async function fileBlob(ctx, path, thumbnail = false) {
  const response = await ctx.call(
    `/threads/${encodeURIComponent(ctx.threadId)}/files/${filePath(path)}${thumbnail ? "?thumbnail=1" : ""}`,
    { raw: true },
  );
  return response.blob();
}

export async function download(ctx, path, name) {
  const blob = await fileBlob(ctx, path);
  const url = URL.createObjectURL(blob);
  const link = h("a", { href: url, download: name || path.split("/").pop() });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

export function thumbnail(ctx, file) {
  const img = h("img", { class: "thumb", alt: `Preview of ${file.name}`, loading: "lazy" });
  fileBlob(ctx, file.path, true)
    .then((blob) => (img.src = URL.createObjectURL(blob)))
    .catch(() => img.replaceWith(h("span", { class: "muted" }, "(no preview)")));
  return img;
}

function attachmentList(ctx, attachments) {
  if (!attachments || !attachments.length) return null;
  return h("ul", { class: "attachments", "aria-label": "Attachments" }, attachments.map((a) =>
    h("li", {},
      (a.mime_type || "").startsWith("image/") ? thumbnail(ctx, a) : null,
      h("button", { type: "button", class: "link", onclick: () => download(ctx, a.path, a.name) },
        `${a.name}${a.size ? ` (${bytes(a.size)})` : ""}`))));
}

function sideLabel(ctx, role) {
  const agent = ctx.agent;
  const dual = agent ? agent.type === "dual_ai" : false;
  if (role === "system") return "System";
  if (!dual) return role === "user" ? "User" : (agent && (agent.title || agent.name)) || ctx.thread.agent;
  const side = agent.sides.find((s) => s.side === (role === "assistant" ? "a" : "b"));
  return `${role === "assistant" ? "Side A" : "Side B"}${side && side.label ? ` · ${side.label}` : ""}`;
}

function envRequestForm(ctx, data) {
  const box = h("div", { class: "env-request" }, h("p", { class: "muted" }, "Checking the variables request…"));
  const base = `/threads/${encodeURIComponent(ctx.threadId)}/variables/${encodeURIComponent(data.request_id)}`;
  ctx.call(base).then((request) => {
    const inputs = request.missing.map((name) => ({
      name,
      input: h("input", { id: `env-${data.request_id}-${name}`, type: "password", autocomplete: "off", required: true }),
    }));
    const status = h("div", { role: "status" });
    clear(box, h("form", {
      "aria-label": `Variables for subagent ${request.agent_name}`,
      onsubmit: async (event) => {
        event.preventDefault();
        const env = Object.fromEntries(inputs.map(({ name, input }) => [name, input.value]));
        for (const { input } of inputs) input.value = "";
        try {
          const result = await ctx.call(base, { method: "POST", body: { env } });
          clear(box, h("p", {}, "Variables stored; the subagent started: ",
            h("a", { href: `#/p/${encodeURIComponent(ctx.packageName)}/t/${result.child_thread_id}` }, "open it")));
        } catch (error) {
          clear(status, errorBox(error));
        }
      },
    },
    h("p", {}, `Subagent ${request.agent_name} waits for variables:`),
    inputs.map(({ name, input }) => h("div", { class: "field" }, h("label", { for: input.id }, `${name} (secret)`), input)),
    h("button", { type: "submit" }, "Provide variables and start the subagent"),
    status));
  }).catch(() => clear(box, h("p", { class: "muted" }, "This variables request was answered already.")));
  return box;
}

export async function conversationTab(panel, ctx) {
  const messages = new Map();
  const chunks = new Map();
  const reasoning = new Map();
  const nodes = new Map();
  const results = new Map();
  const running = new Set();
  const openCalls = new Set();
  const showReasoning = h("input", { id: "show-reasoning", type: "checkbox" });
  const showSilent = h("input", { id: "show-silent", type: "checkbox" });
  const showRewound = h("input", { id: "show-rewound", type: "checkbox" });
  const cutNotice = h("div", { role: "alert" });
  const list = h("ol", { class: "messages", "aria-label": "Messages", "aria-live": "polite" });

  const page = await ctx.call(
    `/threads/${encodeURIComponent(ctx.threadId)}/messages?limit=500&order=desc&include_silent=true&include_rewound=true`,
  );
  for (const message of page.messages.reverse()) {
    message.rewound = Boolean(message.metadata && message.metadata.rewound);
    messages.set(message.id, message);
  }
  for (const m of messages.values()) if (m.role === "tool" && m.tool_call_id) results.set(m.tool_call_id, m);

  function toolCall(call) {
    const result = results.get(call.id);
    const status = result ? result.tool_status || "done" : running.has(call.id) ? "running" : "pending";
    const details = h("details", {
      class: "tool",
      "data-call": call.id,
      open: openCalls.has(call.id),
      ontoggle: (event) => (event.target.open ? openCalls.add(call.id) : openCalls.delete(call.id)),
    },
      h("summary", {}, h("span", { class: "tool-name" }, `Tool call: ${call.function.name}`), " ",
        h("span", { class: `badge s-${status}` }, status)),
      h("h5", {}, "Arguments"),
      h("pre", {}, json(call.function.arguments || "{}")),
      h("h5", {}, "Result"),
      result ? h("pre", {}, result.content || "") : h("p", { class: "muted" }, "No result yet."),
      result ? attachmentList(ctx, result.attachments) : null,
      result && result.subagent_id
        ? h("p", {}, h("a", { href: `#/p/${encodeURIComponent(ctx.packageName)}/t/${result.subagent_id}` }, "Open the subagent thread"))
        : null,
      result && result.metadata && result.metadata.error_code === "subagent_env_required"
        ? envRequestForm(ctx, result.metadata.error_data || {})
        : null);
    return details;
  }

  function render(message) {
    const text = chunks.has(message.id) && !message.content ? chunks.get(message.id) : message.content;
    const think = message.reasoning_content || reasoning.get(message.id);
    const node = h("li", {
      class: `msg r-${message.role}${message.silent ? " silent" : ""}${message.status === "failed" ? " failed" : ""}${message.rewound ? " rewound" : ""}`,
      "data-id": message.id,
      hidden: (message.silent && !showSilent.checked) || (message.rewound && !showRewound.checked) ||
        (message.role === "tool" && message.tool_call_id && hasCall(message.tool_call_id)),
    },
    h("div", { class: "who" },
      h("strong", {}, message.role === "tool" ? `Tool ${message.name || ""}` : sideLabel(ctx, message.role)),
      message.silent ? h("span", { class: "badge" }, "silent") : null,
      message.rewound ? h("span", { class: "badge s-rewound" }, "rewound") : null,
      message.status && message.status !== "completed" ? h("span", { class: `badge s-${message.status}` }, message.status) : null,
      h("time", { class: "muted", datetime: new Date(message.created_at / 1000).toISOString() }, time(message.created_at)),
      messageActions(ctx, message, results, cutNotice)),
    think && showReasoning.checked
      ? h("details", { class: "reasoning", open: true }, h("summary", {}, "Reasoning"), h("div", { class: "md", html: renderMarkdown(think) }))
      : null,
    text ? h("div", { class: "md", html: renderMarkdown(text) }) : null,
    attachmentList(ctx, message.attachments),
    (message.tool_calls || []).map(toolCall));
    const old = nodes.get(message.id);
    if (old) {
      old.replaceWith(node);
    } else {
      list.append(node);
    }
    nodes.set(message.id, node);
  }

  function hasCall(callId) {
    for (const m of messages.values()) if ((m.tool_calls || []).some((c) => c.id === callId)) return true;
    return false;
  }

  function ownerOf(callId) {
    for (const m of messages.values()) if ((m.tool_calls || []).some((c) => c.id === callId)) return m;
    return null;
  }

  function renderAll() {
    clear(list);
    nodes.clear();
    for (const message of messages.values()) render(message);
  }

  const nearBottom = () => window.innerHeight + window.scrollY >= document.body.scrollHeight - 120;
  const follow = (wasNear) => {
    if (wasNear) window.scrollTo(0, document.body.scrollHeight);
  };

  function onFrame(frame) {
    if (frame.subagent_id) return; // a child's frame: shown in its own thread view
    const wasNear = nearBottom();
    if (frame.type === "message_data" && frame.depth === 0) {
      const message = frame.data;
      messages.set(message.id, message);
      if (message.content) chunks.delete(message.id);
      if (message.role === "tool" && message.tool_call_id) {
        results.set(message.tool_call_id, message);
        running.delete(message.tool_call_id);
        const owner = ownerOf(message.tool_call_id);
        if (owner) render(owner);
      }
      render(message);
    } else if ((frame.type === "message_chunk" || frame.type === "reasoning_chunk") && frame.depth === 0) {
      const store = frame.type === "message_chunk" ? chunks : reasoning;
      store.set(frame.message_id, (store.get(frame.message_id) || "") + frame.chunk);
      if (!messages.has(frame.message_id)) {
        messages.set(frame.message_id, { id: frame.message_id, role: "assistant", content: null, status: "pending", created_at: Date.now() * 1000 });
      }
      render(messages.get(frame.message_id));
    } else if (frame.type === "rewind") {
      ctx.reloadTab();
      return;
    } else if (frame.type === "event" && frame.eventType === "tool_call_started") {
      running.add(frame.data.id);
      const owner = ownerOf(frame.data.id);
      if (owner) render(owner);
    } else {
      return;
    }
    follow(wasNear);
  }
  ctx.listeners.add(onFrame);

  const textarea = h("textarea", { id: "composer", rows: 3, placeholder: "Write a message. Enter sends, Shift+Enter starts a new line." });
  const files = h("input", { id: "composer-files", type: "file", multiple: true });
  const dual = ctx.agent && ctx.agent.type === "dual_ai";
  const role = h("select", { id: "composer-role" },
    h("option", { value: "user" }, "user (side A answers)"),
    h("option", { value: "assistant" }, "assistant (side B answers)"));
  const sendStatus = h("div", { role: "status" });
  const form = h("form", {
    class: "composer",
    "aria-label": "Send a message",
    onsubmit: async (event) => {
      event.preventDefault();
      const content = textarea.value;
      if (!content.trim() && !files.files.length) return;
      const attachments = await Promise.all([...files.files].map(async (file) => ({
        name: file.name,
        mime_type: file.type || "application/octet-stream",
        data: await base64(file),
      })));
      try {
        const answer = await ctx.call(`/threads/${encodeURIComponent(ctx.threadId)}/messages`, {
          method: "POST",
          body: { content, role: dual ? role.value : "user", attachments },
        });
        textarea.value = "";
        files.value = "";
        clear(sendStatus);
        if (answer.message && !messages.has(answer.message.id)) {
          messages.set(answer.message.id, answer.message);
          render(answer.message);
        }
        ctx.refreshThread();
      } catch (error) {
        clear(sendStatus, errorBox(error));
      }
    },
  },
  h("label", { for: "composer" }, "Message"),
  textarea,
  h("div", { class: "row" },
    h("span", {}, h("label", { for: "composer-files" }, "Attach files "), files),
    dual ? h("span", {}, h("label", { for: "composer-role" }, "Post as "), role) : null,
    h("button", { type: "submit" }, "Send")),
  sendStatus);
  textarea.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      form.requestSubmit();
    }
  });
  showReasoning.addEventListener("change", renderAll);
  showSilent.addEventListener("change", renderAll);
  showRewound.addEventListener("change", renderAll);
  renderAll();
  clear(panel,
    h("div", { class: "toggles" },
      h("span", { class: "check" }, showReasoning, h("label", { for: "show-reasoning" }, "Show reasoning")),
      h("span", { class: "check" }, showSilent, h("label", { for: "show-silent" }, "Show silent messages")),
      h("span", { class: "check" }, showRewound, h("label", { for: "show-rewound" }, "Show rewound messages")),
      page.has_more ? h("span", { class: "muted" }, `Showing the latest ${page.messages.length} of ${page.total} messages.`) : null),
    cutNotice,
    list,
    form);
  follow(true);
  return () => ctx.listeners.delete(onFrame);
}

function base64(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(String(reader.result).split(",", 2)[1] || "");
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

