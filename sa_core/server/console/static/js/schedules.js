// A pack's schedules: what runs when, their last run and next run; pause, resume, delete,
// and a form that creates one. Everything goes through /api/packages/{package}/schedules.

import { pkg } from "./api.js";
import { clear, h, time } from "./dom.js";
import { errorBox } from "./app.js";

function when(s) {
  const rule = s.cron ? `cron ${s.cron}` : `every ${s.every}`;
  return s.cron && s.timezone !== "UTC" ? `${rule} (${s.timezone})` : rule;
}

function threadLink(packageName, id) {
  return id ? h("a", { href: `#/p/${encodeURIComponent(packageName)}/t/${id}` }, id.slice(0, 8)) : "–";
}

function row(packageName, s, act) {
  const name = s.name;
  const toggle = s.status === "paused"
    ? h("button", { type: "button", "aria-label": `Resume ${name}`, onclick: () => act(`/${encodeURIComponent(name)}/resume`, "POST") }, "Resume")
    : h("button", { type: "button", "aria-label": `Pause ${name}`, onclick: () => act(`/${encodeURIComponent(name)}/pause`, "POST") }, "Pause");
  const remove = h("button", {
    type: "button",
    class: "danger",
    "aria-label": `Delete ${name}`,
    onclick: () => {
      if (window.confirm(`Delete the schedule ${name}? The threads it started are kept.`)) {
        act(`/${encodeURIComponent(name)}`, "DELETE");
      }
    },
  }, "Delete");
  return h("tr", { "data-schedule": name },
    h("td", {}, h("strong", {}, name), s.description ? h("div", { class: "muted" }, s.description) : null),
    h("td", {}, s.agent),
    h("td", {}, h("code", {}, when(s))),
    h("td", {}, s.thread === "reuse" ? h("span", {}, "one thread ", threadLink(packageName, s.thread_id)) : "new each run"),
    h("td", {}, h("span", { class: `badge s-${s.status === "paused" ? "pending" : "done"}` }, s.status),
      s.source === "pack" ? h("span", { class: "tag" }, "pack") : null),
    h("td", {}, s.status === "paused" ? "–" : time(s.next_run_at)),
    h("td", {}, s.last_run_at ? h("span", {}, time(s.last_run_at), " ", threadLink(packageName, s.last_thread_id)) : "never",
      s.last_error ? h("div", { class: "error" }, s.last_error) : null),
    h("td", { class: "num" }, h("a", {
      href: `#/p/${encodeURIComponent(packageName)}/threads?tag=${encodeURIComponent(`schedule:${name}`)}`,
      "aria-label": `${s.runs} runs of ${name}`,
    }, String(s.runs))),
    h("td", { class: "actions" }, toggle, " ", remove));
}

function createForm(packageName, agents, refresh) {
  const field = (id, label, input, help) => h("div", { class: "field" },
    h("label", { for: id }, label), input, help ? h("small", { class: "muted", id: `${id}-help` }, help) : null);
  const name = h("input", { id: "s-name", required: true, autocomplete: "off" });
  const agent = h("select", { id: "s-agent" }, agents.map((a) => h("option", { value: a.name }, a.name)));
  const kind = h("select", { id: "s-kind" }, h("option", { value: "every" }, "every (interval)"), h("option", { value: "cron" }, "cron expression"));
  const rule = h("input", { id: "s-rule", required: true, placeholder: "15m", "aria-describedby": "s-rule-help" });
  kind.addEventListener("change", () => (rule.placeholder = kind.value === "cron" ? "0 8 * * 1-5" : "15m"));
  const zone = h("input", { id: "s-zone", value: "UTC", "aria-describedby": "s-zone-help" });
  const thread = h("select", { id: "s-thread" }, h("option", { value: "new" }, "a new thread each run"), h("option", { value: "reuse" }, "the same thread every run"));
  const message = h("textarea", { id: "s-message", rows: 2, required: true });
  const status = h("div", { role: "status" });
  return h("form", {
    class: "card",
    "aria-label": "Create a schedule",
    onsubmit: async (event) => {
      event.preventDefault();
      clear(status);
      const body = { name: name.value.trim(), agent: agent.value, message: message.value, timezone: zone.value.trim() || "UTC", thread: thread.value };
      body[kind.value] = rule.value.trim();
      try {
        await pkg(packageName)("/schedules", { method: "POST", body });
        await refresh(`Schedule ${body.name} created.`);
      } catch (error) {
        const problems = (error.body && error.body.errors) || [];
        clear(status, errorBox(error), problems.length > 1
          ? h("ul", { class: "error" }, problems.map((p) => h("li", {}, p.message))) : null);
      }
    },
  },
  h("h2", {}, "Create a schedule"),
  field("s-name", "Name", name),
  field("s-agent", "Agent", agent),
  field("s-kind", "Runs on", kind),
  field("s-rule", "Interval or cron expression", rule, "An interval: 30s, 15m, 2h, 1d. A cron expression: minute hour day month weekday."),
  field("s-zone", "Time zone", zone, "An IANA name such as Europe/Riga; cron expressions are read in it."),
  field("s-thread", "Thread", thread),
  field("s-message", "Message", message),
  h("button", { type: "submit" }, "Create schedule"),
  status);
}

export async function schedulesView(main, packageName) {
  const call = pkg(packageName);
  const [{ agents }, { schedules }] = await Promise.all([call("/agents"), call("/schedules")]);
  const notice = h("p", { role: "status", class: "muted", id: "schedules-status" });
  const refresh = async (text) => {
    await schedulesView(main, packageName);
    const shown = document.getElementById("schedules-status");
    if (shown && text) shown.textContent = text;
  };
  const act = async (path, method) => {
    try {
      await call(`/schedules${path}`, { method });
      const name = decodeURIComponent(path.split("/")[1]);
      const done = method === "DELETE" ? "deleted" : path.endsWith("/pause") ? "paused" : "resumed";
      await refresh(`Schedule ${name} ${done}.`);
    } catch (error) {
      clear(notice, errorBox(error));
    }
  };
  const table = schedules.length
    ? h("div", { class: "scroll" }, h("table", { class: "schedules" },
      h("caption", { class: "sr-only" }, "Schedules"),
      h("thead", {}, h("tr", {}, ["Schedule", "Agent", "When", "Thread", "Status", "Next run", "Last run", "Runs", "Actions"]
        .map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, schedules.map((s) => row(packageName, s, act)))))
    : h("p", {}, "No schedules yet. Define them in the pack (Pack(schedules=[define_schedule(...)])) or create one below.");
  clear(main,
    h("h1", {}, `Schedules of ${packageName}`),
    h("p", { class: "muted" }, "Each run sends the message to the agent on a thread tagged schedule:<name>; ",
      "runs missed while no server ran start once at the next start."),
    notice,
    table,
    createForm(packageName, agents, refresh));
}
