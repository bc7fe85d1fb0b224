"""Syntax highlighting of code blocks (static/highlight.js, its worker highlight-worker.js), loaded
as a module in a real Chromium; each check waits for the worker's answers (``md.settled()``).

Code from a model is untrusted: its tokens must become text nodes inside plain class spans, the
code's text must survive exactly (the copy button copies it), the work must stay bounded on
hostile input, and the colours must stay readable in both themes.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from support.browser import BrowserSession, browser, open_chat
from support.web_harness import StartGateway

pytestmark = pytest.mark.browser
__all__ = ["browser"]

LANGS = ["python", "js", "ts", "json", "bash", "yaml", "sql", "diff", "rust"]
TOKEN_CLASSES = {
    "keyword", "string", "comment", "number", "literal", "builtin", "title",
    "property", "variable", "meta", "inserted", "deleted",
}  # fmt: skip

CODE_TOKENS = """async (cases) => {
  const md = await import('/static/markdown.js');
  const boxes = cases.map(([lang, code]) => {
    const box = document.createElement('div');
    box.append(md.render('```' + lang + '\\n' + code + '\\n```'));
    return box;
  });
  await md.settled();
  return boxes.map((box) => {
    const spans = [...box.querySelectorAll('code span')];
    return spans.map((s) => s.className.replace('tok-', '') + '|' + s.textContent);
  });
}"""

# Tokens highlight.js (vendor/highlight/) must class in each language, as class|text; it classes
# more than these (its grammars are finer), and its choices may shift a little between versions.
CASES = [
    (
        "python",
        'import os\n@cache\ndef area(r: float) -> float:\n    """Area."""\n    return 3.14 * r  # pi\n',
        {"keyword|import", "meta|@cache", "keyword|def", "title|area", "builtin|float", 'string|"""Area."""',
         "keyword|return", "number|3.14", "comment|# pi"},
    ),
    ("py", "x = f'{a}' if b else None", {"keyword|if", "keyword|else", "literal|None"}),
    (
        "js",
        "const x = await fetch(`/api/${id}`); // go\nfunction f(a) { return a ?? null; }",
        {"keyword|const", "keyword|await", "comment|// go", "keyword|function", "title|f", "keyword|return",
         "literal|null"},
    ),
    (
        "ts",
        "interface User { name: string; age?: number }\nexport type Id = string | 42;",
        {"keyword|interface", "title|User", "builtin|string", "builtin|number", "keyword|export",
         "number|42"},
    ),
    (
        "json",
        '{"name": "chatgate", "ok": true, "n": [1, 2.5e3, null]}',
        {'property|"name"', 'string|"chatgate"', "keyword|true", "number|1", "number|2.5e3", "keyword|null"},
    ),
    (
        "bash",
        "#!/usr/bin/env bash\nfor f in *.txt; do echo \"$f\" 'raw' ${HOME}; done # end",
        {"meta|#!/usr/bin/env bash", "keyword|for", "keyword|in", "keyword|do", "builtin|echo",
         "string|'raw'", "variable|${HOME}", "keyword|done", "comment|# end"},
    ),
    (
        "yaml",
        '---\nserver:\n  port: 8765  # default\n- name: "x"\n  enabled: yes\n',
        {"meta|---", "property|server:", "property|port:", "number|8765", "comment|# default", "literal|yes"},
    ),
    (
        "sql",
        "SELECT id FROM users WHERE note = 'it''s' -- c\norder by id desc;",
        {"keyword|SELECT", "keyword|FROM", "keyword|WHERE", "string|'it", "string|''", "string|s'",
         "comment|-- c", "keyword|desc"},
    ),
    (
        "diff",
        "@@ -1 +1 @@\n-old line\n+new line\n same - x",
        {"meta|@@ -1 +1 @@", "deleted|-old line", "inserted|+new line"},
    ),
    (
        "rust",
        'fn main() { let s = "hi"; /* c */ return 0; } // end',
        {"keyword|fn", "title|main", "keyword|let", 'string|"hi"', "comment|/* c */", "keyword|return",
         "number|0", "comment|// end"},
    ),
    ("text", "def not_highlighted(): pass", set()),
]  # fmt: skip


async def _page(start_gateway: StartGateway, browser: BrowserSession) -> Any:
    gateway = await start_gateway()
    return await open_chat(browser.page, gateway.port)


async def test_each_language_classes_its_tokens(start_gateway: StartGateway, browser: BrowserSession) -> None:
    page = await _page(start_gateway, browser)
    got: list[list[str]] = await page.evaluate(CODE_TOKENS, [[lang, code] for lang, code, _ in CASES])
    missing = [(lang, want - set(have), have) for (lang, _, want), have in zip(CASES, got, strict=True)]
    missing = [m for m in missing if m[1]]
    assert not missing, "\n".join(f"{lang}: missing {sorted(w)}\n  got {g}" for lang, w, g in missing)
    assert got[-1] == []  # a language the fence does not name a known grammar for stays plain


CHECK_TOKENS = """async ([langs, codes]) => {
  const md = await import('/static/markdown.js');
  const problems = [];
  const blocks = [];
  for (const lang of langs) for (const code of codes) {
    const box = document.createElement('div');
    box.append(md.render('````' + lang + '\\n' + code + '\\n````'));
    blocks.push([lang, code, box]);
  }
  await md.settled();
  for (const [lang, code, box] of blocks) {
    const node = box.querySelector('code');
    if (node.textContent !== code) problems.push(['changed text', lang, code]);
    for (const el of node.querySelectorAll('*')) {
      const attrs = [...el.attributes].map((a) => a.name);
      if (el.tagName !== 'SPAN' || attrs.join() !== 'class' || el.children.length)
        problems.push(['bad element', lang, el.outerHTML]);
      else if (!el.className.startsWith('tok-')) problems.push(['bad class', lang, el.className]);
    }
  }
  return problems;
}"""

HOSTILE_CODE = [
    "</code></pre><script>window.__pwned = 1</script>",
    "'<img src=x onerror=\"window.__pwned = 2\">'",
    '"unclosed string\n# and <b>tags</b>',
    "/* unclosed comment <iframe src=x>",
    '"""unclosed triple\n\n<svg onload=window.__pwned=3>',
    "key: <a href='javascript:x'>",
    "`template ${'<script>'}`",
]


def _random_code(seed: int, count: int) -> list[str]:
    """Fragments of every delimiter the grammars know, in random order (the same every run)."""
    rng = random.Random(seed)
    alphabet = [*"\"'`\\/#*-+:$@{}[]()&|!<>=;.,_~ \t\n", "def", "fn", "0x1F", "3.5e2", "--", "'''"]
    alphabet += ["\u00e9", "\U0001f600", "ab", "if", "SELECT", "true"]
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 120))) for _ in range(count)]


async def test_highlighting_keeps_the_code_exactly_and_makes_only_token_spans(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    page = await _page(start_gateway, browser)
    codes = HOSTILE_CODE + _random_code(seed=17, count=150)
    problems = await page.evaluate(CHECK_TOKENS, [LANGS, codes])
    assert problems == []
    assert await page.evaluate("window.__pwned ?? null") is None


LIMITED = """async ([lang, code, twice]) => {
  const md = await import('/static/markdown.js');
  const hl = await import('/static/highlight.js');
  const fence = '```' + lang + '\\n' + code + '\\n```\\n';
  const box = document.createElement('div');
  box.append(md.render(twice ? fence + fence : fence));
  await md.settled();
  return {
    limit: hl.HIGHLIGHT_LIMIT,
    blocks: [...box.querySelectorAll('code')].map((node) => {
      const spans = [...node.querySelectorAll('span')];
      const last = spans[spans.length - 1];
      let end = 0;  // where the last span ends in the code's text
      for (const child of node.childNodes) { end += child.textContent.length; if (child === last) break; }
      return {same: node.textContent === code, spans: spans.length, highlightedTo: end,
              tail: node.lastChild.nodeType === Node.TEXT_NODE ? node.lastChild.textContent.length : 0};
    }),
  };
}"""


async def test_a_megabyte_code_block_is_highlighted_up_to_the_limit_and_shown_plain_after(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    page = await _page(start_gateway, browser)
    line = "total = compute(x, 'label', 42)  # note\n"
    code = line * (1_000_000 // len(line))
    result = await page.evaluate(LIMITED, ["python", code, False])
    limit = result["limit"]
    [block] = result["blocks"]
    assert block["same"] is True
    assert 0 < block["highlightedTo"] <= limit
    assert block["tail"] >= len(code) - limit  # the rest is one plain text node
    assert block["spans"] <= limit


async def test_the_highlight_limit_is_shared_by_the_code_blocks_of_one_message(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    page = await _page(start_gateway, browser)
    line = "let x = 1; // c\n"
    limit = await page.evaluate("import('/static/highlight.js').then((m) => m.HIGHLIGHT_LIMIT)")
    code = line * (limit * 3 // 4 // len(line))  # each block is 3/4 of the limit
    first, second = (await page.evaluate(LIMITED, ["js", code, True]))["blocks"]
    assert first["same"] and second["same"]
    assert first["highlightedTo"] > len(code) - len(line)  # all of the first
    assert 0 < second["highlightedTo"] <= limit - len(code)


RENDER_ALL = """async ([langs, inputs]) => {
  const md = await import('/static/markdown.js');
  const lossy = [];
  const blocks = [];
  for (const lang of langs) for (const [name, code] of Object.entries(inputs)) {
    const box = document.createElement('div');
    box.append(md.render('`'.repeat(4) + lang + '\\n' + code + '\\n' + '`'.repeat(4)));
    blocks.push([lang, name, code, box]);
  }
  await md.settled();
  for (const [lang, name, code, box] of blocks) {
    if (box.querySelector('code').textContent !== code) lossy.push([lang, name]);
  }
  return lossy;
}"""

# highlight.js's grammars are regexes that can scan far and fail: bench/webchat_highlight.py
# measured up to 3.5 s on one 300 kB input, and one YAML input that did not finish in 30 s. The
# page highlights at most HIGHLIGHT_LIMIT characters of a message (the rest plain): these inputs,
# each as long as the limit, must all finish (the test's time limit catches one that does not).
SIZE = 20_000


def _pathological() -> dict[str, str]:
    return {
        "backslashes after a quote": '"' + "\\" * SIZE,
        "unclosed block comments": "/*" * (SIZE // 2),
        "quotes": "'" * SIZE,
        "triple quotes": '"""' * (SIZE // 3),
        "one long word": "a" * SIZE,
        "words without a colon": "a " * (SIZE // 2),
        "a long key-like line": "a" * SIZE + ":",
        "keys": "a:\n" * (SIZE // 3),
        "dollars": "$" * SIZE,
        "digits": "1" * SIZE,
        "list markers": "- " * (SIZE // 2),
        "hashes after spaces": " #" * (SIZE // 2),
    }


async def test_pathological_input_up_to_the_limit_is_highlighted_and_stays_lossless(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    """Inputs built to make a regex scan far and fail, in every grammar, as long as the limit."""
    page = await _page(start_gateway, browser)
    assert await page.evaluate(RENDER_ALL, [LANGS, _pathological()]) == []


CONTRAST = """async (theme) => {
  const md = await import('/static/markdown.js');
  const msg = document.createElement('div');
  msg.className = 'msg bot';
  document.getElementById('log').append(msg);
  msg.append(md.render('```diff\\n@@ x\\n+a\\n-b\\n```\\n```yaml\\nk: &a yes # c\\n```\\n'
    + '```python\\n@d\\ndef f(): return print("s", 1, None)\\n```\\n```bash\\necho ${HOME}\\n```'));
  await md.settled();
  const rgb = (css) => css.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const linear = (v) => (v /= 255, v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
  const lum = (css) => {
    const [r, g, b] = rgb(css).map(linear);
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const ratio = (a, b) => {
    const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05);
  };
  const out = {};
  for (const span of msg.querySelectorAll('code span')) {
    const bg = getComputedStyle(span.closest('.codeblock')).backgroundColor;
    out[span.className] = Math.round(ratio(getComputedStyle(span).color, bg) * 100) / 100;
  }
  msg.remove();
  return out;
}"""


@pytest.mark.parametrize("theme", ["light", "dark"])
async def test_token_colours_keep_a_readable_contrast_in_both_themes(
    theme: str, start_gateway: StartGateway, browser: BrowserSession
) -> None:
    page = await _page(start_gateway, browser)
    await page.emulate_media(color_scheme=theme)
    ratios: dict[str, float] = await page.evaluate(CONTRAST, theme)
    assert {name.removeprefix("tok-") for name in ratios} == TOKEN_CLASSES
    low = {name: ratio for name, ratio in ratios.items() if ratio < 4.5}  # WCAG AA for normal text
    assert not low, f"{theme}: token colours below 4.5:1 against the code background: {low}"


SUPERSEDED = """async (code) => {
  const md = await import('/static/markdown.js');
  const slot = document.createElement('div');
  const renders = [];
  for (let n = 0; n < 40; n++) {  // a draft growing: the same element rendered again and again
    const out = md.render('```python\\n' + code + '\\n# ' + n + '\\n```', slot);
    renders.push(out.querySelector('code'));
    slot.replaceChildren(out);
  }
  await md.settled();
  return renders.map((node) => node.querySelectorAll('span').length > 0);
}"""


async def test_a_draft_rendered_again_drops_the_highlighting_its_earlier_renderings_still_wait_for(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    page = await _page(start_gateway, browser)
    highlighted: list[bool] = await page.evaluate(SUPERSEDED, "def f(x):\n    return x  # c\n" * 200)
    assert highlighted[-1] is True  # what is on screen is highlighted
    assert sum(highlighted[:-1]) <= 1  # of the earlier ones, at most the one the worker had already
