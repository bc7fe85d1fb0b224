// highlight.js off the page's main thread (a module worker, same origin: the CSP's script-src
// 'self' covers it). It answers a code block with a token list, [class or null, text] pairs,
// never markup: the page builds the elements (./highlight.js). A grammar's regexes can scan far
// on hostile input (bench/webchat_highlight.py); here that delays the colours, not the page.

import hljs from "./vendor/highlight/highlight.min.js";

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

/** Builds the flat token list from highlight.js's token tree: a text piece takes the class of
 * the innermost scope that has one (a string's interpolation is no nested span). */
class TokenBuilder {
  constructor() { this.tokens = []; this.stack = [null]; }

  addText(text) { this.tokens.push([this.stack[this.stack.length - 1], text]); }

  openNode(node) { this.stack.push(classOf(node.scope) || this.stack[this.stack.length - 1]); }

  closeNode() { this.stack.pop(); }
}

/** The tokens of ``code`` in ``lang``, or null (no such grammar, or the grammar failed). */
function tokens(lang, code) {
  const name = (lang || "").toLowerCase();
  if (!name || !hljs.getLanguage(name)) return null;
  try {
    const result = hljs.highlight(code, { language: name, ignoreIllegals: true });
    return result.errorRaised ? null : result._emitter.walk(new TokenBuilder()).tokens;
  } catch {
    return null; // a grammar's failure: the page keeps the code plain
  }
}

self.onmessage = (ev) => {
  const { id, lang, code } = ev.data;
  self.postMessage({ id, tokens: tokens(lang, code) });
};
