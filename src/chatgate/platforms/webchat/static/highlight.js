// Syntax highlighting of code blocks by the vendored highlight.js (vendor/highlight/, its
// common-languages build), turned into DOM nodes: flat <span class="tok-..."> elements holding
// text nodes, never markup. highlight.js's own output is an HTML string; this reads its token
// tree instead (the emitter's walk), so model code never passes through an HTML parser.
//
// Only a language the fence names is highlighted (no guessing, which would run every grammar),
// and at most HIGHLIGHT_LIMIT characters of one message: the rest is shown plain, which bounds
// the work a hostile reply can cause (bench/webchat_highlight.py measures it).

import hljs from "./vendor/highlight/highlight.min.js";

export const HIGHLIGHT_LIMIT = 20000;

// highlight.js scopes to the page's token classes (app.css colours them, in both themes).
const CLASSES = {
  keyword: "keyword", string: "string", regexp: "string", comment: "comment", doctag: "comment",
  number: "number", literal: "literal", built_in: "builtin", type: "builtin", title: "title",
  section: "title", attr: "property", attribute: "property", property: "property", variable: "variable",
  "template-variable": "variable", meta: "meta", addition: "inserted", deletion: "deleted",
  symbol: "literal", bullet: "keyword", selector: "keyword", tag: "keyword", name: "keyword",
};

/** The page's class for a highlight.js scope (``title.function`` is a title), or null. */
function classOf(scope) {
  return scope ? CLASSES[scope.split(".")[0]] || null : null;
}

/** Builds the flat node list from highlight.js's token tree: a text piece takes the class of the
 * innermost scope that has one (a string's interpolation is no nested span). */
class NodeBuilder {
  constructor() { this.nodes = []; this.stack = [null]; }

  addText(text) {
    const cls = this.stack[this.stack.length - 1];
    if (!cls) { this.nodes.push(document.createTextNode(text)); return; }
    const span = document.createElement("span");
    span.className = "tok-" + cls;
    span.textContent = text;
    this.nodes.push(span);
  }

  openNode(node) { this.stack.push(classOf(node.scope) || this.stack[this.stack.length - 1]); }

  closeNode() { this.stack.pop(); }
}

/** The vendored library's name for a fence's language, or null when it has none. */
export function grammarName(lang) {
  const name = (lang || "").toLowerCase();
  return name && hljs.getLanguage(name) ? name : null;
}

/** Highlighted nodes for a code block, spending from ``budget.left`` (characters per message). */
export function highlight(lang, code, budget = { left: HIGHLIGHT_LIMIT }) {
  const name = grammarName(lang);
  if (!name || budget.left <= 0) return [document.createTextNode(code)];
  let cut = Math.min(code.length, budget.left);
  if (cut < code.length) { // end the highlighted part at a line's end when there is one
    const newline = code.lastIndexOf("\n", cut - 1);
    if (newline > 0) cut = newline + 1;
  }
  budget.left -= cut;
  let nodes;
  try {
    const part = code.slice(0, cut);
    const result = hljs.highlight(part, { language: name, ignoreIllegals: true });
    nodes = result.errorRaised ? null : result._emitter.walk(new NodeBuilder()).nodes;
    // the code must survive exactly (Copy copies it): anything else is shown plain
    if (!nodes || nodes.map((n) => n.textContent).join("") !== part) nodes = [document.createTextNode(part)];
  } catch {
    nodes = [document.createTextNode(code.slice(0, cut))]; // a grammar's failure shows the code plain
  }
  if (cut < code.length) nodes.push(document.createTextNode(code.slice(cut)));
  return nodes;
}
