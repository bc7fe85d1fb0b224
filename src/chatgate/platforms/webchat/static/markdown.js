// A small Markdown renderer that builds DOM nodes: model text only ever becomes text nodes.
//
// Why our own: the page must work offline with no build step, and model output is untrusted.
// Nothing here assigns innerHTML; a link is made only for http:, https: and mailto: URLs.
// Supported: code fences (highlighted by highlight.js, with a copy button), inline code,
// **bold**, *italic*/_italic_, ~~strike~~, headings, bullet and numbered lists (nested, mixed),
// block quotes, tables, rules, links. Lists and quotes nest at most MAX_DEPTH deep (deeper ones
// are shown as text), so hostile nesting cannot exhaust the stack.

import { HIGHLIGHT_LIMIT, highlight } from "./highlight.js";

const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);
const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)\s*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const BULLET = /^(\s*)([-*+])(\s+)(.*)$/;
const ORDERED = /^(\s*)(\d{1,9})[.)](\s+)(.*)$/;
const MAX_DEPTH = 8;
const QUOTE = /^ {0,3}>\s?(.*)$/;
const TABLE_RULE = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;

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

/** A link; ``label`` is Markdown for [label](url), plain text for a bare URL (never re-parsed). */
function link(label, href, plain = false) {
  const a = el("a");
  a.href = href;
  a.rel = "noopener noreferrer";
  a.target = "_blank";
  if (plain) a.textContent = label;
  else a.append(...inline(label, false));
  return a;
}

// Inline spans, tried at each position in this order; the first match wins.
const INLINE = [
  [/^`([^`\n]+)`/, (m) => { const c = el("code"); c.textContent = m[1]; return c; }],
  [/^\[([^\]\n]+)\]\(([^)\s]+)\)/, (m) => {
    const href = safeUrl(m[2]);
    return href ? link(m[1], href) : document.createTextNode(m[0]);
  }],
  [/^<((?:https?|mailto):[^>\s]+)>/, (m) => {
    const href = safeUrl(m[1]);
    return href ? link(m[1], href, true) : document.createTextNode(m[0]);
  }],
  [/^(https?:\/\/[^\s<>()]*[^\s<>().,;:!?'"])/, (m) => {
    const href = safeUrl(m[1]);
    return href ? link(m[1], href, true) : document.createTextNode(m[0]);
  }],
  [/^\*\*(?=\S)([\s\S]*?\S)\*\*/, (m, links) => wrap("strong", m[1], links)],
  [/^__(?=\S)([\s\S]*?\S)__(?!\w)/, (m, links) => wrap("strong", m[1], links)],
  [/^~~(?=\S)([\s\S]*?\S)~~/, (m, links) => wrap("del", m[1], links)],
  [/^\*(?=[^\s*])([\s\S]*?[^\s*])\*/, (m, links) => wrap("em", m[1], links)],
  [/^_(?=[^\s_])([\s\S]*?[^\s_])_(?!\w)/, (m, links) => wrap("em", m[1], links)],
];

const LINKS = new Set([1, 2, 3]); // the INLINE entries that make links (never inside a link)

function wrap(tag, text, links) {
  const node = el(tag);
  node.append(...inline(text, links));
  return node;
}

/** Inline Markdown of one block as a list of nodes (text nodes for everything else). */
export function inline(text, links = true) {
  const out = [];
  let plain = "";
  let i = 0;
  while (i < text.length) {
    const rest = text.slice(i);
    // Only start a span at a character that can open one; after a word character, "_" cannot.
    const canOpen = /[`[<h*_~]/.test(rest[0]) && !(rest[0] === "_" && /\w/.test(text[i - 1] || ""));
    let matched = null;
    if (canOpen) {
      for (const [n, [pattern, build]] of INLINE.entries()) {
        if (!links && LINKS.has(n)) continue;
        const m = pattern.exec(rest);
        if (m) { matched = [m, build]; break; }
      }
    }
    if (!matched) { plain += rest[0]; i += 1; continue; }
    if (plain) { out.push(document.createTextNode(plain)); plain = ""; }
    out.push(matched[1](matched[0], links));
    i += matched[0][0].length;
  }
  if (plain) out.push(document.createTextNode(plain));
  return out;
}

function codeBlock(lang, lines, ctx) {
  const box = el("div", "codeblock");
  const bar = el("div", "codebar");
  const label = el("span", "lang");
  label.textContent = lang || "text";
  const copy = el("button", "copy");
  copy.type = "button";
  copy.textContent = "Copy";
  copy.setAttribute("aria-label", "Copy code");
  const pre = el("pre");
  const code = el("code");
  code.append(...highlight(lang, lines.join("\n"), ctx.budget));
  if (lang) code.dataset.lang = lang;
  pre.append(code);
  bar.append(label, copy);
  box.append(bar, pre);
  return box;
}

function splitRow(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
  return row.split(/(?<!\\)\|/).map((cell) => cell.trim().replace(/\\\|/g, "|"));
}

function table(header, align, rows) {
  const wrapper = el("div", "tablewrap");
  const t = el("table");
  const head = el("thead");
  const tr = el("tr");
  header.forEach((cell, n) => {
    const th = el("th");
    th.append(...inline(cell));
    if (align[n]) th.style.textAlign = align[n];
    tr.append(th);
  });
  head.append(tr);
  const body = el("tbody");
  for (const cells of rows) {
    const row = el("tr");
    header.forEach((_, n) => {
      const td = el("td");
      td.append(...inline(cells[n] ?? ""));
      if (align[n]) td.style.textAlign = align[n];
      row.append(td);
    });
    body.append(row);
  }
  t.append(head, body);
  wrapper.append(t);
  return wrapper;
}

function alignments(line) {
  return splitRow(line).map((c) => (c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : ""));
}

/** Columns of leading white space (a tab to the next multiple of 4). */
function indentOf(line) {
  let cols = 0;
  for (const ch of line) {
    if (ch === " ") cols += 1;
    else if (ch === "\t") cols += 4 - (cols % 4);
    else break;
  }
  return cols;
}

/** The line without its first ``cols`` columns of leading white space. */
function dedent(line, cols) {
  let i = 0;
  let at = 0;
  while (i < line.length && at < cols && (line[i] === " " || line[i] === "\t")) {
    at += line[i] === "\t" ? 4 - (at % 4) : 1;
    i += 1;
  }
  return line.slice(i);
}

/** A list item's marker line: its kind, marker indent, content column, number and text. */
function marker(line) {
  const numbered = ORDERED.exec(line);
  const m = numbered || BULLET.exec(line);
  if (!m) return null;
  const ordered = Boolean(numbered);
  const indent = indentOf(m[1]);
  const width = ordered ? m[2].length + 1 : 1;
  const gap = m[3].length > 4 ? 1 : m[3].length; // CommonMark: a wide gap starts indented code
  return { ordered, indent, content: indent + width + gap, number: Number(m[2]), text: m[4] };
}

/** Lines from ``i`` that belong to an item whose marker is at column ``indent``: those indented
 * at least two columns more (nested lists, continuations, code), and blank lines between them. */
function itemLines(lines, i, indent) {
  let j = i;
  let end = i;
  while (j < lines.length) {
    if (!lines[j].trim()) { j += 1; continue; }
    if (indentOf(lines[j]) < indent + 2) break;
    end = j + 1;
    j += 1;
  }
  return end;
}

/** A list (nested lists inside its items); an item's first paragraph goes straight into the <li>. */
function list(lines, start, ctx) {
  const first = marker(lines[start]);
  const node = el(first.ordered ? "ol" : "ul");
  if (first.ordered && first.number !== 1) node.start = first.number;
  let i = start;
  while (i < lines.length) {
    const m = marker(lines[i]);
    if (!m || m.ordered !== first.ordered || m.indent >= first.indent + 2) break;
    const end = itemLines(lines, i + 1, m.indent);
    const body = [m.text, ...lines.slice(i + 1, end).map((line) => dedent(line, m.content))];
    node.append(listItem(body, ctx));
    i = end;
    let next = i;
    while (next < lines.length && !lines[next].trim()) next += 1;
    const sibling = next < lines.length ? marker(lines[next]) : null;
    if (!sibling || sibling.ordered !== first.ordered || sibling.indent >= first.indent + 2) break;
    i = next;
  }
  return [node, i];
}

function listItem(body, ctx) {
  const item = el("li");
  const content = renderLines(body, { ...ctx, depth: ctx.depth + 1 });
  const lead = content.firstChild;
  if (lead && lead.tagName === "P") lead.replaceWith(...lead.childNodes);
  item.append(content);
  return item;
}

function paragraph(lines) {
  const p = el("p");
  lines.forEach((line, n) => {
    if (n) p.append(document.createElement("br"));
    p.append(...inline(line.trimStart())); // an indented continuation line, as in CommonMark
  });
  return p;
}

function startsBlock(lines, i) {
  const line = lines[i];
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || BULLET.test(line) || ORDERED.test(line)
    || QUOTE.test(line) || (line.includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]));
}

/** One block starting at line i: [node, index of the next line]. */
function block(lines, i, ctx) {
  const line = lines[i];
  const fence = FENCE.exec(line);
  if (fence) {
    const body = [];
    let j = i + 1;
    while (j < lines.length && !lines[j].trim().startsWith(fence[1])) body.push(lines[j++]);
    return [codeBlock(fence[2], body, ctx), j + 1];  // an unclosed fence (a draft) runs to the end
  }
  const heading = HEADING.exec(line);
  if (heading) {
    const h = el("h" + Math.min(heading[1].length + 2, 6));
    h.append(...inline(heading[2]));
    return [h, i + 1];
  }
  if (RULE.test(line)) return [el("hr"), i + 1];
  const nests = ctx.depth < MAX_DEPTH;
  if (nests && (BULLET.test(line) || ORDERED.test(line))) return list(lines, i, ctx);
  if (nests && QUOTE.test(line)) {
    const inner = [];
    let j = i;
    while (j < lines.length && QUOTE.test(lines[j])) inner.push(QUOTE.exec(lines[j++])[1]);
    const q = el("blockquote");
    q.append(renderLines(inner, { ...ctx, depth: ctx.depth + 1 }));
    return [q, j];
  }
  if (line.includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1])) {
    const rows = [];
    let j = i + 2;
    while (j < lines.length && lines[j].includes("|") && lines[j].trim()) rows.push(splitRow(lines[j++]));
    return [table(splitRow(line), alignments(lines[i + 1]), rows), j];
  }
  const para = [line];
  let j = i + 1;
  while (j < lines.length && lines[j].trim() && !startsBlock(lines, j)) para.push(lines[j++]);
  return [paragraph(para), j];
}

/** Markdown text as a DocumentFragment of safe nodes. */
export function render(text) {
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  return renderLines(lines, { depth: 0, budget: { left: HIGHLIGHT_LIMIT } });
}

/** Blocks of ``lines``; ``ctx`` holds the nesting depth and what is left to highlight. */
function renderLines(lines, ctx) {
  const out = document.createDocumentFragment();
  let i = 0;
  while (i < lines.length) {
    if (!lines[i].trim()) { i += 1; continue; }
    const [node, next] = block(lines, i, ctx);
    out.append(node);
    i = next;
  }
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
