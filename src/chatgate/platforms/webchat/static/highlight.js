// Syntax highlighting of code blocks by the vendored highlight.js (vendor/highlight/, its
// common-languages build), run in a Web Worker (./highlight-worker.js) so a slow grammar never
// blocks the page. A block is shown plain at once; the worker answers a token list ([class,
// text] pairs, never markup) and this module builds flat <span class="tok-..."> elements
// holding text nodes from it, only when the tokens spell the code exactly (Copy copies it).
//
// Only a fence that names a language is highlighted (no guessing, which would run every
// grammar), and at most HIGHLIGHT_LIMIT characters of one message: the rest stays plain, which
// bounds the work a hostile reply can queue (bench/webchat_highlight.py measures it).

export const HIGHLIGHT_LIMIT = 20000;

const CLASSES = new Set([
  "keyword", "string", "comment", "number", "literal", "builtin", "title", "property", "variable", "meta",
  "inserted", "deleted",
]);
const queue = []; // jobs not yet posted: {slot, lang, code, resolve}; one is with the worker at a time
const inflight = new Set(); // the promises of every job not answered yet (``settled`` waits for them)
let current = null; // the job the worker has
let worker = null;
let broken = false;

function start() {
  try {
    worker = new Worker(new URL("./highlight-worker.js", import.meta.url), { type: "module" });
  } catch {
    broken = true; // no worker (refused, or none in this browser): code stays plain
    return;
  }
  worker.onmessage = (ev) => {
    const job = current;
    current = null;
    job?.resolve(Array.isArray(ev.data.tokens) ? ev.data.tokens : null);
    next();
  };
  worker.onerror = () => { // the worker did not load or died: every waiting block stays plain
    broken = true;
    for (const job of [current, ...queue.splice(0)]) job?.resolve(null);
    current = null;
  };
}

function next() {
  if (current || broken || !queue.length) return;
  current = queue.shift();
  worker.postMessage({ lang: current.lang, code: current.code });
}

/** The worker's tokens for ``code``, or null. */
function tokensOf(lang, code, slot) {
  if (!worker && !broken) start();
  if (broken) return Promise.resolve(null);
  const job = new Promise((resolve) => queue.push({ slot, lang, code, resolve }));
  inflight.add(job);
  job.then(() => inflight.delete(job));
  next();
  return job;
}

/** A draft rendered again: the blocks of its earlier rendering not yet sent to the worker are
 * dropped (they stay plain, off screen), so a streaming reply never piles up work. */
export function supersede(slot) {
  if (!slot) return;
  for (let i = queue.length - 1; i >= 0; i--) {
    if (queue[i].slot === slot) queue.splice(i, 1)[0].resolve(null);
  }
}

/** Span and text nodes for ``tokens`` if they spell ``code`` exactly, else null. */
function nodesOf(tokens, code) {
  if (!tokens || tokens.map((t) => (typeof t[1] === "string" ? t[1] : "\0")).join("") !== code) return null;
  return tokens.map(([cls, text]) => {
    if (!CLASSES.has(cls)) return document.createTextNode(text);
    const span = document.createElement("span");
    span.className = "tok-" + cls;
    span.textContent = text;
    return span;
  });
}

/** Nodes for a code block, spending from ``budget.left`` (characters per message): the code as
 * text now, its first part replaced by highlighted nodes when the worker answers. */
export function highlight(lang, code, budget = { left: HIGHLIGHT_LIMIT }, slot = null) {
  if (!lang || budget.left <= 0) return [document.createTextNode(code)];
  let cut = Math.min(code.length, budget.left);
  if (cut < code.length) { // end the highlighted part at a line's end when there is one
    const newline = code.lastIndexOf("\n", cut - 1);
    if (newline > 0) cut = newline + 1;
  }
  budget.left -= cut;
  const part = code.slice(0, cut);
  const plain = document.createTextNode(part);
  tokensOf(lang, part, slot).then((tokens) => {
    const nodes = nodesOf(tokens, part);
    if (nodes && plain.parentNode) plain.replaceWith(...nodes);
  });
  return cut < code.length ? [plain, document.createTextNode(code.slice(cut))] : [plain];
}

/** Settles when every block asked for so far is highlighted (or left plain): tests wait on it. */
export function settled() {
  return Promise.all([...inflight]).then(() => undefined);
}
