// One pack: its agents (type, sides, prompts, tools, subagents, variables), a drawing of the
// pack's graph, and a form per entry agent that starts a thread.

import { pkg } from "./api.js";
import { clear, h } from "./dom.js";
import { errorBox, go } from "./app.js";

const SVG = "http://www.w3.org/2000/svg";

function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  for (const child of children) el.append(child);
  return el;
}

// Agents on the left, prompts in the middle, tools on the right; a line per edge.
function graphDrawing(graph) {
  const columns = { agent: [], prompt: [], tool: [] };
  for (const node of graph.nodes) columns[node.kind].push(node);
  const rowHeight = 30;
  const width = 720;
  const x = { agent: 10, prompt: 250, tool: 490 };
  const pos = {};
  const rows = Math.max(...Object.values(columns).map((c) => c.length), 1);
  for (const [kind, nodes] of Object.entries(columns)) {
    nodes.forEach((node, i) => (pos[node.id] = { x: x[kind], y: 14 + i * rowHeight }));
  }
  const drawing = svg("svg", {
    viewBox: `0 0 ${width} ${rows * rowHeight + 10}`,
    class: "graph",
    role: "img",
    "aria-labelledby": "graph-title",
  }, svg("title", { id: "graph-title" }, "Pack graph: agents, their prompts, and the tools and subagents each prompt calls"));
  for (const edge of graph.edges) {
    const a = pos[edge.source];
    const b = pos[edge.target];
    if (!a || !b) continue;
    const backwards = b.x <= a.x;
    const x1 = a.x + (backwards ? 0 : 220);
    const x2 = b.x + (backwards ? 220 : 0);
    drawing.append(svg("path", {
      d: `M${x1},${a.y} C${(x1 + x2) / 2},${a.y} ${(x1 + x2) / 2},${b.y} ${x2},${b.y}`,
      class: `edge e-${edge.kind}`,
    }));
  }
  for (const node of graph.nodes) {
    const p = pos[node.id];
    const label = `${node.name}${node.kind === "agent" ? ` (${node.type})` : ""}`;
    drawing.append(svg("g", { class: `node n-${node.kind}${node.entry ? " entry" : ""}` },
      svg("rect", { x: p.x, y: p.y - 11, width: 220, height: 22, rx: 5 }),
      svg("text", { x: p.x + 8, y: p.y + 4 }, document.createTextNode(label.slice(0, 34)))));
  }
  return h("figure", { class: "graph-wrap" }, drawing,
    h("figcaption", { class: "muted" },
      "Agents → the prompt of each side → tools. Dashed lines: a prompt that calls a subagent."));
}

function subagentsOf(graph, agentName) {
  const prompts = graph.edges
    .filter((e) => e.source === `agent:${agentName}` && e.kind.startsWith("side_"))
    .map((e) => e.target);
  return [...new Set(graph.edges
    .filter((e) => prompts.includes(e.source) && e.kind === "subagent")
    .map((e) => e.target.replace(/^agent:/, "")))];
}

function startForm(packageName, agent) {
  const id = (name) => `v-${agent.name}-${name}`;
  const inputs = {};
  const fields = agent.variables.filter((v) => !v.scoped).map((v) => {
    const input = h("input", {
      id: id(v.name),
      name: v.name,
      type: v.type === "secret" ? "password" : "text",
      autocomplete: "off",
      required: v.needs_value,
      "aria-describedby": `${id(v.name)}-help`,
    });
    inputs[v.name] = { input, variable: v };
    return h("div", { class: "field" },
      h("label", { for: id(v.name) }, v.name, v.type === "secret" ? " (secret)" : "", v.needs_value ? " *" : ""),
      input,
      h("small", { id: `${id(v.name)}-help`, class: "muted" },
        [v.description, v.declared_by ? `declared by ${v.declared_by}` : null,
          v.needs_value ? "required" : "optional: has a default"].filter(Boolean).join(" · ")));
  });
  const tags = h("input", { id: id("__tags"), placeholder: "vip, demo" });
  const status = h("p", { role: "status" });
  return h("form", {
    class: "start",
    "aria-label": `Start a thread with ${agent.name}`,
    onsubmit: async (event) => {
      event.preventDefault();
      const env = {};
      const envTypes = {};
      for (const [name, { input, variable }] of Object.entries(inputs)) {
        if (input.value !== "") {
          env[name] = input.value;
          envTypes[name] = variable.type;
        }
        if (variable.type === "secret") input.value = "";
      }
      try {
        const thread = await pkg(packageName)("/threads", {
          method: "POST",
          body: {
            agent: agent.name,
            env,
            env_types: envTypes,
            tags: tags.value.split(",").map((t) => t.trim()).filter(Boolean),
          },
        });
        go(`#/p/${encodeURIComponent(packageName)}/t/${thread.id}`);
      } catch (error) {
        const missing = (error.body && error.body.missing) || [];
        clear(status, errorBox(error),
          missing.length ? h("ul", {}, missing.map((m) => h("li", {}, `${m.name} (${m.declared_by})`))) : null);
      }
    },
  },
  h("h4", {}, "Start a thread"),
  fields.length ? fields : h("p", { class: "muted" }, agent.variables.length
    ? "Nothing to set now: scoped variables are asked for when a subagent starts."
    : "This agent needs no variables."),
  h("div", { class: "field" }, h("label", { for: id("__tags") }, "Tags (comma separated)"), tags),
  h("button", { type: "submit" }, `Start a thread with ${agent.name}`),
  status);
}

function agentCard(packageName, agent, graph) {
  const subagents = subagentsOf(graph, agent.name);
  return h("section", { class: "card agent", "aria-labelledby": `agent-${agent.name}` },
    h("h3", { id: `agent-${agent.name}` }, agent.title || agent.name,
      h("span", { class: "badge" }, agent.type)),
    agent.description ? h("p", {}, agent.description) : null,
    h("dl", { class: "facts" },
      h("dt", {}, "Name"), h("dd", {}, agent.name),
      h("dt", {}, "Max session turns"), h("dd", {}, agent.max_session_turns ?? "–"),
      h("dt", {}, "Subagents"), h("dd", {}, subagents.join(", ") || "none")),
    h("div", { class: "scroll" }, h("table", {},
      h("caption", {}, "Sides"),
      h("thead", {}, h("tr", {}, ["Side", "Label", "Prompt", "Model", "Tools", "Stops"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, agent.sides.map((s) => h("tr", {},
        h("td", {}, s.side.toUpperCase()),
        h("td", {}, s.label || "–"),
        h("td", {}, s.prompt),
        h("td", {}, s.model || "–"),
        h("td", {}, s.tools.join(", ") || "–"),
        h("td", {}, [s.stop_on_response ? "on response" : null, s.stop_tool, s.session_stop && `stop: ${s.session_stop}`,
          s.session_fail && `fail: ${s.session_fail}`].filter(Boolean).join(", ") || "–")))))),
    agent.variables.length
      ? h("div", { class: "scroll" }, h("table", {},
        h("caption", {}, "Variables"),
        h("thead", {}, h("tr", {}, ["Name", "Type", "Needs a value", "Scoped", "Declared by"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, agent.variables.map((v) => h("tr", {},
          h("td", {}, v.name), h("td", {}, v.type), h("td", {}, v.needs_value ? "yes" : "no"),
          h("td", {}, v.scoped ? "yes" : "no"), h("td", {}, v.declared_by || "–"))))))
      : h("p", { class: "muted" }, "No variables."),
    startForm(packageName, agent));
}

export async function packView(main, packageName) {
  const call = pkg(packageName);
  const [{ packages }, { agents }, graph, { tools }, { prompts }] = await Promise.all([
    import("./api.js").then((m) => m.api("/packages")),
    call("/agents"),
    call("/graph"),
    call("/tools"),
    call("/prompts"),
  ]);
  const info = packages.find((p) => p.name === packageName) || {};
  const details = await Promise.all(agents.map((a) => call(`/agents/${encodeURIComponent(a.name)}`)));
  clear(main,
    h("h1", {}, packageName),
    h("p", { class: "muted" },
      [info.version && `version ${info.version}`, info.author && `by ${info.author}`, info.license && `license ${info.license}`]
        .filter(Boolean).join(" · ")),
    info.description ? h("p", {}, info.description) : null,
    h("p", {}, h("a", { href: `#/p/${encodeURIComponent(packageName)}/threads` }, "Threads of this pack →"), " ",
      h("a", { href: `#/p/${encodeURIComponent(packageName)}/schedules` }, "Schedules →"), " ",
      h("a", { href: `#/p/${encodeURIComponent(packageName)}/store` }, "Store →")),
    h("h2", {}, "Graph"),
    graphDrawing(graph),
    h("h2", {}, "Entry agents"),
    details.map((agent) => agentCard(packageName, agent, graph)),
    h("h2", {}, "Prompts"),
    h("div", { class: "scroll" }, h("table", {},
      h("thead", {}, h("tr", {}, ["Prompt", "Model", "Tools", "Chat", "Past tools"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, prompts.map((p) => h("tr", {},
        h("td", {}, p.name), h("td", {}, p.model), h("td", {}, p.tools.join(", ") || "–"),
        h("td", {}, p.include_chat ? "yes" : "no"), h("td", {}, p.include_past_tools ? "yes" : "no")))))),
    h("h2", {}, "Tools"),
    h("ul", { class: "tools" }, tools.map((t) => h("li", {},
      h("strong", {}, t.name), h("span", { class: "badge" }, t.source), " ", t.description))));
}
