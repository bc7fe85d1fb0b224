// Syntax highlighting of code blocks: a small tokenizer of our own; tokens become text nodes in
// <span class="tok-..."> elements, never markup.
//
// Why our own and not a vendored highlighter: docs/architecture.md, "The web chat page".
// Bounded work on hostile text: every rule is a sticky regex whose alternatives start with
// different characters and whose closing delimiter is optional (an unclosed string or comment
// runs to the end of its line, or of the code), so a rule never scans far and then fails, and
// the scan is linear. Line-start rules (YAML keys, diff lines) are tried once per line. At most
// HIGHLIGHT_LIMIT characters of one message are highlighted; the rest is shown plain.

export const HIGHLIGHT_LIMIT = 20000;

const words = (text) => new Set(text.split(" "));

const NUMBER = /0[xXoObB][\da-fA-F_]+|\d[\d_]*(?:\.\d[\d_]*)?(?:[eE][+-]?\d+)?[jJnLlfF]?/y;
const SPACE = /\s+/y;
const WORD = /[A-Za-z_$][\w$]*/y;
const LINE_COMMENT = { hash: /#[^\n]*/y, slashes: /\/\/[^\n]*/y, dashes: /--[^\n]*/y };
const BLOCK_COMMENT = /\/\*[\s\S]*?(?:\*\/|$)/y;
const DQ_LINE = /"(?:[^"\\\n]|\\[\s\S])*"?/y;
const SQ_LINE = /'(?:[^'\\\n]|\\[\s\S])*'?/y;
const DQ_MULTI = /"(?:[^"\\]|\\[\s\S])*"?/y;
const BACKTICK = /`(?:[^`\\]|\\[\s\S])*`?/y;

/** A `#` opens a comment only at the start or after a space (`a#b` in a shell word is not one). */
const afterSpace = (code, i) => i === 0 || /\s/.test(code[i - 1]);

/** A string followed by `:` is a key (JSON, YAML); the spaces are scanned once, after one string. */
function keyOrString(code, end) {
  let j = end;
  while (j < code.length && (code[j] === " " || code[j] === "\t")) j += 1;
  return code[j] === ":" ? "property" : "string";
}

const JS_KEYWORDS = "async await break case catch class const continue debugger default delete do else export "
  + "extends finally for from function if import in instanceof let new of return static super switch throw "
  + "try typeof var void while with yield get set";
const TS_KEYWORDS = " abstract as asserts declare enum implements interface keyof namespace private protected "
  + "public readonly satisfies type infer is module override";
const JS_BUILTINS = "console window document globalThis Math JSON Object Array String Number Boolean Promise "
  + "Map Set WeakMap Symbol Error Date RegExp process require module exports this";
const TS_BUILTINS = " any unknown never string number boolean bigint symbol object void";

const JS_RULES = [
  { re: LINE_COMMENT.slashes, cls: "comment" },
  { re: BLOCK_COMMENT, cls: "comment" },
  { re: DQ_LINE, cls: "string" },
  { re: SQ_LINE, cls: "string" },
  { re: BACKTICK, cls: "string" },
  { re: /@[\w.]+/y, cls: "meta" },
];

const SQL_KEYWORDS = "select from where and or not insert into values update set delete create table drop alter "
  + "add column index on join left right inner outer full cross using group by order having limit offset as "
  + "distinct union all exists in is like ilike between case when then else end primary key foreign references "
  + "unique default constraint check begin commit rollback transaction returning with recursive view trigger "
  + "if replace conflict do nothing asc desc cascade grant revoke schema database explain analyze vacuum over "
  + "partition window lateral";
const SQL_TYPES = "int integer bigint smallint serial bigserial real float double precision numeric decimal text "
  + "varchar char boolean bool date time timestamp timestamptz interval json jsonb uuid bytea blob count sum "
  + "avg min max coalesce now";

/** Each language: its rules (tried in order at each position), then how a word is classed. */
const GRAMMARS = {
  python: {
    rules: [
      { re: LINE_COMMENT.hash, cls: "comment" },
      { re: /[rRbBuUfF]{0,2}(?:"""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$))/y, cls: "string" },
      { re: /[rRbBuUfF]{0,2}(?:"(?:[^"\\\n]|\\[\s\S])*"?|'(?:[^'\\\n]|\\[\s\S])*'?)/y, cls: "string" },
      { re: /@[\w.]+/y, cls: "meta", lineStart: true },
    ],
    keywords: words("and as assert async await break class continue def del elif else except finally for from "
      + "global if import in is lambda match case nonlocal not or pass raise return try while with yield"),
    literals: words("True False None"),
    builtins: words("self cls print len range str int float bool list dict set tuple type object isinstance "
      + "super open enumerate zip map filter sorted min max sum any all repr abs iter next Exception ValueError"),
    titleAfter: words("def class"),
  },
  js: {
    rules: JS_RULES,
    keywords: words(JS_KEYWORDS),
    literals: words("true false null undefined NaN Infinity"),
    builtins: words(JS_BUILTINS),
    titleAfter: words("function class"),
  },
  ts: {
    rules: JS_RULES,
    keywords: words(JS_KEYWORDS + TS_KEYWORDS),
    literals: words("true false null undefined NaN Infinity"),
    builtins: words(JS_BUILTINS + TS_BUILTINS),
    titleAfter: words("function class interface type enum"),
  },
  json: {
    rules: [
      { re: LINE_COMMENT.slashes, cls: "comment" },
      { re: BLOCK_COMMENT, cls: "comment" },
      { re: DQ_LINE, cls: keyOrString },
    ],
    literals: words("true false null"),
  },
  bash: {
    rules: [
      { re: LINE_COMMENT.hash, cls: "comment", test: afterSpace },
      { re: /'[^']*'?/y, cls: "string" },
      { re: DQ_MULTI, cls: "string" },
      { re: /\$(?:\{[^}\n]*\}?|[A-Za-z_]\w*|[0-9@#?$!*-])/y, cls: "variable" },
    ],
    word: /[A-Za-z_][\w-]*/y,
    keywords: words("if then else elif fi for in do done case esac while until function return select time "
      + "break continue local export readonly declare unset shift exit"),
    builtins: words("echo printf cd pwd source alias test read set eval exec trap wait kill true false sudo"),
    titleAfter: words("function"),
  },
  yaml: {
    rules: [
      { re: LINE_COMMENT.hash, cls: "comment", test: afterSpace },
      { re: /(?:---|\.\.\.)(?=\s|$)/y, cls: "meta", lineStart: true },
      { re: /-[ \t]+/y, cls: null, lineStart: true, keepLineStart: true },
      { re: /[^\s#:'"\-{}[\],&*!|>][^:\n#]*?(?=:(?:\s|$))/y, cls: "property", lineStart: true },
      { re: DQ_LINE, cls: keyOrString },
      { re: /'(?:[^'\n]|'')*'?/y, cls: keyOrString },
      { re: /[&*][\w-]+/y, cls: "variable" },
      { re: /![\w!/.-]*/y, cls: "meta" },
    ],
    word: /[A-Za-z_~][\w.-]*/y,
    literals: words("true false yes no on off null True False Yes No On Off Null TRUE FALSE NULL ~"),
  },
  sql: {
    rules: [
      { re: LINE_COMMENT.dashes, cls: "comment" },
      { re: BLOCK_COMMENT, cls: "comment" },
      { re: /'(?:[^']|'')*'?/y, cls: "string" },
    ],
    keywords: words(SQL_KEYWORDS),
    literals: words("null true false"),
    builtins: words(SQL_TYPES),
    caseless: true,
  },
  diff: {
    rules: [
      { re: /(?:@@|diff |index |\+\+\+ |--- )[^\n]*/y, cls: "meta", lineStart: true },
      { re: /\+[^\n]*/y, cls: "inserted", lineStart: true },
      { re: /-[^\n]*/y, cls: "deleted", lineStart: true },
    ],
    word: /[^\s]+/y, // a diff's body is not tokenized, only its line markers
  },
  generic: {
    rules: [
      { re: LINE_COMMENT.slashes, cls: "comment" },
      { re: BLOCK_COMMENT, cls: "comment" },
      { re: LINE_COMMENT.hash, cls: "comment", test: afterSpace },
      { re: DQ_LINE, cls: "string" },
      { re: SQ_LINE, cls: "string" },
      { re: BACKTICK, cls: "string" },
    ],
    keywords: words("if else elif for foreach while do loop return break continue switch case match default "
      + "function func fn def class struct enum trait impl interface type let var val const mut pub static "
      + "import from use package module namespace export public private protected new try catch finally "
      + "throw raise async await yield go defer select where in"),
    literals: words("true false null nil none None True False undefined"),
    titleAfter: words("fn func function def class struct enum trait interface"),
  },
};

const ALIASES = {
  python: "python", py: "python", python3: "python", py3: "python", gyp: "python",
  javascript: "js", js: "js", jsx: "js", mjs: "js", cjs: "js", node: "js",
  typescript: "ts", ts: "ts", tsx: "ts", mts: "ts", cts: "ts",
  json: "json", jsonc: "json", json5: "json", jsonl: "json",
  bash: "bash", sh: "bash", shell: "bash", zsh: "bash", ksh: "bash", console: "bash", shellsession: "bash",
  yaml: "yaml", yml: "yaml",
  sql: "sql", psql: "sql", mysql: "sql", sqlite: "sql", postgresql: "sql", postgres: "sql", plpgsql: "sql",
  diff: "diff", patch: "diff",
  text: null, txt: null, plain: null, plaintext: null, output: null,
};

/** The grammar's name for a fence's language tag: null for none (plain), "generic" for unknown tags. */
export function grammarName(lang) {
  if (!lang) return null;
  const key = lang.toLowerCase();
  return key in ALIASES ? ALIASES[key] : "generic";
}

function wordClass(grammar, word, previous) {
  if (previous && grammar.titleAfter?.has(previous)) return "title";
  const key = grammar.caseless ? word.toLowerCase() : word;
  if (grammar.keywords?.has(key)) return "keyword";
  if (grammar.literals?.has(key)) return "literal";
  if (grammar.builtins?.has(key)) return "builtin";
  return null;
}

function matchRule(grammar, code, i, lineStart) {
  for (const rule of grammar.rules) {
    if (rule.lineStart && !lineStart) continue;
    if (rule.test && !rule.test(code, i)) continue;
    rule.re.lastIndex = i;
    const m = rule.re.exec(code);
    if (m && m[0]) return [rule, m[0]];
  }
  return null;
}

/** The code as [class or null, text] pairs whose texts join to exactly ``code``. */
export function tokenize(name, code) {
  const grammar = GRAMMARS[name];
  const word = grammar.word || WORD;
  const out = [];
  const push = (cls, text) => {
    const last = out[out.length - 1];
    if (!cls && last && !last[0]) last[1] += text;
    else out.push([cls, text]);
  };
  let i = 0;
  let lineStart = true;
  let previous = null; // the word before, for a title (def NAME)
  while (i < code.length) {
    SPACE.lastIndex = i;
    const space = SPACE.exec(code);
    if (space) {
      push(null, space[0]);
      if (space[0].includes("\n")) lineStart = true;
      i += space[0].length;
      continue;
    }
    const hit = matchRule(grammar, code, i, lineStart);
    if (hit) {
      const [rule, text] = hit;
      push(typeof rule.cls === "function" ? rule.cls(code, i + text.length) : rule.cls, text);
      lineStart = Boolean(rule.keepLineStart) || text.endsWith("\n");
      previous = null;
      i += text.length;
      continue;
    }
    word.lastIndex = i;
    const w = word.exec(code);
    if (w) {
      push(wordClass(grammar, w[0], previous), w[0]);
      previous = w[0];
      i += w[0].length;
    } else {
      NUMBER.lastIndex = i;
      const n = /\d/.test(code[i]) ? NUMBER.exec(code) : null;
      const text = n ? n[0] : code[i];
      push(n ? "number" : null, text);
      previous = null;
      i += text.length;
    }
    lineStart = false;
  }
  return out;
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
  const nodes = tokenize(name, code.slice(0, cut)).map(([cls, text]) => {
    if (!cls) return document.createTextNode(text);
    const span = document.createElement("span");
    span.className = "tok-" + cls;
    span.textContent = text;
    return span;
  });
  if (cut < code.length) nodes.push(document.createTextNode(code.slice(cut)));
  return nodes;
}
