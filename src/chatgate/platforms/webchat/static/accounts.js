// Signed-in mode (platforms.web.auth: accounts): who is signed in, sign out, and the admin's
// users view (the conversation list is conversations.js, in every mode). The session cookie is
// HttpOnly; every state-changing request carries the CSRF token /api/me gives this page.

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

  async signOut() {
    await this.post("/api/signout");
    location.assign("/signin");
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
    document.getElementById("admin-close").addEventListener("click", () => this.close());
    this.screen.addEventListener("keydown", (ev) => { if (ev.key === "Escape") this.close(); });
    document.getElementById("add-user").addEventListener("submit", (ev) => { ev.preventDefault(); this.add(); });
    document.getElementById("new-token-copy").addEventListener("click", () =>
      navigator.clipboard.writeText(document.getElementById("new-token-value").textContent).then(
        () => { this.status.textContent = "Token copied."; },
        () => { this.status.textContent = "Could not copy; select the token and copy it."; },
      ));
  }

  close() {
    this.screen.hidden = true;
    document.getElementById("new-token").hidden = true; // shown once: gone when the view closes
    document.getElementById("new-token-value").textContent = "";
    document.getElementById("admin-open").focus();
  }

  /** A new user: the gateway answers with their sign-in token, shown here once. */
  async add() {
    const name = document.getElementById("new-user");
    const admin = document.getElementById("new-admin");
    const res = await this.account.post("/api/admin/users/add", { name: name.value.trim(), admin: admin.checked });
    const answer = await res.json().catch(() => ({}));
    if (!res.ok) { this.status.textContent = answer.message || "Not added (" + res.status + ")."; return; }
    name.value = "";
    admin.checked = false;
    document.getElementById("new-token-name").textContent = answer.name;
    document.getElementById("new-token-value").textContent = answer.token;
    document.getElementById("new-token").hidden = false;
    this.status.textContent = "Added " + answer.role + " " + answer.name + ".";
    await this.load();
    document.getElementById("new-token-copy").focus();
  }

  async open() {
    this.screen.hidden = false;
    await this.load();
    document.getElementById("new-user").focus();
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
