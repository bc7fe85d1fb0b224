// Markdown in model replies, parsed by the vendored markdown-it (raw HTML off) and built into
// DOM nodes here from its token stream: model text only ever becomes text nodes.
//
// markdown-it renders to an HTML string; this module does not use that string. It walks the
// tokens and creates only the elements below, with only the attributes they need: a link only
// for http:, https: and mailto: URLs, a table cell's alignment through the CSSOM. Code fences
// are highlighted by highlight.js in a worker (./highlight.js), math by KaTeX (./math.js, loaded lazily).
// Lists and quotes nest at most MAX_DEPTH deep in the page (deeper ones flatten); before parsing,
// markers and indentation deep enough to reach markdown-it's nesting limit are capped (it would
// drop the rest of the message), so hostile nesting neither exhausts the stack nor loses text.

import "./vendor/markdown-it/markdown-it.min.js"; // a UMD build: it sets globalThis.markdownit
import { HIGHLIGHT_LIMIT, highlight, settled as highlighted, supersede } from "./highlight.js";
import { mathElement, mathPlugin, settled as typesetDone, typeset } from "./math.js";

/** Settles when the math rendered so far is typeset and its code highlighted (tests wait on it). */
export function settled() {
  return Promise.all([typesetDone(), highlighted()]).then(() => undefined);
}

const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);
const MAX_DEPTH = 8;
const MAX_NESTING = 100; // markdown-it's default
const INDENT_CAP = 40; // columns: 20 lists, 40 levels
const MARKER_CAP = 50; // levels opened by one line's markers
const md = globalThis.markdownit({ html: false, linkify: true, breaks: true, typographer: false, maxNesting: MAX_NESTING });
md.disable(["image"]); // the page loads no image a reply names (the CSP would refuse it anyway)
md.use(mathPlugin);

/** The URL if it is safe to follow from a chat message, else null. */
export function safeUrl(raw) {
  let url;
  try {
    url = new URL(raw.trim());
  } catch {
    return null;
  }
  return SAFE_PROTOCOLS.has(url.protocol) ? url.href : null;
}

function el(tag, cls) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  return node;
}

function codeBlock(lang, code, ctx) {
  const box = el("div", "codeblock");
  const bar = el("div", "codebar");
  const label = el("span", "lang");
  label.textContent = lang || "text";
  const copy = el("button", "copy");
  copy.type = "button";
  copy.textContent = "Copy";
  copy.setAttribute("aria-label", "Copy code");
  const pre = el("pre");
  const text = el("code");
  text.append(...highlight(lang, code.replace(/\n$/, ""), ctx.budget, ctx.slot));
  if (lang) text.dataset.lang = lang;
  pre.append(text);
  bar.append(label, copy);
  box.append(bar, pre);
  return box;
}

const SIMPLE = { paragraph: "p", list_item: "li", thead: "thead", tbody: "tbody", tr: "tr", strong: "strong", em: "em", s: "del" };
const NESTING = new Set(["bullet_list", "ordered_list", "blockquote"]);

/** The element an opening token makes (appended to ``parent``), or null to keep its content in
 * ``parent`` (a tight list's paragraph, a link to an unsafe URL, nesting past MAX_DEPTH). */
function opening(token, parent, ctx) {
  const kind = token.type.replace(/_open$/, "");
  let node = null;
  if (kind === "paragraph" && token.hidden) return null;
  if (SIMPLE[kind]) node = el(SIMPLE[kind]);
  else if (kind === "heading") node = el("h" + Math.min(Number(token.tag.slice(1)) + 2, 6));
  else if (NESTING.has(kind)) {
    if (ctx.depth >= MAX_DEPTH) return null;
    node = el(kind === "bullet_list" ? "ul" : kind === "ordered_list" ? "ol" : "blockquote");
    const start = Number(token.attrGet("start"));
    if (kind === "ordered_list" && start > 1) node.start = start;
  } else if (kind === "table") {
    const wrap = el("div", "tablewrap");
    parent.append(wrap);
    node = el("table");
    wrap.append(node);
    return node;
  } else if (kind === "th" || kind === "td") {
    node = el(kind);
    const align = /text-align:\s*(left|center|right)/.exec(token.attrGet("style") || "");
    if (align) node.style.textAlign = align[1];
  } else if (kind === "link") {
    const href = safeUrl(token.attrGet("href") || "");
    if (!href) return null;
    node = el("a");
    node.href = href;
    node.rel = "noopener noreferrer";
    node.target = "_blank";
  }
  if (node) parent.append(node);
  return node;
}

/** One leaf token (text, code, a break, a rule, math) appended to ``parent``. */
function leaf(token, parent, ctx) {
  switch (token.type) {
    case "inline": build(token.children, parent, ctx); return;
    case "code_inline": { const code = el("code"); code.textContent = token.content; parent.append(code); return; }
    case "softbreak": case "hardbreak": parent.append(el("br")); return;
    case "hr": parent.append(el("hr")); return;
    case "fence": parent.append(codeBlock(token.info.trim().split(/\s+/)[0], token.content, ctx)); return;
    case "code_block": parent.append(codeBlock("", token.content, ctx)); return;
    case "math_inline": case "math_display": case "math_block": {
      const node = mathElement(token.content, token.type !== "math_inline");
      ctx.math.push(node);
      parent.append(node);
      return;
    }
    default: if (token.content) parent.append(document.createTextNode(token.content)); // text, and html (escaped) if ever on
  }
}

/** Tokens into ``parent``: a stack of open elements, each closing token pops one. */
function build(tokens, parent, ctx) {
  const stack = [[parent, false]];
  for (const token of tokens) {
    const [top] = stack[stack.length - 1];
    if (token.nesting === 1) {
      const node = opening(token, top, ctx);
      const nests = node !== null && NESTING.has(token.type.replace(/_open$/, ""));
      if (nests) ctx.depth += 1;
      stack.push([node || top, nests]);
    } else if (token.nesting === -1) {
      if (stack.length > 1 && stack.pop()[1]) ctx.depth -= 1;
    } else leaf(token, top, ctx);
  }
}

/** Where a line's container markers pass MARKER_CAP, or -1. A quote (``>``) opens one level of
 * markdown-it's nesting, a list item (``-``, ``1.``) two; past MAX_NESTING it would stop
 * nesting and drop the rest of the message. Returns where to put the escaping backslash. */
function tooDeep(line) {
  let i = 0;
  let levels = 0;
  for (;;) {
    while (line[i] === " " || line[i] === "\t") i += 1;
    let end = i;
    let mark = i;
    if (line[i] === ">") end = i + 1;
    else if ("-*+".includes(line[i] || "x") && /[ \t]/.test(line[i + 1] || "")) end = i + 1;
    else {
      while (end - i < 9 && line[end] >= "0" && line[end] <= "9") end += 1;
      if (end === i || !".)".includes(line[end] || "x") || !/[ \t]/.test(line[end + 1] || "")) return -1;
      mark = end; // "1\." is text, "\1." would show its backslash
      end += 1;
    }
    levels += line[i] === ">" ? 1 : 2;
    if (levels > MARKER_CAP) return mark;
    i = end;
  }
}

/** The text with every line's markers past the cap escaped (shown as text, kept), and its
 * indentation past INDENT_CAP columns cut to it (deeper lists would nest as far). Lines inside
 * a code fence are left as they are. */
function capNesting(text) {
  let fence = null; // the open fence's marker, e.g. "```"
  return text.split("\n").map((line) => {
    const mark = /^[ \t]*(`{3,}|~{3,})/.exec(line);
    if (mark && (!fence || (mark[1][0] === fence[0] && mark[1].length >= fence.length))) {
      fence = fence ? null : mark[1];
      return line;
    }
    if (fence) return line;
    const indent = /^[ \t]*/.exec(line)[0];
    if (indent.length > INDENT_CAP / 4 && indent.replace(/\t/g, "    ").length > INDENT_CAP) {
      line = " ".repeat(INDENT_CAP) + line.slice(indent.length);
    }
    const at = tooDeep(line);
    return at < 0 ? line : line.slice(0, at) + "\\" + line.slice(at);
  }).join("\n");
}

/** Markdown text as a DocumentFragment of safe nodes; its math is typeset when KaTeX is loaded
 * and its code highlighted when the worker answers (``settled`` says when). ``slot`` (the element
 * it is shown in) drops what an earlier rendering there still waits for. */
export function render(text, slot = null) {
  supersede(slot);
  const out = document.createDocumentFragment();
  const ctx = { depth: 0, budget: { left: HIGHLIGHT_LIMIT }, math: [], slot };
  build(md.parse(capNesting(String(text)), {}), out, ctx);
  typeset(ctx.math);
  return out;
}

/** Copy buttons of code blocks, handled once for a whole container. */
export function enableCopy(container) {
  container.addEventListener("click", async (ev) => {
    const button = ev.target.closest("button.copy");
    if (!button) return;
    const code = button.closest(".codeblock").querySelector("code").textContent;
    try {
      await navigator.clipboard.writeText(code);
      button.textContent = "Copied";
    } catch {
      button.textContent = "Copy failed";
    }
    setTimeout(() => { button.textContent = "Copy"; }, 1500);
  });
}
