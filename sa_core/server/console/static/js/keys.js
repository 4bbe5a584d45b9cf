// API keys: list them, create one for a team (some packages, read-only), revoke one. The API
// answers these routes only to a key with full access; any other key sees why, from the server.

import { api } from "./api.js";
import { ago, clear, h } from "./dom.js";
import { errorBox } from "./app.js";

function access(key) {
  const where = key.packages === null ? "every package" : key.packages.join(", ");
  return `${key.read_only ? "read-only" : "read-write"}, ${where}`;
}

function keyRows(keys, reload) {
  return keys.map((key) =>
    h("tr", {},
      h("td", {}, key.name),
      h("td", {}, h("code", {}, key.prefix)),
      h("td", {}, access(key)),
      h("td", { title: new Date(key.created_at / 1000).toISOString() }, ago(key.created_at)),
      h("td", {}, key.revoked_at
        ? h("span", { class: "badge s-terminated" }, "revoked")
        : h("button", {
          type: "button",
          class: "danger",
          "aria-label": `Revoke ${key.name} (${key.prefix})`,
          onclick: async () => {
            if (!confirm(`Revoke '${key.name}' (${key.prefix})? Requests with it fail from now on.`)) return;
            await api(`/keys/${encodeURIComponent(key.id)}`, { method: "DELETE" });
            await reload();
          },
        }, "Revoke"))));
}

function createForm(packages, reload) {
  const name = h("input", { id: "k-name", name: "name", required: true, value: "", autocomplete: "off" });
  const every = h("input", { id: "k-every", type: "checkbox", checked: true });
  const boxes = packages.map((p) => h("input", { id: `k-p-${p.name}`, type: "checkbox", value: p.name, disabled: true }));
  every.addEventListener("change", () => boxes.forEach((box) => (box.disabled = every.checked)));
  const readOnly = h("input", { id: "k-ro", type: "checkbox" });
  const status = h("p", { role: "status", id: "k-status" });
  const created = h("div", { id: "k-created" });
  const form = h("form", {
    class: "card key-form",
    "aria-labelledby": "k-create-title",
    onsubmit: async (event) => {
      event.preventDefault();
      status.textContent = "";
      status.className = "";
      const chosen = every.checked ? null : boxes.filter((b) => b.checked).map((b) => b.value);
      try {
        const key = await api("/keys", {
          method: "POST",
          body: { name: name.value.trim(), packages: chosen, read_only: readOnly.checked },
        });
        clear(created,
          h("p", {}, `Key '${key.name}' (${access(key)}). Copy it now: it is shown only this once.`),
          h("pre", { class: "new-key", "aria-label": "The new API key" }, key.key));
        name.value = "";
        await reload();
      } catch (error) {
        status.className = "error";
        status.textContent = error.message;
      }
    },
  },
  h("h2", { id: "k-create-title", class: "flush" }, "Create a key"),
  h("div", { class: "field" }, h("label", { for: "k-name" }, "Name"), name),
  h("fieldset", {},
    h("legend", {}, "Packages the key opens"),
    h("span", { class: "check" }, every, h("label", { for: "k-every" }, "Every package")),
    boxes.map((box) => h("span", { class: "check" }, box, h("label", { for: box.id }, box.value)))),
  h("p", {}, h("span", { class: "check" }, readOnly, h("label", { for: "k-ro" }, "Read-only (may list and read, not write)"))),
  h("button", { type: "submit" }, "Create key"),
  status,
  created);
  return form;
}

export async function keysView(main) {
  const [{ keys }, { packages }] = await Promise.all([api("/keys"), api("/packages")]);
  const table = h("tbody", {}, keyRows(keys, reload));
  async function reload() {
    try {
      const fresh = await api("/keys");
      clear(table, keyRows(fresh.keys, reload));
    } catch (error) {
      table.replaceWith(errorBox(error));
    }
  }
  clear(main,
    h("h1", {}, "API keys"),
    h("p", { class: "muted" },
      "A key limited to some packages gets 404 from every other package; a read-only key may list and read but not write. Hand each team a key of its own."),
    h("div", { class: "scroll" }, h("table", {},
      h("caption", { class: "sr-only" }, "API keys, oldest first"),
      h("thead", {}, h("tr", {}, ["Name", "Prefix", "Access", "Created", ""].map((c) => h("th", { scope: "col" }, c)))),
      table)),
    createForm(packages, reload));
}
