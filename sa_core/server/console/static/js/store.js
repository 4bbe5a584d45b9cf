// A pack's store: browse its namespaces, search its items (by words, or by meaning when the
// pack declares an embedding model), put (create or edit) and delete items. Everything goes
// through /api/packages/{package}/store. A namespace is typed as its labels joined by "/".

import { pkg } from "./api.js";
import { clear, h, time } from "./dom.js";
import { errorBox } from "./app.js";

const labels = (text) => text.split("/").map((l) => l.trim()).filter(Boolean);
const joined = (namespace) => namespace.join("/");

function itemQuery(item) {
  const params = new URLSearchParams();
  item.namespace.forEach((label) => params.append("namespace", label));
  params.append("key", item.key);
  return params.toString();
}

function itemRow(item, edit, remove) {
  const id = `${joined(item.namespace)} ${item.key}`;
  return h("tr", { "data-item": id },
    h("td", {}, h("code", {}, joined(item.namespace))),
    h("td", {}, h("strong", {}, item.key)),
    h("td", {}, h("pre", { class: "value" }, JSON.stringify(item.value, null, 2))),
    h("td", {}, time(item.updated_at)),
    h("td", {}, item.expires_at ? time(item.expires_at) : "never"),
    h("td", { class: "num" }, item.score === null || item.score === undefined ? "–" : item.score.toFixed(3)),
    h("td", { class: "actions" },
      h("button", { type: "button", "aria-label": `Edit ${id}`, onclick: () => edit(item) }, "Edit"), " ",
      h("button", { type: "button", class: "danger", "aria-label": `Delete ${id}`, onclick: () => remove(item) }, "Delete")));
}

function editor(call, refresh) {
  const field = (id, label, input, help) => h("div", { class: "field" },
    h("label", { for: id }, label), input, help ? h("small", { class: "muted", id: `${id}-help` }, help) : null);
  const namespace = h("input", { id: "st-namespace", required: true, autocomplete: "off", placeholder: "users/ada/prefs", "aria-describedby": "st-namespace-help" });
  const key = h("input", { id: "st-key", required: true, autocomplete: "off" });
  const value = h("textarea", { id: "st-value", rows: 6, required: true, spellcheck: false, placeholder: '{"text": "brief answers"}' });
  const ttl = h("input", { id: "st-ttl", type: "number", min: "1", step: "any", "aria-describedby": "st-ttl-help" });
  const status = h("div", { role: "status" });
  const form = h("form", {
    class: "card",
    "aria-label": "Put an item",
    onsubmit: async (event) => {
      event.preventDefault();
      clear(status);
      let parsed;
      try {
        parsed = JSON.parse(value.value);
      } catch (error) {
        clear(status, h("p", { class: "error", role: "alert" }, `The value is not JSON: ${error.message}`));
        return;
      }
      const body = { namespace: labels(namespace.value), key: key.value.trim(), value: parsed };
      if (ttl.value) body.ttl = Number(ttl.value);
      try {
        await call("/store/items", { method: "PUT", body });
        await refresh(`Item ${key.value.trim()} saved in ${joined(body.namespace)}.`);
      } catch (error) {
        clear(status, errorBox(error));
      }
    },
  },
  h("h2", {}, "Put an item"),
  field("st-namespace", "Namespace", namespace, "Its labels joined by /, e.g. users/ada/prefs."),
  field("st-key", "Key", key),
  field("st-value", "Value (a JSON object)", value),
  field("st-ttl", "Expires after (seconds)", ttl, "Leave empty to keep it until deleted."),
  h("button", { type: "submit" }, "Save item"),
  status);
  const fill = (item) => {
    namespace.value = joined(item.namespace);
    key.value = item.key;
    value.value = JSON.stringify(item.value, null, 2);
    ttl.value = "";
    value.focus();
  };
  return { form, fill };
}

export async function storeView(main, packageName, state = {}) {
  const call = pkg(packageName);
  const prefix = state.prefix || "";
  const query = state.query || "";
  const search = { namespace_prefix: labels(prefix), limit: 50 };
  if (query.trim()) search.query = query;
  const [{ namespaces }, { items }] = await Promise.all([
    call("/store/namespaces", { method: "POST", body: { limit: 200 } }),
    call("/store/items/search", { method: "POST", body: search }),
  ]);
  const notice = h("p", { role: "status", class: "muted", id: "store-status" });
  const refresh = async (text, next = state) => {
    await storeView(main, packageName, next);
    const shown = document.getElementById("store-status");
    if (shown && text) shown.textContent = text;
  };
  const { form, fill } = editor(call, (text) => refresh(text));
  const remove = async (item) => {
    const id = `${item.key} in ${joined(item.namespace)}`;
    if (!window.confirm(`Delete the item ${id}?`)) return;
    try {
      await call(`/store/items?${itemQuery(item)}`, { method: "DELETE" });
      await refresh(`Item ${id} deleted.`);
    } catch (error) {
      clear(notice, errorBox(error));
    }
  };
  const prefixInput = h("input", { id: "st-prefix", value: prefix, autocomplete: "off", placeholder: "users/ada" });
  const queryInput = h("input", { id: "st-query", type: "search", value: query, autocomplete: "off" });
  const searchForm = h("form", {
    class: "card",
    role: "search",
    "aria-label": "Search the store",
    onsubmit: (event) => {
      event.preventDefault();
      refresh("", { prefix: prefixInput.value, query: queryInput.value });
    },
  },
  h("div", { class: "field" }, h("label", { for: "st-prefix" }, "Namespace starts with"), prefixInput),
  h("div", { class: "field" }, h("label", { for: "st-query" }, "Search for"), queryInput),
  h("button", { type: "submit" }, "Search"));
  const spaces = namespaces.length
    ? h("ul", { class: "namespaces", "aria-label": "Namespaces" }, namespaces.map((ns) => h("li", {},
      h("button", { type: "button", class: "link", onclick: () => refresh("", { prefix: joined(ns), query }) }, joined(ns)))))
    : h("p", { class: "muted" }, "The store is empty.");
  const table = items.length
    ? h("div", { class: "scroll" }, h("table", { class: "store-items" },
      h("caption", { class: "sr-only" }, "Items"),
      h("thead", {}, h("tr", {}, ["Namespace", "Key", "Value", "Updated", "Expires", "Score", "Actions"]
        .map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, items.map((item) => itemRow(item, fill, remove)))))
    : h("p", {}, query.trim() ? "No item matches." : "No items here.");
  clear(main,
    h("h1", {}, `Store of ${packageName}`),
    h("p", { class: "muted" }, "Memory every thread of the pack shares (state.store). A search ranks by ",
      "meaning when the pack declares an embedding model, else by words; without a query, newest first."),
    notice,
    h("h2", {}, "Namespaces"),
    spaces,
    searchForm,
    table,
    form);
}
