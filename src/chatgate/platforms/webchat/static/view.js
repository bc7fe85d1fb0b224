// The conversation on screen: message bubbles, drafts, the typing indicator, approval cards.
// Model text goes through the Markdown renderer (text nodes only); user text is shown as typed.

import { render } from "./markdown.js";
import { stepsElement } from "./steps.js";

const log = document.getElementById("log");
const LABELS = { stopped: "stopped", failure: "error" };

function scrollDown() {
  log.scrollTop = log.scrollHeight;
}

function fill(node, kind, text) {
  node.textContent = "";
  if (kind === "me" || kind === "notice" || kind === "error") node.textContent = text;
  else node.append(render(text, node)); // the node: a draft rendered again drops its stale work
}

/** How a file the agent sent is fetched (with the conversation's headers; set by the app). */
let openFile = () => {};
export function setFileOpener(fn) { openFile = fn; }

/** A file the agent sent: a button that downloads it (never shown inline: it could hold script). */
function fileLink(file) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = "file";
  const kb = file.size >= 1e6 ? (file.size / 1e6).toFixed(1) + " MB" : (file.size / 1e3).toFixed(1) + " kB";
  button.textContent = "📎 " + file.name + " (" + kb + ")";
  button.addEventListener("click", () => openFile(file));
  return button;
}

/** What a bubble offers: ``{copy, retry, regenerate, edit}`` callbacks for an entry (set by the app). */
let offers = () => [];
export function setOffers(fn) { offers = fn; }

function when(at) {
  return at ? new Date(at).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" }) : "";
}

/** A tool's label is its accessible name, drawn by CSS (``attr(data-label)``), so a bubble's
 * text is still exactly the message (what Copy copies, what a screen reader reads first). */
export function setLabel(button, label) {
  button.dataset.label = label;
  button.setAttribute("aria-label", label);
}

/** A row of small buttons under a bubble (shown on hover and on focus, always on touch). */
function toolbar(node, entry) {
  const list = offers(entry);
  if (!list.length) return;
  const bar = document.createElement("div");
  bar.className = "tools";
  for (const [label, run, name] of list) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "tool " + name;
    setLabel(button, label);
    button.addEventListener("click", () => run(button));
    bar.append(button);
  }
  node.append(bar);
}

/** Called after a bubble's shown answer changed (the app saves the history). */
let onVersion = () => {};
export function setOnVersion(fn) { onVersion = fn; }

/** Which answer of a regenerated reply shows: entry.alts holds every version, entry.shown the
 * one on screen, and entry.text/steps are that one's (what Copy copies, what export reads). */
export function showVersion(entry, index) {
  const version = entry.alts[index];
  entry.shown = index;
  entry.text = version.text;
  entry.steps = version.steps;
  entry.at = version.at;
}

/** The ``< 1/2 >`` control of a reply that was regenerated: both answers stay, either shows. */
function versions(entry) {
  const bar = document.createElement("div");
  bar.className = "versions";
  bar.setAttribute("role", "group");
  bar.setAttribute("aria-label", "Answers");
  const step = (label, mark, delta) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "version " + (delta < 0 ? "prev" : "next");
    button.textContent = mark;
    button.setAttribute("aria-label", label);
    const to = entry.shown + delta;
    button.disabled = to < 0 || to >= entry.alts.length;
    button.addEventListener("click", () => {
      showVersion(entry, to);
      onVersion(entry);
      const node = refreshBubble(entry); // the focus stays on the control (the other arrow at an end)
      const same = node?.querySelector(delta < 0 ? "button.prev" : "button.next");
      (same && !same.disabled ? same : node?.querySelector(".versions button:not(:disabled)"))?.focus();
    });
    return button;
  };
  const count = document.createElement("span");
  count.className = "count";
  count.textContent = `${entry.shown + 1}/${entry.alts.length}`;
  count.setAttribute("aria-label", `answer ${entry.shown + 1} of ${entry.alts.length}`);
  bar.append(step("Previous answer", "‹", -1), count, step("Next answer", "›", 1));
  return bar;
}

/** The bubble of an entry already on screen, rebuilt in place (another answer shown). */
export function refreshBubble(entry) {
  const old = log.querySelector(`.msg[data-id="${CSS.escape(entry.id)}"]`);
  if (!old) return null;
  const node = build(entry);
  old.replaceWith(node);
  return node;
}

/** One history entry as a bubble at the end of the conversation. */
export function bubble(entry, pending = false) {
  const node = build(entry, pending);
  insert(node);
  return node;
}

function build(entry, pending = false) {
  const node = document.createElement("div");
  node.className = "msg " + (entry.kind === "stopped" || entry.kind === "failure" ? "bot " : "") + entry.kind;
  if (pending) node.classList.add("pending");
  if (entry.failed) { node.classList.add("failed"); node.title = entry.error || ""; }
  if (entry.id) node.dataset.id = entry.id;
  if (entry.kind === "error" || entry.kind === "failure") node.setAttribute("role", "alert");
  const body = document.createElement("div");
  body.className = "body";
  fill(body, entry.kind, entry.text);
  if (entry.steps) node.append(stepsElement(entry.steps));
  node.append(body);
  if (entry.file) node.append(fileLink(entry.file));
  if (LABELS[entry.kind]) {
    const mark = document.createElement("div");
    mark.className = "mark";
    mark.textContent = LABELS[entry.kind];
    node.append(mark);
  }
  if (entry.at) node.title = node.title || when(entry.at);
  if (entry.alts?.length > 1) node.append(versions(entry));
  toolbar(node, entry);
  return node;
}

/** A regenerated answer being written, in its reply's bubble (the versions come with the final). */
export function regenerating(entry, text) {
  const node = log.querySelector(`.msg[data-id="${CSS.escape(entry.id)}"]`);
  if (!node) return;
  node.setAttribute("aria-busy", "true");
  node.classList.add("regenerating");
  const body = node.querySelector(".body");
  if (text) fill(body, "bot", text);
  else body.textContent = "Writing another answer…"; // until its first words
}

/** New rows go above the typing indicator, which always stays last. */
function insert(node) {
  const typing = document.getElementById("typing");
  log.insertBefore(node, typing);
  welcome();
  scrollDown();
}

/** The welcome and its hints, while the conversation is empty. */
function welcome() {
  document.getElementById("welcome").hidden = log.querySelector(".msg") !== null;
}

/** The agent's name from the config (``platforms.web.agent_name``), set as text: the welcome
 * says who answers, and so does the typing indicator for a screen reader. */
export function nameAgent(name) {
  if (!name) return;
  document.getElementById("welcome-title").textContent = `Hello, I am ${name}. What shall we work on?`;
  document.querySelector("#typing .sr").textContent = `${name} is writing…`;
}

export function clearLog() {
  for (const node of [...log.children]) if (node.id !== "typing" && node.id !== "welcome") node.remove();
  welcome();
}

export function mineEl(id) {
  return log.querySelector(`.msg.me[data-id="${CSS.escape(id)}"]`);
}

/** Drafts: one bubble per reply being written, in a status region that is busy while it streams
 * (so a screen reader announces the finished reply once, not every chunk). */
export class Drafts {
  constructor() { this.open = new Map(); }

  show(replyTo, text) {
    let node = this.open.get(replyTo);
    if (!node) {
      node = document.createElement("div");
      node.className = "msg bot draft";
      node.setAttribute("role", "status");
      node.setAttribute("aria-busy", "true");
      node.setAttribute("aria-live", "polite");
      node.dataset.replyTo = replyTo;
      const body = document.createElement("div");
      body.className = "body";
      node.append(body);
      this.open.set(replyTo, node);
      insert(node);
    }
    node.dataset.text = text;
    fill(node.firstChild, "bot", text);
    scrollDown();
    this.onChange?.();
  }

  get busy() { return this.open.size > 0; }

  /** The text of each open draft, then none is open. */
  take() {
    const texts = [...this.open.values()].map((node) => node.dataset.text || "");
    this.discardAll();
    return texts;
  }

  discard(replyTo) {
    const node = this.open.get(replyTo);
    if (node) { node.remove(); this.open.delete(replyTo); }
    this.onChange?.();
  }

  discardAll() {
    for (const node of this.open.values()) node.remove();
    this.open.clear();
    this.onChange?.();
  }
}

/** "The assistant is writing": shown from a send until that reply's first draft or final. */
export class Typing {
  constructor() {
    this.node = document.getElementById("typing");
    this.waiting = [];
  }

  wait(id) { if (!this.waiting.includes(id)) this.waiting.push(id); this.update(); }

  get busy() { return this.waiting.length > 0; }

  /** A reply for ``id`` began: it and every older message are no longer waiting. */
  answered(id) {
    const at = this.waiting.indexOf(id);
    if (at >= 0) this.waiting.splice(0, at + 1);
    this.update();
  }

  drop(id) { this.waiting = this.waiting.filter((w) => w !== id); this.update(); }

  reset() { this.waiting = []; this.update(); }

  update() {
    this.node.hidden = this.waiting.length === 0;
    if (!this.node.hidden) scrollDown();
    this.onChange?.();
  }
}

const ASKS = /^Approval needed: the agent wants to (run|call) this (.+?):$/;
const WHY = "It needs a human because it:";

/** The gateway's approval text, read at a glance: what will run, why a person must decide (in
 * words, without the rule's internal key), and the deadline; the command syntax for other chats
 * ("or /approve …") is left out, the buttons are the answer here. Other text is shown as is. */
function showPrompt(body, text) {
  const lines = text.split("\n");
  const asks = ASKS.exec(lines[0] || "");
  const why = lines.indexOf(WHY);
  body.textContent = "";
  body.classList.remove("readable");
  if (!asks || why < 2) { body.textContent = text; return; }
  const reasons = [];
  let at = why + 1;
  for (; at < lines.length && lines[at].startsWith("- "); at++) reasons.push(lines[at].slice(2).replace(/ \[[a-z0-9_]+\]$/, ""));
  const rest = lines.slice(at).join(" ");
  const deadline = /Without an answer within (.+?) it is not run\./.exec(rest);
  const title = document.createElement("h3");
  title.textContent = "The agent wants to " + asks[1] + " this " + asks[2] + ":";
  const command = document.createElement("pre");
  command.textContent = lines.slice(1, why).join("\n");
  const because = document.createElement("p");
  because.textContent = "A person must decide because it:";
  const list = document.createElement("ul");
  for (const reason of reasons) { const li = document.createElement("li"); li.textContent = reason; list.append(li); }
  body.classList.add("readable");
  body.append(title, command, because, list);
  if (deadline) {
    const note = document.createElement("p");
    note.className = "deadline";
    note.textContent = "Not run unless someone approves within " + deadline[1] + ".";
    body.append(note);
  }
}

/** Approval cards: big buttons while open; after an answer the card stays with its outcome. */
export class Prompts {
  constructor(onTap) {
    this.cards = new Map();
    this.onTap = onTap;
  }

  card(promptId, text) {
    let card = this.cards.get(promptId);
    if (!card) {
      const node = document.createElement("section");
      node.className = "msg prompt";
      node.dataset.promptId = promptId;
      node.setAttribute("aria-label", "Approval needed");
      const body = document.createElement("div");
      body.className = "body";
      const options = document.createElement("div");
      options.className = "options";
      const outcome = document.createElement("div");
      outcome.className = "outcome";
      outcome.setAttribute("role", "status");
      node.append(body, options, outcome);
      card = { node, body, options, outcome };
      this.cards.set(promptId, card);
      insert(node);
    }
    showPrompt(card.body, text);
    return card;
  }

  /** A prompt frame: the card with one button per option, in order. */
  open(frame) {
    const card = this.card(frame.prompt_id, frame.text);
    card.node.classList.remove("closed", "approved", "denied", "expired");
    card.options.textContent = "";
    card.outcome.textContent = "";
    for (const option of frame.options) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "option " + (option.id === "deny" ? "deny" : "approve");
      button.textContent = option.label;
      button.addEventListener("click", () => {
        for (const other of card.options.querySelectorAll("button")) other.disabled = true;
        card.outcome.textContent = option.label + "…";
        this.onTap(frame.prompt_id, option.id);
      });
      card.options.append(button);
    }
    scrollDown();
  }

  /** The recorded outcome replaces the buttons; the card stays in the conversation. */
  resolve(promptId, text, outcome, promptText) {
    const card = this.cards.get(promptId) || this.card(promptId, promptText || "Approval prompt");
    card.options.textContent = "";
    card.outcome.textContent = text;
    card.node.classList.add("closed");
    if (outcome) card.node.classList.add(outcome);
  }

  refused(promptId, message) {
    const card = this.cards.get(promptId);
    if (!card) return;
    for (const button of card.options.querySelectorAll("button")) button.disabled = false;
    card.outcome.textContent = message;
  }

  isOpen(promptId) {
    const card = this.cards.get(promptId);
    return !!card && !card.node.classList.contains("closed");
  }

  clear() { this.cards.clear(); }
}
