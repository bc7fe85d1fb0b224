// A small Markdown renderer that builds DOM nodes: model text only ever becomes text nodes.
//
// Why our own: the page must work offline with no build step, and model output is untrusted.
// Nothing here assigns innerHTML; a link is made only for http:, https: and mailto: URLs.
// Supported: code fences (with a copy button), inline code, **bold**, *italic*/_italic_,
// ~~strike~~, headings, bullet and numbered lists, block quotes, tables, rules, links.

const SAFE_PROTOCOLS = new Set(["http:", "https:", "mailto:"]);
const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)\s*$/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const BULLET = /^(\s*)[-*+]\s+(.*)$/;
const ORDERED = /^(\s*)(\d{1,9})[.)]\s+(.*)$/;
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

function codeBlock(lang, lines) {
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
  code.textContent = lines.join("\n");
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

function list(lines, start) {
  const ordered = ORDERED.test(lines[start]);
  const pattern = ordered ? ORDERED : BULLET;
  const node = el(ordered ? "ol" : "ul");
  if (ordered) {
    const first = Number(ORDERED.exec(lines[start])[2]);
    if (first !== 1) node.start = first;
  }
  let i = start;
  let item = null;
  while (i < lines.length) {
    const m = pattern.exec(lines[i]);
    if (m) {
      item = el("li");
      item.append(...inline(ordered ? m[3] : m[2]));
      node.append(item);
    } else if (item && /^\s{2,}\S/.test(lines[i])) {
      item.append(document.createElement("br"), ...inline(lines[i].trim()));
    } else {
      break;
    }
    i += 1;
  }
  return [node, i];
}

function paragraph(lines) {
  const p = el("p");
  lines.forEach((line, n) => {
    if (n) p.append(document.createElement("br"));
    p.append(...inline(line));
  });
  return p;
}

function startsBlock(lines, i) {
  const line = lines[i];
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || BULLET.test(line) || ORDERED.test(line)
    || QUOTE.test(line) || (line.includes("|") && i + 1 < lines.length && TABLE_RULE.test(lines[i + 1]));
}

/** One block starting at line i: [node, index of the next line]. */
function block(lines, i) {
  const line = lines[i];
  const fence = FENCE.exec(line);
  if (fence) {
    const body = [];
    let j = i + 1;
    while (j < lines.length && !lines[j].trim().startsWith(fence[1])) body.push(lines[j++]);
    return [codeBlock(fence[2], body), j + 1];  // an unclosed fence (a draft) runs to the end
  }
  const heading = HEADING.exec(line);
  if (heading) {
    const h = el("h" + Math.min(heading[1].length + 2, 6));
    h.append(...inline(heading[2]));
    return [h, i + 1];
  }
  if (RULE.test(line)) return [el("hr"), i + 1];
  if (BULLET.test(line) || ORDERED.test(line)) return list(lines, i);
  if (QUOTE.test(line)) {
    const inner = [];
    let j = i;
    while (j < lines.length && QUOTE.test(lines[j])) inner.push(QUOTE.exec(lines[j++])[1]);
    const q = el("blockquote");
    q.append(render(inner.join("\n")));
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
  const out = document.createDocumentFragment();
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    if (!lines[i].trim()) { i += 1; continue; }
    const [node, next] = block(lines, i);
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
