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
const jobs = new Map(); // id -> resolve, until the worker answers
const inflight = new Set(); // the promises of those jobs (``settled`` waits for them)
let worker = null;
let broken = false;
let nextId = 0;

function start() {
  try {
    worker = new Worker(new URL("./highlight-worker.js", import.meta.url), { type: "module" });
  } catch {
    broken = true; // no worker (refused, or none in this browser): code stays plain
    return;
  }
  worker.onmessage = (ev) => {
    const done = jobs.get(ev.data.id);
    jobs.delete(ev.data.id);
    done?.(Array.isArray(ev.data.tokens) ? ev.data.tokens : null);
  };
  worker.onerror = () => { // the worker did not load or died: every waiting block stays plain
    broken = true;
    for (const done of jobs.values()) done(null);
    jobs.clear();
  };
}

/** The worker's tokens for ``code``, or null. */
function tokensOf(lang, code) {
  if (!worker && !broken) start();
  if (broken) return Promise.resolve(null);
  const id = ++nextId;
  const job = new Promise((resolve) => jobs.set(id, resolve));
  worker.postMessage({ id, lang, code });
  inflight.add(job);
  job.then(() => inflight.delete(job));
  return job;
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
export function highlight(lang, code, budget = { left: HIGHLIGHT_LIMIT }) {
  if (!lang || budget.left <= 0) return [document.createTextNode(code)];
  let cut = Math.min(code.length, budget.left);
  if (cut < code.length) { // end the highlighted part at a line's end when there is one
    const newline = code.lastIndexOf("\n", cut - 1);
    if (newline > 0) cut = newline + 1;
  }
  budget.left -= cut;
  const part = code.slice(0, cut);
  const plain = document.createTextNode(part);
  tokensOf(lang, part).then((tokens) => {
    const nodes = nodesOf(tokens, part);
    if (nodes && plain.parentNode) plain.replaceWith(...nodes);
  });
  return cut < code.length ? [plain, document.createTextNode(code.slice(cut))] : [plain];
}

/** Settles when every block asked for so far is highlighted (or left plain): tests wait on it. */
export function settled() {
  return Promise.all([...inflight]).then(() => undefined);
}
