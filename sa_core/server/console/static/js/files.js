// The thread's filesystem: browse, upload, download, delete, grep and find.

import { filePath } from "./api.js";
import { bytes, clear, h, time } from "./dom.js";
import { errorBox } from "./app.js";
import { download, thumbnail } from "./conversation.js";

export async function filesTab(panel, ctx) {
  const base = `/threads/${encodeURIComponent(ctx.threadId)}`;
  let current = "/";
  const listing = h("div", {});
  const status = h("div", { role: "status", "aria-live": "polite" });
  const results = h("div", { "aria-live": "polite" });

  function row(file) {
    return h("tr", {},
      h("td", {}, file.is_directory
        ? h("button", { type: "button", class: "link", onclick: () => open(file.path) }, `${file.name}/`)
        : h("span", {}, (file.mime_type || "").startsWith("image/") ? thumbnail(ctx, file) : null, file.name)),
      h("td", {}, file.is_directory ? "folder" : file.mime_type),
      h("td", {}, file.is_directory ? "" : bytes(file.size)),
      h("td", {}, time(file.created_at)),
      h("td", { class: "actions" },
        file.is_directory ? null : h("button", { type: "button", onclick: () => download(ctx, file.path, file.name), "aria-label": `Download ${file.name}` }, "Download"),
        h("button", {
          type: "button",
          class: "danger",
          "aria-label": `Delete ${file.name}`,
          onclick: async () => {
            if (!window.confirm(`Delete ${file.path}${file.is_directory ? " and everything in it" : ""}?`)) return;
            try {
              await ctx.call(`${base}/files/${filePath(file.path)}${file.is_directory ? "?recursive=true" : ""}`, { method: "DELETE" });
              await open(current);
              status.textContent = `Deleted ${file.path}.`;
            } catch (error) {
              clear(status, errorBox(error));
            }
          },
        }, "Delete")));
  }

  async function open(path) {
    current = path;
    try {
      const dir = await ctx.call(`${base}/files?path=${encodeURIComponent(path)}`);
      const parts = path.split("/").filter(Boolean);
      const crumbs = [h("button", { type: "button", class: "link", onclick: () => open("/") }, "/")];
      parts.forEach((part, i) => {
        const target = `/${parts.slice(0, i + 1).join("/")}`;
        crumbs.push(h("button", { type: "button", class: "link", onclick: () => open(target) }, `${part}/`));
      });
      clear(listing,
        h("nav", { class: "crumbs", "aria-label": "Folder" }, crumbs),
        h("p", { class: "muted" }, `${dir.file_count} files, ${bytes(dir.total_size)} in this thread`),
        dir.entries.length
          ? h("div", { class: "scroll" }, h("table", { class: "files" },
            h("caption", { class: "sr-only" }, `Files in ${path}`),
            h("thead", {}, h("tr", {}, ["Name", "Type", "Size", "Written", "Actions"].map((c) => h("th", { scope: "col" }, c)))),
            h("tbody", {}, dir.entries.map(row))))
          : h("p", { class: "muted" }, "This folder is empty."));
    } catch (error) {
      clear(listing, errorBox(error));
    }
  }

  const upload = h("input", { id: "upload-files", type: "file", multiple: true });
  const uploadForm = h("form", {
    class: "row",
    "aria-label": "Upload files",
    onsubmit: async (event) => {
      event.preventDefault();
      try {
        for (const file of upload.files) {
          const path = `${current.replace(/\/$/, "")}/${file.name}`;
          await ctx.call(`${base}/files/${filePath(path)}`, {
            method: "PUT",
            body: file,
            headers: { "Content-Type": file.type || "application/octet-stream" },
          });
        }
        status.textContent = `Uploaded ${upload.files.length} file(s) to ${current}.`;
        upload.value = "";
        await open(current);
      } catch (error) {
        clear(status, errorBox(error));
      }
    },
  }, h("label", { for: "upload-files" }, "Upload to this folder "), upload, h("button", { type: "submit" }, "Upload"));

  const pattern = h("input", { id: "search-pattern", required: true, placeholder: "TODO or *.md" });
  const mode = h("select", { id: "search-mode" },
    h("option", { value: "grep" }, "contents (grep, regex)"),
    h("option", { value: "find" }, "names (find, glob)"));
  const searchForm = h("form", {
    class: "row",
    "aria-label": "Search files",
    onsubmit: async (event) => {
      event.preventDefault();
      try {
        const q = encodeURIComponent(pattern.value);
        if (mode.value === "grep") {
          const data = await ctx.call(`${base}/grep?pattern=${q}`);
          clear(results, h("h3", {}, `${data.results.length} file(s) match`), h("ul", {}, data.results.map((r) =>
            h("li", {}, h("button", { type: "button", class: "link", onclick: () => download(ctx, r.path, r.name) }, r.path),
              h("ul", {}, r.matches.map((m, i) => h("li", {}, h("code", {}, `${r.line_numbers[i] ?? ""}: ${m}`))))))));
        } else {
          const data = await ctx.call(`${base}/find?pattern=${q}`);
          clear(results, h("h3", {}, `${data.files.length} found`), h("ul", {}, data.files.map((f) =>
            h("li", {}, f.is_directory
              ? h("button", { type: "button", class: "link", onclick: () => open(f.path) }, `${f.path}/`)
              : h("button", { type: "button", class: "link", onclick: () => download(ctx, f.path, f.name) }, f.path)))));
        }
      } catch (error) {
        clear(results, errorBox(error));
      }
    },
  },
  h("label", { for: "search-pattern" }, "Search "), pattern,
  h("label", { for: "search-mode", class: "sr-only" }, "Search in"), mode,
  h("button", { type: "submit" }, "Search"));

  clear(panel, uploadForm, status, listing, h("h2", {}, "Search"), searchForm, results);
  await open("/");
  return null;
}
