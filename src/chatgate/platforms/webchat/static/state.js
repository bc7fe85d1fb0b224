// What the page keeps in the browser: chat and user ids, the conversation, unacknowledged
// messages (resent after every reconnect), the ids of replies already shown (so a re-sent
// reply is shown once, even after New cleared the screen), and the access token.

const local = window.localStorage;
const session = window.sessionStorage;
const HISTORY_LIMIT = 500;
const SHOWN_LIMIT = 2000;

function load(key, fallback) {
  try {
    return JSON.parse(local.getItem(key) || "null") ?? fallback;
  } catch {
    return fallback;
  }
}

function stableId(key, prefix) {
  const id = local.getItem(key) || prefix + crypto.randomUUID();
  local.setItem(key, id);
  return id;
}

export class ChatState {
  constructor() {
    this.chatKey = "chatgate.chat";
    this.userId = stableId("chatgate.user", "user-");
    this.use(stableId(this.chatKey, "web-"));
  }

  /** Signed in (accounts): each account keeps its own current conversation in this browser. */
  scope(name) {
    this.chatKey = "chatgate.chat." + name;
    const known = local.getItem(this.chatKey);
    this.use(known || "web-" + crypto.randomUUID());
    return !known;
  }

  /** Switch to a conversation: its own history, unacknowledged messages and shown ids. */
  use(chatId) {
    this.chatId = chatId;
    local.setItem(this.chatKey, chatId);
    this.historyKey = "chatgate.history." + this.chatId;
    this.unackedKey = "chatgate.unacked." + this.chatId;
    this.shownKey = "chatgate.shown." + this.chatId;
    /** @type {{kind: string, id?: string, text: string, replyTo?: string, failed?: boolean, outcome?: string}[]} */
    this.history = load(this.historyKey, []);
    this.unacked = new Map(load(this.unackedKey, []));
    this.shown = new Set(load(this.shownKey, this.history.filter((h) => h.kind !== "me").map((h) => h.id)));
  }

  /** A new, empty conversation (accounts: "New" is another chat, listed beside the others). */
  fresh() {
    this.use("web-" + crypto.randomUUID());
  }

  save() {
    this.history = this.history.slice(-HISTORY_LIMIT);
    local.setItem(this.historyKey, JSON.stringify(this.history));
    local.setItem(this.unackedKey, JSON.stringify([...this.unacked]));
    local.setItem(this.shownKey, JSON.stringify([...this.shown].slice(-SHOWN_LIMIT)));
  }

  add(entry) {
    this.history.push(entry);
    this.save();
  }

  mine(id) {
    return this.history.find((h) => h.kind === "me" && h.id === id);
  }

  /** New: the screen starts empty; pending messages and the shown ids stay. */
  clear() {
    this.history = [];
    this.save();
  }

  get token() {
    return session.getItem("chatgate.token");
  }

  set token(value) {
    if (value) session.setItem("chatgate.token", value);
    else session.removeItem("chatgate.token");
  }
}
