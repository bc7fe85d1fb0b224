// The web chat page: a client of the /ws protocol (docs/webchat-protocol.md), no build step.

import { Account, AdminView } from "./accounts.js";
import { Attachments } from "./attach.js";
import { ConversationApi, Sidebar, addVersion } from "./conversations.js";
import { enableCopy } from "./markdown.js";
import { ChatState } from "./state.js";
import { Steps } from "./steps.js";
import {
  Drafts, Prompts, Typing, bubble, clearLog, mineEl, nameAgent, refreshBubble, regenerating, setFileOpener, setLabel,
  setOffers, setOnVersion,
} from "./view.js";

// Codes after which resending the same message can succeed; any other error is final for it.
const RETRYABLE = new Set(["storage_unavailable", "not_ready", "shutting_down"]);
const NOT_AGAIN = new Set(["too_large", "invalid_frame", "invalid_request"]);
const AWAY = "Closed while you were away (shown again if still open).";
const NO_OP = /Dropped 0 waiting message/; // the answer to a Stop or New that had nothing to do

const ACCOUNTS = document.body.dataset.auth === "accounts";
const state = new ChatState();
const drafts = new Drafts();
const typing = new Typing();
const steps = new Steps();
const started = new Set(); // messages whose reply has begun (a draft can overtake its ack)
const taps = new Map(); // id of a button frame -> prompt_id, until it is acked or refused
const prompts = new Prompts(tap);
const statusEl = document.getElementById("status");
const composer = document.getElementById("text");
const tokenScreen = document.getElementById("token-screen");
const stopButton = document.getElementById("stop");
const modelSelect = document.getElementById("model");
const notices = new Set(); // ids of hidden commands whose answer is a notice (the model picker's)
const regens = new Map(); // id of a question sent again by Regenerate -> the answer it adds a version to
let ws = null;
let ready = false;
let switching = false; // a hello for another conversation is on its way: drop the old one's frames
let backoff = 500;
let retryTimer = null;
let retryDelay = 1000;

function send(frame) {
  if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(frame));
}

function hello() {
  const frame = { type: "hello", chat_id: state.chatId, user_id: state.userId, user_name: "web user" };
  if (state.token) frame.token = state.token;
  send(frame);
}

/** A message frame; an unacked entry is its text, or {text, attachments} when it names files. */
function messageFrame(id, value) {
  return typeof value === "string" ? { type: "message", id, text: value } : { type: "message", id, ...value };
}

function resendUnacked() {
  if (!ready) return;
  for (const [id, value] of state.unacked) send(messageFrame(id, value));
}

function scheduleRetry() {
  if (retryTimer) return;
  retryTimer = setTimeout(() => { retryTimer = null; resendUnacked(); }, retryDelay);
  retryDelay = Math.min(retryDelay * 2, 15000);
}

function isStopping(text) {
  return /^\/(stop|new|reset)(@\S+)?(\s|$)/i.test(text.trim());
}

function tap(promptId, optionId) {
  const id = crypto.randomUUID();
  taps.set(id, promptId);
  send({ type: "button", id, prompt_id: promptId, option_id: optionId });
}

/** Put a message on screen (unless hidden) and send it; it is resent until acknowledged. */
function submit(text, { hidden = false, attachments = [], regenerates = null } = {}) {
  const id = crypto.randomUUID();
  const value = attachments.length || regenerates ? { text, attachments, ...(regenerates ? { regenerates } : {}) } : text;
  state.unacked.set(id, value);
  const shown = [text, ...attachments.map((a) => "📎 " + a.name)].filter(Boolean).join("\n");
  if (hidden) state.save();
  else { const entry = { kind: "me", id, text: shown, at: Date.now() }; state.add(entry); bubble(entry, true); }
  if (ready) send(messageFrame(id, value));
  return id; // the typing dots wait for the ack: a message not delivered yet has no one answering it
}

/** Stop is there only while a reply is on its way or being written. */
function refreshStop() {
  stopButton.hidden = !(typing.busy || drafts.busy || regens.size > 0);
}
typing.onChange = drafts.onChange = refreshStop;

async function copyText(button, text) {
  const label = button.dataset.label;
  try { await navigator.clipboard.writeText(text); setLabel(button, "Copied"); } catch { setLabel(button, "Copy failed"); }
  setTimeout(() => setLabel(button, label), 1500);
}

/** The buttons under each bubble: copy a reply, regenerate it, retry after an error, edit and resend. */
setOffers((entry) => {
  const asked = entry.replyTo ? state.mine(entry.replyTo) : null;
  const again = (text) => () => { submit(text); composer.focus(); };
  if (entry.kind === "me" && !entry.hidden) {
    return [["Edit", () => { composer.value = entry.text; autosize(); composer.focus(); }, "edit"]];
  }
  if (entry.kind === "bot" || entry.kind === "stopped") {
    const tools = [["Copy", (b) => copyText(b, entry.text), "copy-reply"]];
    if (asked && entry.kind === "bot") tools.push(["Regenerate", () => regenerate(entry, asked), "regenerate"]);
    else if (asked) tools.push(["Regenerate", again(asked.text), "regenerate"]);
    return tools;
  }
  if (entry.kind === "failure" && asked) return [["Retry", again(asked.text), "retry"]];
  if (entry.kind === "error" && entry.retryText && entry.editable) return [["Edit", () => { composer.value = entry.retryText; autosize(); composer.focus(); }, "edit"]];
  if (entry.kind === "error" && entry.retryText) return [["Retry", again(entry.retryText), "retry"]];
  return [];
});

/** Regenerate: the question again, hidden; its answer becomes another version of ``entry``
 * (written into its bubble as it streams), and ``< 1/2 >`` switches between them. */
function regenerate(entry, asked) {
  if ([...regens.values()].includes(entry)) return; // one at a time per answer
  regens.set(submit(asked.text, { hidden: true, regenerates: asked.id }), entry); // recorded: history folds it by fact
  regenerating(entry, "");
  refreshStop();
}

/** A regenerated answer arrived: kept as a version of the answer it replaces on screen. */
function onVersion(frame) {
  const entry = regens.get(frame.in_reply_to);
  regens.delete(frame.in_reply_to);
  state.shown.add(frame.message_id);
  if (frame.type === "final" && !frame.failure) {
    const taken = steps.take(frame.in_reply_to);
    addVersion(entry, { id: frame.message_id, text: frame.text, at: Date.now(), steps: frame.steps || taken });
    state.save();
  } else { // a failure or a notice: said below, the answer shows as it was
    bubble({ kind: frame.failure ? "failure" : "notice", id: frame.message_id, text: frame.text, replyTo: entry.replyTo, at: Date.now() });
  }
  refreshBubble(entry);
  refreshStop();
  send({ type: "received", message_id: frame.message_id });
}
setOnVersion(() => state.save());

/** Stop or another conversation: answers being regenerated show as they were. */
function dropRegens() {
  const entries = [...regens.values()];
  regens.clear();
  for (const entry of entries) refreshBubble(entry);
  refreshStop();
}

function renderHistory() {
  clearLog();
  prompts.clear();
  for (const entry of state.history) {
    if (entry.kind === "prompt") {
      prompts.card(entry.id, entry.text);
      prompts.resolve(entry.id, entry.outcomeText || AWAY, entry.outcome);
    } else {
      bubble(entry, entry.kind === "me" && state.unacked.has(entry.id));
    }
  }
}

/** Open drafts become replies marked "stopped" (a /stop, /new or /reset ended them). */
function markStopped() {
  for (const text of drafts.take()) {
    if (!text) continue;
    const entry = { kind: "stopped", text };
    state.add(entry);
    bubble(entry);
  }
}

/** The model picker: the profiles the ready frame lists, this conversation's selected; hidden
 * when there is only one. */
function showModels(frame) {
  const profiles = Array.isArray(frame.profiles) ? frame.profiles : [];
  modelSelect.hidden = profiles.length < 2;
  modelSelect.textContent = "";
  for (const name of profiles) {
    const option = document.createElement("option");
    option.value = option.textContent = name;
    modelSelect.append(option);
  }
  if (frame.profile) modelSelect.value = frame.profile;
}

function onReady(frame) {
  showModels(frame);
  ready = true;
  switching = false;
  statusEl.textContent = "connected";
  tokenScreen.hidden = true;
  drafts.discardAll(); // a reply still running streams again; a finished one arrives as a final
  for (const entry of state.history) {
    if (entry.kind === "prompt" && prompts.isOpen(entry.id)) prompts.resolve(entry.id, AWAY);
  }
  taps.clear();
  resendUnacked();
  sidebar.refresh(); // after an access token was accepted, the list can be read
}

function onAck(frame) {
  if (taps.has(frame.id)) { taps.delete(frame.id); return; } // prompt_resolved says the outcome
  sidebar.refresh(); // a first message titles the conversation
  const hidden = !state.mine(frame.id);
  const answered = started.has(frame.id) || state.history.some((h) => h.replyTo === frame.id);
  if (state.unacked.has(frame.id) && !hidden && !answered) typing.wait(frame.id); // delivered: now it is answered
  state.unacked.delete(frame.id);
  state.save();
  retryDelay = 1000;
  mineEl(frame.id)?.classList.remove("pending");
}

function onReply(frame) {
  if (regens.has(frame.in_reply_to) && !state.shown.has(frame.message_id)) { onVersion(frame); return; }
  const command = state.mine(frame.in_reply_to) || { text: "" };
  const stopping = isStopping(command.text) || frame.in_reply_to === state.hiddenCommand;
  drafts.discard(frame.in_reply_to);
  if (stopping) { markStopped(); dropRegens(); typing.reset(); } else typing.answered(frame.in_reply_to);
  const noOp = frame.in_reply_to === state.hiddenCommand && NO_OP.test(frame.text);
  if (noOp) state.shown.add(frame.message_id);
  if (!state.shown.has(frame.message_id)) {
    state.shown.add(frame.message_id);
    const failure = frame.type === "final" && frame.failure;
    const kind = frame.type === "notice" ? "notice" : failure ? "failure" : "bot";
    const entry = { kind, id: frame.message_id, text: frame.text, replyTo: frame.in_reply_to, at: Date.now() };
    if (frame.file) entry.file = frame.file; // the agent's file: a link only this conversation's owner opens
    const live = steps.take(frame.in_reply_to);
    const taken = frame.steps || live; // the gateway's record, as its history shows it again
    if (taken && kind !== "notice") entry.steps = taken;
    if (frame.in_reply_to === state.newCommand || notices.has(frame.in_reply_to)) entry.kind = "notice";
    state.add(entry);
    bubble(entry);
  }
  send({ type: "received", message_id: frame.message_id });
}

function onPrompt(frame) {
  if (!state.history.some((h) => h.kind === "prompt" && h.id === frame.prompt_id)) {
    state.add({ kind: "prompt", id: frame.prompt_id, text: frame.text });
  }
  prompts.open(frame);
}

function onResolved(frame) {
  const entry = state.history.find((h) => h.kind === "prompt" && h.id === frame.prompt_id);
  if (entry) { entry.outcome = frame.outcome; entry.outcomeText = frame.text; state.save(); }
  prompts.resolve(frame.prompt_id, frame.text, frame.outcome, entry?.text);
}

function failMessage(frame) {
  state.unacked.delete(frame.id);
  typing.drop(frame.id);
  const entry = state.mine(frame.id);
  if (entry) { entry.failed = true; entry.error = frame.message; }
  state.save();
  const node = mineEl(frame.id);
  if (node) { node.classList.remove("pending"); node.classList.add("failed"); node.title = frame.message; }
}

function onError(frame) {
  if (frame.id && taps.has(frame.id)) {
    prompts.refused(taps.get(frame.id), frame.message);
    taps.delete(frame.id);
    return;
  }
  if (frame.code === "unauthorized" && !frame.id) { askForToken(Boolean(state.token)); return; }
  if (frame.code === "forbidden" && !frame.id && ACCOUNTS) { switchTo(null); return; } // another user's chat
  if (frame.code === "not_found" && !frame.id) { switchTo(null); return; } // deleted (in another tab)
  const entry = { kind: "error", text: frame.message + (frame.code ? " (" + frame.code + ")" : ""), at: Date.now() };
  const final = frame.id && state.unacked.has(frame.id) && !RETRYABLE.has(frame.code);
  if (final && state.mine(frame.id)) entry.retryText = state.mine(frame.id).text;
  entry.editable = NOT_AGAIN.has(frame.code); // sent again as it is, it would be refused again
  bubble(entry);
  if (frame.id && state.unacked.has(frame.id)) {
    if (RETRYABLE.has(frame.code)) scheduleRetry();
    else failMessage(frame);
  }
}

const HANDLERS = {
  ready: onReady,
  ack: onAck,
  draft: (f) => {
    started.add(f.in_reply_to);
    steps.seen(f.in_reply_to, f.text);
    typing.answered(f.in_reply_to);
    if (regens.has(f.in_reply_to)) regenerating(regens.get(f.in_reply_to), f.text);
    else drafts.show(f.in_reply_to, f.text);
  },
  final: onReply,
  notice: onReply,
  prompt: onPrompt,
  prompt_resolved: onResolved,
  error: onError,
};

/** The gateway wants an access token: a sign-in screen instead of a not_ready loop. */
function askForToken(wasWrong) {
  ready = false;
  state.token = null;
  statusEl.textContent = "access token needed";
  tokenScreen.hidden = false;
  document.getElementById("token-error").textContent = wasWrong ? "That token was not accepted. Check it and try again." : "";
  document.getElementById("token").focus();
}

function connect() {
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  ws = new WebSocket(proto + "//" + location.host + "/ws");
  ws.onopen = () => { backoff = 500; hello(); };
  ws.onclose = (ev) => {
    ready = false;
    if (ev.code === 4401) { statusEl.textContent = "signed out"; location.assign("/signin"); return; }
    if (tokenScreen.hidden) statusEl.textContent = "disconnected, retrying…";
    setTimeout(connect, backoff);
    backoff = Math.min(backoff * 2, 10000);
  };
  ws.onmessage = (ev) => {
    let frame;
    try { frame = JSON.parse(ev.data); } catch { return; }
    // Frames of the conversation left behind stay unconfirmed and come again on its next hello.
    if (switching && frame.type !== "ready" && frame.type !== "error") return;
    HANDLERS[frame.type]?.(frame);
  };
}

async function sendComposer() {
  const text = composer.value;
  if (!text.trim() && !files.pending) return;
  if (files.pending) {
    composer.value = "";
    const attachments = await files.take();
    if (text.trim() || attachments.length) submit(text, { attachments });
    return;
  }
  composer.value = "";
  sessionStorage.removeItem("chatgate.composer");
  autosize();
  if (/^\/(new|reset)(@\S+)?(\s|$)/i.test(text.trim())) startOver();
  else if (/^\/stop(@\S+)?(\s|$)/i.test(text.trim())) state.hiddenCommand = submit(text.trim(), { hidden: true }); // as the button
  else submit(text);
}

/** New (the button, or a typed /new or /reset): another conversation of the list; the old one
 * stays as it was, and what it had not delivered yet is still sent (``flushBehind``). */
function startOver() {
  switchTo(null);
  composer.focus();
}

function autosize() { // grows with what is typed (not with the placeholder), up to 240 px
  composer.style.height = "auto";
  if (composer.value) composer.style.height = Math.min(composer.scrollHeight, 240) + "px";
}

function wireControls() {
  nameAgent(document.body.dataset.agentName || "");
  document.getElementById("form").addEventListener("submit", (ev) => { ev.preventDefault(); sendComposer(); });
  composer.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); sendComposer(); }
  });
  composer.addEventListener("input", () => { autosize(); sessionStorage.setItem("chatgate.composer", composer.value); });
  composer.value = sessionStorage.getItem("chatgate.composer") || ""; // what was typed survives a reload
  autosize();
  stopButton.addEventListener("click", () => { state.hiddenCommand = submit("/stop", { hidden: true }); });
  refreshStop();
  const narrow = matchMedia("(max-width: 600px)"); // the full hint does not fit a phone's composer
  const placeholder = () => { composer.placeholder = narrow.matches ? "Message" : "Message (Shift+Enter: new line)"; };
  narrow.addEventListener("change", placeholder);
  placeholder();
  document.getElementById("new").addEventListener("click", () => startOver());
  files.wire(composer);
  // the session's switch, as typed: the gateway answers with a notice ("Switched this session to …")
  modelSelect.addEventListener("change", () => notices.add(submit("/model " + modelSelect.value, { hidden: true })));
  document.getElementById("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const value = document.getElementById("token").value.trim();
    if (!value) return;
    state.token = value;
    document.getElementById("token").value = "";
    document.getElementById("token-error").textContent = "";
    statusEl.textContent = "connecting…";
    hello();
  });
  enableCopy(document.getElementById("log"));
}

// ---------------------------------------------------------------- the conversation list

const account = ACCOUNTS ? new Account() : null;
const api = ACCOUNTS
  ? new ConversationApi(() => ({ "X-CSRF-Token": account.me?.csrf || "" }), () => location.assign("/signin"))
  : new ConversationApi(() => (state.token ? { "X-Chatgate-User": state.userId, "X-Chatgate-Token": state.token } : { "X-Chatgate-User": state.userId }));
const files = new Attachments(() => state.chatId, () => api.headers(), () => ready);
setFileOpener(async (file) => {
  // Fetched with the conversation's headers (a plain link could not send them), then saved.
  const res = await fetch(file.url, { credentials: "same-origin", headers: api.headers() });
  if (!res.ok) { alert(file.name + ": " + ((await res.json().catch(() => ({}))).message || res.status)); return; }
  const url = URL.createObjectURL(await res.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = file.name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
});
const sidebar = new Sidebar(api, { onPick: (id) => switchTo(id), onDeleted: () => switchTo(null) });

/** The server's history of the current conversation, with what this tab sent and is not yet
 * acknowledged kept at the end. False when the conversation is another user's. */
async function loadServerHistory() {
  const items = await api.history(state.chatId);
  if (items === null) return false;
  const known = new Set(items.map((i) => i.id));
  const pending = state.history.filter((h) => h.kind === "me" && state.unacked.has(h.id) && !known.has(h.id));
  state.history = [...items, ...pending];
  for (const item of items) if (item.kind !== "me") state.shown.add(item.id);
  state.save();
  return true;
}

/** Messages a conversation left behind had not delivered yet: sent on a socket of their own,
 * until each is acknowledged (or refused for good), so switching never loses one. */
function flushBehind(chatId) {
  const key = "chatgate.unacked." + chatId;
  const left = () => new Map(JSON.parse(localStorage.getItem(key) || "[]"));
  if (left().size === 0) return;
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const socket = new WebSocket(proto + "//" + location.host + "/ws");
  let done = false;
  socket.onopen = () => {
    const frame = { type: "hello", chat_id: chatId, user_id: state.userId, user_name: "web user" };
    if (state.token) frame.token = state.token;
    socket.send(JSON.stringify(frame));
  };
  socket.onmessage = (ev) => {
    const frame = JSON.parse(ev.data);
    const pending = left();
    if (frame.type === "ready") for (const [id, value] of pending) socket.send(JSON.stringify(messageFrame(id, value)));
    if ((frame.type === "ack" || (frame.type === "error" && frame.id && !RETRYABLE.has(frame.code))) && pending.delete(frame.id)) {
      localStorage.setItem(key, JSON.stringify([...pending]));
      if (pending.size === 0) { done = true; socket.close(); }
    }
  };
  socket.onclose = () => { if (!done && left().size) setTimeout(() => flushBehind(chatId), 2000); };
}

/** Show another conversation (null: a new, empty one) and say hello for it on the open socket.
 * A conversation this browser kept shows what it kept; another is read from the gateway. */
async function switchTo(chatId) {
  if (chatId === state.chatId) return;
  const behind = state.chatId;
  switching = true;
  dropRegens();
  drafts.discardAll();
  typing.reset();
  if (chatId) state.use(chatId); else state.fresh();
  if (chatId && (ACCOUNTS || state.history.length === 0) && !(await loadServerHistory())) state.fresh();
  flushBehind(behind);
  renderHistory();
  sidebar.mark(state.chatId);
  ready = false;
  hello();
  sidebar.refresh();
}

async function startSignedIn() {
  const me = await account.start();
  if (!me) return false;
  if (state.scope(me.name)) { // a browser new to this user opens their latest conversation
    const [latest] = await api.conversations("");
    if (latest) state.use(latest.id);
  }
  const who = document.getElementById("who");
  who.textContent = me.name;
  who.hidden = false;
  const signout = document.getElementById("signout");
  signout.hidden = false;
  signout.addEventListener("click", () => account.signOut());
  if (me.role === "admin") { new AdminView(account); document.getElementById("admin-open").hidden = false; }
  if (!(await loadServerHistory())) state.fresh();
  return true;
}

async function boot() {
  wireControls();
  if (ACCOUNTS && !(await startSignedIn())) return;
  // this browser's copy of a conversation it had is gone (cleared): the gateway's history of it
  const had = localStorage.getItem(state.shownKey) !== null;
  if (!ACCOUNTS && had && state.history.length === 0 && !(await loadServerHistory())) state.fresh();
  sidebar.show();
  sidebar.mark(state.chatId);
  renderHistory();
  connect();
  sidebar.refresh();
  for (const key of Object.keys(localStorage)) { // left behind by an earlier visit
    const chatId = key.startsWith("chatgate.unacked.") ? key.slice("chatgate.unacked.".length) : null;
    if (chatId && chatId !== state.chatId) flushBehind(chatId);
  }
}

boot();
