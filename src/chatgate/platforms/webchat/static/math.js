// Math in model replies: `$…$` and `$$…$$` found by markdown-it rules of our own (markdown.js
// puts the TeX in a .math element as text), typeset by the vendored KaTeX. KaTeX (270 kB, its
// CSS and fonts) is loaded only when a message holds math, once per page.
//
// KaTeX builds DOM nodes itself (styles through the CSSOM, so the page's CSP holds) and with
// ``trust: false`` refuses \href, \url, \includegraphics and \html*; a formula it cannot read
// is shown as KaTeX's error text, in place.

// errorColor: the theme's, so a refused command stays readable in both themes
const OPTIONS = { throwOnError: false, trust: false, strict: "ignore", maxSize: 50, maxExpand: 1000, errorColor: "var(--error)" };
let katex = null;
let last = Promise.resolve();

/** A ``$`` opens inline math when no space follows it; it closes at the next ``$`` that has no
 * space before it and no digit after it ("costs $5 and $10" stays text). The scan stops at the
 * next ``$``, so a line of dollars is read once. */
function inlineRule(state, silent) {
  const src = state.src;
  const start = state.pos;
  if (src.charCodeAt(start) !== 0x24) return false;
  const display = src.charCodeAt(start + 1) === 0x24;
  const open = display ? 2 : 1;
  if (!display && /\s/.test(src[start + 1] || " ")) return false;
  const end = src.indexOf(display ? "$$" : "$", start + open);
  if (end < 0 || end === start + open) return false;
  if (!display && (/\s/.test(src[end - 1]) || /\d/.test(src[end + 1] || ""))) return false;
  if (!silent) {
    const token = state.push(display ? "math_display" : "math_inline", "span", 0);
    token.content = src.slice(start + open, end);
  }
  state.pos = end + open;
  return true;
}

/** ``$$`` starting a line opens display math up to the line ending in ``$$`` (at most 200
 * lines on; without one the ``$$`` is text). */
function blockRule(state, startLine, endLine, silent) {
  const at = (line) => state.src.slice(state.bMarks[line] + state.tShift[line], state.eMarks[line]);
  if (state.sCount[startLine] - state.blkIndent >= 4) return false;
  const first = at(startLine);
  if (!first.startsWith("$$")) return false;
  const lines = [];
  let rest = first.slice(2);
  let line = startLine;
  for (;;) {
    const trimmed = rest.trimEnd();
    if (trimmed.endsWith("$$") && (line > startLine || trimmed.length > 2)) {
      lines.push(trimmed.slice(0, -2));
      break;
    }
    lines.push(rest);
    line += 1;
    if (line >= endLine || line - startLine > 200) return false;
    rest = at(line);
  }
  if (silent) return true;
  state.line = line + 1;
  const token = state.push("math_block", "div", 0);
  token.block = true;
  token.content = lines.join("\n").trim();
  token.map = [startLine, state.line];
  return true;
}

/** The markdown-it plugin: the rules above. */
export function mathPlugin(md) {
  md.inline.ruler.after("escape", "math_inline", inlineRule);
  md.block.ruler.before("fence", "math_block", blockRule, { alt: ["paragraph", "reference", "blockquote", "list"] });
}

/** The element a formula waits in: its TeX as text until KaTeX typesets it. */
export function mathElement(tex, display) {
  const node = document.createElement(display ? "div" : "span");
  node.className = display ? "math display" : "math";
  node.dataset.tex = tex;
  node.textContent = display ? "$$" + tex + "$$" : "$" + tex + "$";
  return node;
}

async function load() {
  const css = document.createElement("link");
  css.rel = "stylesheet";
  css.href = "/static/vendor/katex/katex.min.css";
  document.head.append(css);
  await import("./vendor/katex/katex.min.js"); // a UMD build: it sets globalThis.katex
  return globalThis.katex;
}

/** Typeset ``nodes`` (made by mathElement), loading KaTeX the first time. */
export function typeset(nodes) {
  if (!nodes.length) return last;
  katex ||= load();
  last = katex.then((lib) => {
    for (const node of nodes) {
      lib.render(node.dataset.tex, node, { ...OPTIONS, displayMode: node.classList.contains("display") });
    }
  }).catch(() => {}); // KaTeX did not load: the TeX stays as text
  return last;
}

/** Settles when every formula rendered so far is typeset (tests wait on it). */
export function settled() {
  return last;
}
