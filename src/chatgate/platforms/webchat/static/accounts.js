// Signed-in mode (platforms.web.auth: accounts): who is signed in, the conversation list with
// search, history from the server, sign out, and the admin's users view. The session cookie is
// HttpOnly; every state-changing request carries the CSRF token /api/me gives this page.

const OUTCOMES = { approved: "Approved", denied: "Denied", expired: "Expired — not run" };
const HIDDEN = /^\/(stop|new|reset)(@\S+)?(\s|$)/i;

export class Account {
  constructor() { this.me = null; }

  /** Who is signed in; null after sending the browser to the sign-in page. */
  async start() {
    const res = await fetch("/api/me", { credentials: "same-origin" });
    if (res.status === 401) { location.assign("/signin"); return null; }
    if (!res.ok) throw new Error("the gateway could not say who is signed in (" + res.status + ")");
    this.me = await res.json();
    return this.me;
  }

  async get(path) {
    const res = await fetch(path, { credentials: "same-origin" });
    if (res.status === 401) location.assign("/signin");
    return res;
  }

  async post(path, body) {
    return fetch(path, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": this.me.csrf },
      body: JSON.stringify(body || {}),
    });
  }

  async conversations(query) {
    const res = await this.get("/api/conversations" + (query ? "?q=" + encodeURIComponent(query) : ""));
    return res.ok ? (await res.json()).conversations : [];
  }

  /** The conversation's entries as the page keeps them, or null when it is not ours. */
  async history(chatId) {
    const res = await this.get("/api/conversations/" + encodeURIComponent(chatId) + "/messages?limit=200");
    if (res.status === 404) return [];
    if (!res.ok) return null;
    return (await res.json()).items.filter((i) => !(i.kind === "me" && HIDDEN.test(i.text.trim()))).map(entryOf);
  }

  async signOut() {
    await this.post("/api/signout");
    location.assign("/signin");
  }
}

function entryOf(item) {
  if (item.kind === "prompt") {
    const entry = { kind: "prompt", id: item.id, text: item.text };
    if (item.outcome && item.outcome !== "pending") { entry.outcome = item.outcome; entry.outcomeText = OUTCOMES[item.outcome] || item.outcome; }
    return entry;
  }
  if (item.kind === "me") return { kind: "me", id: item.id, text: item.text };
  return { kind: item.kind, id: item.id, text: item.text, replyTo: item.in_reply_to };
}

/** The conversation list: titles, the current one marked, a search box. */
export class Sidebar {
  constructor(account, onPick) {
    this.account = account;
    this.onPick = onPick;
    this.nav = document.getElementById("sidebar");
    this.list = document.getElementById("conversations");
    this.search = document.getElementById("search");
    this.toggle = document.getElementById("chats-toggle");
    this.current = null;
    this.pending = null;
    this.search.addEventListener("input", () => this.refresh());
    this.toggle.addEventListener("click", () => this.setOpen(!document.body.classList.contains("sidebar-open")));
  }

  show() { this.nav.hidden = false; this.toggle.hidden = false; }

  setOpen(open) {
    document.body.classList.toggle("sidebar-open", open);
    this.toggle.setAttribute("aria-expanded", String(open));
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
    const chats = await this.account.conversations(this.search.value.trim());
    this.list.textContent = "";
    for (const chat of chats) {
      const item = document.createElement("li");
      const link = document.createElement("a");
      link.href = "#" + chat.id;
      link.dataset.id = chat.id;
      link.textContent = chat.title || "New conversation";
      link.addEventListener("click", (ev) => { ev.preventDefault(); this.setOpen(false); this.onPick(chat.id); });
      item.append(link);
      this.list.append(item);
    }
    this.mark(this.current);
  }
}

/** The admin's view: every user with their tokens, and revocation. */
export class AdminView {
  constructor(account) {
    this.account = account;
    this.screen = document.getElementById("admin-screen");
    this.table = document.getElementById("users");
    this.status = document.getElementById("admin-status");
    document.getElementById("admin-open").addEventListener("click", () => this.open());
    document.getElementById("admin-close").addEventListener("click", () => { this.screen.hidden = true; });
  }

  async open() {
    this.screen.hidden = false;
    await this.load();
  }

  async load() {
    const res = await this.account.get("/api/admin/users");
    if (!res.ok) { this.status.textContent = "Could not list users (" + res.status + ")."; return; }
    const { users } = await res.json();
    this.table.textContent = "";
    for (const user of users) {
      const row = this.table.insertRow();
      row.dataset.name = user.name;
      row.insertCell().textContent = user.name;
      row.insertCell().textContent = user.role + (user.active ? "" : " (revoked)");
      const tokens = row.insertCell();
      for (const token of user.tokens) {
        const line = document.createElement("div");
        line.textContent = token.token_id + (token.active ? " " : " (revoked)");
        if (token.active) line.append(this.button("Revoke token", { token_id: token.token_id }, "revoke-token"));
        tokens.append(line);
      }
      const actions = row.insertCell();
      if (user.active) actions.append(this.button("Revoke user", { user: user.name }, "revoke-user"));
    }
  }

  button(label, body, className) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "ghost " + className;
    button.textContent = label;
    button.addEventListener("click", async () => {
      const res = await this.account.post("/api/admin/revoke", body);
      const answer = await res.json().catch(() => ({}));
      this.status.textContent = res.ok ? "Revoked " + answer.revoked + "." : answer.message || "Not revoked.";
      await this.load();
    });
    return button;
  }
}
