// The conversation list, in every sign-in mode: titles, search, rename, delete (after a
// confirmation) and export (Markdown or JSON). The routes are /api/conversations...; who asks
// is the session cookie (accounts) or this browser's own user id (loopback, shared token).

const OUTCOMES = { approved: "Approved", denied: "Denied", expired: "Expired — not run" };
const HIDDEN = /^\/(stop|new|reset)(@\S+)?(\s|$)|^\/model(@\S+)?\s+\S/i; // Stop, New, the model picker
const SWITCH = /^\/model(@\S+)?\s+\S/i; // answered with a notice, as the picker shows it live
const NO_OP = /Dropped 0 waiting message/; // the answer to a Stop that had nothing to do

/** The HTTP side of the conversation list; ``headers()`` says who asks. */
export class ConversationApi {
  constructor(headers, onSignedOut) {
    this.headers = headers;
    this.onSignedOut = onSignedOut || (() => {});
  }

  async get(path) {
    const res = await fetch(path, { credentials: "same-origin", headers: this.headers() });
    if (res.status === 401) this.onSignedOut();
    return res;
  }

  async post(path, body) {
    const headers = { "Content-Type": "application/json", ...this.headers() };
    return fetch(path, { method: "POST", credentials: "same-origin", headers, body: JSON.stringify(body || {}) });
  }

  async conversations(query) {
    const res = await this.get("/api/conversations" + (query ? "?q=" + encodeURIComponent(query) : ""));
    return res.ok ? (await res.json()).conversations : [];
  }

  /** The conversation's entries as the page keeps them ([] when unknown), or null when it is not ours. */
  async history(chatId) {
    const res = await this.get("/api/conversations/" + encodeURIComponent(chatId) + "/messages?limit=200");
    if (res.status === 404) return [];
    if (!res.ok) return null;
    const items = (await res.json()).items;
    const commands = new Set(items.filter((i) => i.kind === "me" && HIDDEN.test(i.text.trim())).map((i) => i.id));
    const noOp = (i) => commands.has(i.in_reply_to) && NO_OP.test(i.text);
    const switches = new Set(items.filter((i) => i.kind === "me" && SWITCH.test(i.text.trim())).map((i) => i.id));
    const entries = items.filter((i) => !commands.has(i.id) && !noOp(i)).map(entryOf);
    return foldAnswers(entries.map((e) => (switches.has(e.replyTo) ? { ...e, kind: "notice" } : e)));
  }

  rename(chatId, title) { return this.post("/api/conversations/" + encodeURIComponent(chatId) + "/title", { title }); }

  remove(chatId) { return this.post("/api/conversations/" + encodeURIComponent(chatId) + "/delete", {}); }

  /** Download the conversation as a file (``md`` or ``json``). */
  async download(chatId, format) {
    const res = await this.get("/api/conversations/" + encodeURIComponent(chatId) + "/export?format=" + format);
    if (!res.ok) return false;
    const url = URL.createObjectURL(await res.blob());
    const link = document.createElement("a");
    link.href = url;
    link.download = "conversation." + format;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    return true;
  }
}

/** Add ``reply`` as another answer of ``answer`` (a regenerated one), and show it. */
export function addVersion(answer, reply) {
  answer.alts ||= [{ id: answer.id, text: answer.text, at: answer.at, steps: answer.steps }];
  answer.alts.push({ id: reply.id, text: reply.text, at: reply.at, steps: reply.steps });
  answer.shown = answer.alts.length - 1;
  answer.text = reply.text;
  answer.steps = reply.steps;
  answer.at = reply.at;
}

/** The gateway's history with regenerated answers folded: Regenerate sends the question again
 * (hidden) naming the message it asks again (``regenerates``, recorded by the gateway), so that
 * message is left out and its answer becomes another version of the first answer. Only what
 * Regenerate sent folds: a question typed twice stays two exchanges. */
export function foldAnswers(entries) {
  const out = [];
  const firstAnswer = new Map(); // id of a question -> its first answer (which holds the versions)
  const versionOf = new Map(); // id of a message left out -> the answer it adds a version to
  for (const entry of entries) {
    if (entry.kind === "me" && entry.regenerates) {
      const answer = firstAnswer.get(entry.regenerates);
      if (answer) { versionOf.set(entry.id, answer); continue; }
    } else if (entry.kind === "bot" && versionOf.has(entry.replyTo)) {
      addVersion(versionOf.get(entry.replyTo), entry);
      continue;
    } else if (entry.kind === "bot" && entry.replyTo && !firstAnswer.has(entry.replyTo)) {
      firstAnswer.set(entry.replyTo, entry);
    }
    out.push(entry);
  }
  return out;
}

function entryOf(item) {
  const at = item.at ? item.at * 1000 : undefined;
  if (item.kind === "prompt") {
    const entry = { kind: "prompt", id: item.id, text: item.text, at };
    if (item.outcome && item.outcome !== "pending") { entry.outcome = item.outcome; entry.outcomeText = OUTCOMES[item.outcome] || item.outcome; }
    return entry;
  }
  if (item.kind === "me") return { kind: "me", id: item.id, text: item.text, at, ...(item.regenerates ? { regenerates: item.regenerates } : {}) };
  const entry = { kind: item.kind, id: item.id, text: item.text, replyTo: item.in_reply_to, at };
  if (item.steps?.length && item.kind === "bot") entry.steps = item.steps; // what the agent did, as the gateway recorded it
  if (item.file) entry.file = item.file; // the agent's file: its owner-only link, signed again
  return entry;
}

/** Ask before something that cannot be undone; resolves true only on the confirming button. */
export function confirmWith(question, action) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = question;
  const yes = document.getElementById("confirm-yes");
  yes.textContent = action;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "yes"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
    document.getElementById("confirm-no").focus();
  });
}

/** The list beside the chat: titles, the current one marked, a search box, and per item a
 * menu with Rename, Export and Delete. */
export class Sidebar {
  constructor(api, { onPick, onDeleted }) {
    this.api = api;
    this.onPick = onPick;
    this.onDeleted = onDeleted;
    this.nav = document.getElementById("sidebar");
    this.list = document.getElementById("conversations");
    this.search = document.getElementById("search");
    this.toggle = document.getElementById("chats-toggle");
    this.status = document.getElementById("list-status");
    this.current = null;
    this.pending = null;
    this.search.addEventListener("input", () => this.refresh());
    this.toggle.addEventListener("click", () => this.setOpen(!document.body.classList.contains("sidebar-open")));
    document.addEventListener("keydown", (ev) => {
      // Escape closes what is on top: a dialog over the list closes alone, the list stays open.
      if (ev.key !== "Escape" || document.querySelector("dialog[open]")) return;
      if (document.body.classList.contains("sidebar-open")) { this.setOpen(false); this.toggle.focus(); }
    });
  }

  show() { this.nav.hidden = false; this.toggle.hidden = false; }

  setOpen(open) {
    document.body.classList.toggle("sidebar-open", open);
    this.toggle.setAttribute("aria-expanded", String(open));
    if (open) this.search.focus();
  }

  mark(chatId) {
    this.current = chatId;
    for (const a of this.list.querySelectorAll("a")) {
      if (a.dataset.id === chatId) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    }
  }

  /** Reload the list (coalesced: at most one request in flight, then one more). */
  refresh() {
    if (this.pending) { this.again = true; return this.pending; }
    this.pending = this.load().finally(() => {
      this.pending = null;
      if (this.again) { this.again = false; this.refresh(); }
    });
    return this.pending;
  }

  async load() {
    const query = this.search.value.trim();
    const chats = await this.api.conversations(query);
    this.list.textContent = "";
    for (const chat of chats) this.list.append(this.item(chat));
    this.status.textContent = chats.length ? "" : query ? "No conversation matches." : "Your conversations will be listed here.";
    this.mark(this.current);
  }

  item(chat) {
    const title = chat.title || "New conversation";
    const item = document.createElement("li");
    item.dataset.id = chat.id;
    const link = document.createElement("a");
    link.href = "#" + chat.id;
    link.dataset.id = chat.id;
    link.textContent = title;
    link.title = title + " — last active " + new Date(chat.last_activity * 1000).toLocaleString();
    link.addEventListener("click", (ev) => { ev.preventDefault(); this.setOpen(false); this.onPick(chat.id); });
    const menu = document.createElement("details");
    menu.className = "actions";
    const summary = document.createElement("summary");
    summary.textContent = "⋯";
    summary.setAttribute("aria-label", "Actions for " + title);
    summary.title = "Rename, export or delete";
    const group = document.createElement("div");
    group.className = "menu";
    group.append(
      this.action("Rename", () => this.rename(item, chat, title)),
      this.action("Export Markdown", () => this.api.download(chat.id, "md")),
      this.action("Export JSON", () => this.api.download(chat.id, "json")),
      this.action("Delete", () => this.remove(chat, title), "danger"),
    );
    menu.append(summary, group);
    menu.addEventListener("keydown", (ev) => { if (ev.key === "Escape") { menu.open = false; summary.focus(); ev.stopPropagation(); } });
    item.append(link, menu);
    return item;
  }

  action(label, run, className = "") {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "ghost " + className;
    button.textContent = label;
    button.addEventListener("click", () => { button.closest("details").open = false; run(); });
    return button;
  }

  rename(item, chat, title) {
    const form = document.createElement("form");
    form.className = "rename";
    const input = document.createElement("input");
    input.value = chat.title || "";
    input.maxLength = 80;
    input.setAttribute("aria-label", "New name for " + title);
    form.append(input);
    item.replaceChildren(form);
    input.focus();
    input.select();
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const value = input.value.trim();
      if (save && value && value !== chat.title) {
        const res = await this.api.rename(chat.id, value);
        this.status.textContent = res.ok ? "Renamed." : "Could not rename (" + res.status + ").";
      }
      await this.refresh();
      this.list.querySelector(`li[data-id="${CSS.escape(chat.id)}"] a`)?.focus();
    };
    form.addEventListener("submit", (ev) => { ev.preventDefault(); finish(true); });
    input.addEventListener("keydown", (ev) => { if (ev.key === "Escape") { ev.preventDefault(); ev.stopPropagation(); finish(false); } });
    input.addEventListener("blur", () => finish(true));
  }

  async remove(chat, title) {
    if (!(await confirmWith("Delete “" + title + "”? It disappears from your list on every device and cannot be opened again.", "Delete"))) return;
    const res = await this.api.remove(chat.id);
    this.status.textContent = res.ok ? "Deleted “" + title + "”." : "Could not delete (" + res.status + ").";
    if (res.ok && chat.id === this.current) this.onDeleted(chat.id);
    await this.refresh();
    this.search.focus();
  }
}
