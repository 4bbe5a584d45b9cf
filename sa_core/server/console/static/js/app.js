// The console: a hash router over a handful of views. Every view talks to the JSON API.

import { api, ApiError, getKey, pkg, setKey, signOut } from "./api.js";
import { ago, clear, h } from "./dom.js";
import { evalCompareView, evalRunView, evalsView, evalTrialView } from "./evals.js";
import { keysView } from "./keys.js";
import { packView } from "./pack.js";
import { schedulesView } from "./schedules.js";
import { storeView } from "./store.js";
import { threadView } from "./thread.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
let cleanup = null;

export function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

export function errorBox(error) {
  const text = error instanceof ApiError ? error.message : `Something went wrong: ${error}`;
  return h("p", { class: "error", role: "alert" }, text);
}

function renderNav(current) {
  const links = [h("a", { href: "#/" }, "Packs")];
  if (current) {
    links.push(h("a", { href: `#/p/${encodeURIComponent(current)}/threads` }, "Threads"));
    links.push(h("a", { href: `#/p/${encodeURIComponent(current)}/schedules` }, "Schedules"));
    links.push(h("a", { href: `#/p/${encodeURIComponent(current)}/store` }, "Store"));
    links.push(h("a", { href: `#/p/${encodeURIComponent(current)}/evals` }, "Evals"));
  }
  links.push(h("a", { href: "#/keys" }, "Keys"));
  links.push(h("a", { href: "/schema", target: "_blank", rel: "noopener" }, "API docs"));
  if (getKey()) {
    links.push(
      h("button", {
        type: "button",
        class: "link",
        onclick: () => {
          signOut();
          go("#/");
        },
      }, "Sign out"),
    );
  }
  clear(nav, links);
}

function signInView() {
  renderNav(null);
  const input = h("input", {
    id: "api-key",
    type: "password",
    autocomplete: "off",
    required: true,
    placeholder: "sa_…",
    "aria-describedby": "key-help",
  });
  const status = h("p", { role: "status", class: "error", id: "signin-status" });
  const form = h(
    "form",
    {
      class: "card narrow",
      "aria-labelledby": "signin-title",
      onsubmit: async (event) => {
        event.preventDefault();
        const key = input.value.trim();
        status.textContent = "";
        try {
          await api("/packages", { key });
          setKey(key);
          input.value = "";
          route();
        } catch (error) {
          input.value = "";
          status.textContent =
            error instanceof ApiError && error.status === 401
              ? "That API key was not accepted: it is unknown or revoked. Check it, or create one with 'sa keys create'."
              : `Could not sign in: ${error.message}`;
          input.focus();
        }
      },
    },
    h("h1", { id: "signin-title" }, "Sign in"),
    h("label", { for: "api-key" }, "API key"),
    input,
    h("p", { id: "key-help", class: "muted" },
      "The key is kept in this browser tab only. 'sa serve' prints one on its first start; ",
      "create more with 'sa keys create'."),
    h("button", { type: "submit" }, "Sign in"),
    status,
  );
  clear(main, form);
  input.focus();
}

async function packsView() {
  renderNav(null);
  const { packages } = await api("/packages");
  const items = packages.map((p) =>
    h("li", { class: "card" },
      h("h2", {}, h("a", { href: `#/p/${encodeURIComponent(p.name)}` }, p.name)),
      p.description ? h("p", {}, p.description) : null,
      h("dl", { class: "facts" },
        h("dt", {}, "Version"), h("dd", {}, p.version || "–"),
        h("dt", {}, "Author"), h("dd", {}, p.author || "–"),
        h("dt", {}, "License"), h("dd", {}, p.license || "–"),
        h("dt", {}, "Entry agents"), h("dd", {}, p.entry_agents.join(", ") || "–"),
        h("dt", {}, "Source"), h("dd", {}, p.distribution ? `${p.distribution} (${p.source})` : p.source),
      ),
      h("p", {}, h("a", { href: `#/p/${encodeURIComponent(p.name)}/threads` }, "Threads →")),
    ));
  clear(main,
    h("h1", {}, "Packs"),
    packages.length ? h("ul", { class: "cards" }, items) : h("p", {}, "No packs are served. Install one or pass --pack to 'sa serve'."),
  );
}

const STATUSES = ["running", "awaiting_human", "idle", "new", "stopped", "terminated"];
const PAGE = 20;

function statusBadge(thread) {
  let status = thread.status || "new";
  if (thread.running) status = "running";
  else if (thread.terminated_at) status = "terminated";
  else if (thread.stopped) status = "stopped";
  return h("span", { class: `badge s-${status}` }, status.replace("_", " "));
}

async function threadsView(packageName, query) {
  renderNav(packageName);
  const call = pkg(packageName);
  const [{ agents }] = await Promise.all([call("/agents")]);
  const params = new URLSearchParams(query);
  const offset = Number(params.get("offset") || 0);
  const filters = new URLSearchParams();
  for (const name of ["agent", "tag", "status", "include_children"]) {
    if (params.get(name)) filters.set(name, params.get(name));
  }
  filters.set("limit", String(PAGE));
  filters.set("offset", String(offset));
  const data = await call(`/threads?${filters}`);
  const here = (changes) => {
    const next = new URLSearchParams(params);
    for (const [k, v] of Object.entries(changes)) {
      if (v === "" || v === null || v === undefined) next.delete(k);
      else next.set(k, v);
    }
    return `#/p/${encodeURIComponent(packageName)}/threads?${next}`;
  };
  const agentSelect = h("select", { id: "f-agent", name: "agent" },
    h("option", { value: "" }, "any"),
    agents.map((a) => h("option", { value: a.name, selected: params.get("agent") === a.name }, a.name)));
  const statusSelect = h("select", { id: "f-status", name: "status" },
    h("option", { value: "" }, "any"),
    STATUSES.map((s) => h("option", { value: s, selected: params.get("status") === s }, s.replace("_", " "))));
  const tagInput = h("input", { id: "f-tag", name: "tag", value: params.get("tag") || "" });
  const children = h("input", { id: "f-children", type: "checkbox", checked: params.get("include_children") === "true" });
  const form = h("form", {
    class: "filters",
    "aria-label": "Filter threads",
    onsubmit: (event) => {
      event.preventDefault();
      go(here({
        agent: agentSelect.value, status: statusSelect.value, tag: tagInput.value.trim(),
        include_children: children.checked ? "true" : "", offset: "",
      }));
    },
  },
  h("span", { class: "pair" }, h("label", { for: "f-agent" }, "Agent"), agentSelect),
  h("span", { class: "pair" }, h("label", { for: "f-status" }, "Status"), statusSelect),
  h("span", { class: "pair" }, h("label", { for: "f-tag" }, "Tag"), tagInput),
  h("span", { class: "check" }, children, h("label", { for: "f-children" }, "Include subagent threads")),
  h("button", { type: "submit" }, "Filter"));
  const rows = data.threads.map((t) =>
    h("tr", {},
      h("td", {}, h("a", { href: `#/p/${encodeURIComponent(packageName)}/t/${t.id}` }, t.id.slice(0, 8))),
      h("td", {}, t.agent),
      h("td", {}, statusBadge(t)),
      h("td", {}, t.tags.map((tag) => h("span", { class: "tag" }, tag))),
      h("td", {}, t.parent_id ? "subagent" : ""),
      h("td", { title: new Date(t.created_at / 1000).toISOString() }, ago(t.created_at))));
  const pager = h("nav", { class: "pager", "aria-label": "Pages" },
    offset > 0 ? h("a", { href: here({ offset: Math.max(offset - PAGE, 0) || "" }) }, "← Newer") : null,
    h("span", {}, data.total ? `${offset + 1}–${offset + data.threads.length} of ${data.total}` : "No threads"),
    data.has_more ? h("a", { href: here({ offset: offset + PAGE }) }, "Older →") : null);
  clear(main,
    h("h1", {}, `Threads of ${packageName}`),
    form,
    h("div", { class: "scroll" }, h("table", {},
      h("caption", { class: "sr-only" }, "Threads, newest first"),
      h("thead", {}, h("tr", {}, ["Thread", "Agent", "Status", "Tags", "Kind", "Created"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows))),
    pager);
}

async function route() {
  if (cleanup) {
    cleanup();
    cleanup = null;
  }
  if (!getKey()) {
    signInView();
    return;
  }
  const [path, query = ""] = location.hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (parts.length === 0) {
      await packsView();
    } else if (parts[0] === "keys" && parts.length === 1) {
      renderNav(null);
      await keysView(main);
    } else if (parts[0] === "p" && parts.length === 2) {
      renderNav(parts[1]);
      await packView(main, parts[1]);
    } else if (parts[0] === "p" && parts[2] === "schedules") {
      renderNav(parts[1]);
      await schedulesView(main, parts[1]);
    } else if (parts[0] === "p" && parts[2] === "store") {
      renderNav(parts[1]);
      await storeView(main, parts[1]);
    } else if (parts[0] === "p" && parts[2] === "evals") {
      renderNav(parts[1]);
      if (parts.length === 3) await evalsView(main, parts[1]);
      else if (parts[4] === "vs" && parts[5]) await evalCompareView(main, parts[1], parts[3], parts[5]);
      else if (parts[4] === "c" && parts[6] !== undefined) await evalTrialView(main, parts[1], parts[3], parts[5], parts[6]);
      else await evalRunView(main, parts[1], parts[3]);
    } else if (parts[0] === "p" && parts[2] === "threads") {
      await threadsView(parts[1], query);
    } else if (parts[0] === "p" && parts[2] === "t" && parts[3]) {
      renderNav(parts[1]);
      cleanup = await threadView(main, parts[1], parts[3], parts[4] || "conversation");
    } else {
      clear(main, h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/" }, "Back to the packs")));
    }
  } catch (error) {
    if (!getKey()) {
      signInView();
      return;
    }
    clear(main, errorBox(error), h("p", {}, h("a", { href: "#/" }, "Back to the packs")));
  }
}

window.addEventListener("hashchange", route);
window.addEventListener("sa:signedout", () => signInView());
route();
