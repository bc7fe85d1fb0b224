"""The page's Markdown renderer (static/markdown.js), loaded as a module in a real Chromium.

Model text is untrusted: the renderer builds DOM nodes and must never produce markup from it,
and must link only http(s) and mailto URLs.
"""

from __future__ import annotations

from typing import Any

import pytest

from support.browser import BrowserSession, browser, open_chat
from support.web_harness import StartGateway

pytestmark = pytest.mark.browser
__all__ = ["browser"]

RENDER = """async (cases) => {
  const md = await import('/static/markdown.js');
  const hl = await import('/static/highlight.js');
  const boxes = cases.map((text) => {
    const box = document.createElement('div');
    box.append(md.render(text));
    return [box, box.innerHTML];  // as built: math is typeset later (test_webchat_math.py)
  });
  await hl.settled();  // code is highlighted by a worker: read after its answers
  return boxes.map(([box, built]) => (box.querySelector('code') ? box.innerHTML : built));
}"""

LINK = 'rel="noopener noreferrer" target="_blank"'
CASES = [
    (
        "**bold** and *it* and `co*de*`",
        "<p><strong>bold</strong> and <em>it</em> and <code>co*de*</code></p>",
    ),
    ("__b__ _i_ ~~s~~", "<p><strong>b</strong> <em>i</em> <del>s</del></p>"),
    ("snake_case_name and 2*3*4", "<p>snake_case_name and 2<em>3</em>4</p>"),
    ("line one\nline two", "<p>line one<br>line two</p>"),
    ("# Title", "<h3>Title</h3>"),
    ("> quoted **text**", "<blockquote><p>quoted <strong>text</strong></p></blockquote>"),
    ("- a\n- **b**", "<ul><li>a</li><li><strong>b</strong></li></ul>"),
    ("3. x\n4. y", '<ol start="3"><li>x</li><li>y</li></ol>'),
    # Nested and mixed lists: an item holds what is indented at least two columns past its marker.
    ("- a\n  - b\n    - c\n- d", "<ul><li>a<ul><li>b<ul><li>c</li></ul></li></ul></li><li>d</li></ul>"),
    ("1. one\n   - x\n   - y\n2. two", "<ol><li>one<ul><li>x</li><li>y</li></ul></li><li>two</li></ol>"),
    # CommonMark (markdown-it): a child needs its parent's content column, "1." has three
    ("1. one\n  - two spaces", "<ol><li>one</li></ol><ul><li>two spaces</li></ul>"),
    ("- a\n    1. four\n    2. deep", "<ul><li>a<ol><li>four</li><li>deep</li></ol></li></ul>"),
    ("* star\n+ plus\n- dash", "<ul><li>star</li></ul><ul><li>plus</li></ul><ul><li>dash</li></ul>"),
    ("- bullets\n1. then numbers", "<ul><li>bullets</li></ul><ol><li>then numbers</li></ol>"),
    ("- a\n  continued\n- b", "<ul><li>a<br>continued</li><li>b</li></ul>"),
    ("- a\n\n- b after a blank", "<ul><li><p>a</p></li><li><p>b after a blank</p></li></ul>"),  # a loose list
    ("- a\n\n  second paragraph", "<ul><li><p>a</p><p>second paragraph</p></li></ul>"),
    ("- a\n\nnot in the list", "<ul><li>a</li></ul><p>not in the list</p>"),
    ("- a\nnot indented", "<ul><li>a<br>not indented</li></ul>"),  # a lazy continuation line
    # a list starting at 3 cannot interrupt a paragraph
    ("2) x\n   3) y", '<ol start="2"><li>x<br>3) y</li></ol>'),
    ("2) x\n\n   3) y", '<ol start="2"><li><p>x</p><ol start="3"><li>y</li></ol></li></ol>'),
    (
        "1. one\n   - a\n     - deep\n       1. deeper\n2. two",
        "<ol><li>one<ul><li>a<ul><li>deep<ol><li>deeper</li></ol></li></ul></li></ul></li><li>two</li></ol>",
    ),
    ("-\ta tab", "<ul><li>a tab</li></ul>"),
    (
        "- **bold** item\n  - `code` child",
        "<ul><li><strong>bold</strong> item<ul><li><code>code</code> child</li></ul></li></ul>",
    ),
    (
        "1. run:\n   ```\n   make\n\n     indented\n   ```\n2. done",
        '<ol><li>run:<div class="codeblock"><div class="codebar"><span class="lang">text</span>'
        '<button class="copy" type="button" aria-label="Copy code">Copy</button></div>'
        "<pre><code>make\n\n  indented</code></pre></div></li><li>done</li></ol>",
    ),
    ("> - quoted\n>   - nested", "<blockquote><ul><li>quoted<ul><li>nested</li></ul></li></ul></blockquote>"),
    ("---", "<hr>"),
    (
        "```python\nprint('<b>')\n\n  x = 1\n```",
        '<div class="codeblock"><div class="codebar"><span class="lang">python</span>'
        '<button class="copy" type="button" aria-label="Copy code">Copy</button></div>'
        '<pre><code data-lang="python"><span class="tok-builtin">print</span>('
        '<span class="tok-string">\'&lt;b&gt;\'</span>)\n\n  x = <span class="tok-number">1</span>'
        "</code></pre></div>",
    ),
    (
        "```\nunclosed fence of a draft",
        '<div class="codeblock"><div class="codebar"><span class="lang">text</span>'
        '<button class="copy" type="button" aria-label="Copy code">Copy</button></div>'
        "<pre><code>unclosed fence of a draft</code></pre></div>",
    ),
    ("[site](https://example.com/a?b=1)", f'<p><a href="https://example.com/a?b=1" {LINK}>site</a></p>'),
    ("[mail](mailto:ann@example.com)", f'<p><a href="mailto:ann@example.com" {LINK}>mail</a></p>'),
    (
        "see https://example.com.",
        f'<p>see <a href="https://example.com/" {LINK}>https://example.com</a>.</p>',
    ),
    (
        "[**see** https://a.example](https://b.example/)",
        f'<p><a href="https://b.example/" {LINK}><strong>see</strong> https://a.example</a></p>',
    ),
    ("[x](javascript:alert(1))", "<p>[x](javascript:alert(1))</p>"),
    ("[x](JavaScript:alert(1))", "<p>[x](JavaScript:alert(1))</p>"),
    ("[x](data:text/html,hi)", "<p>[x](data:text/html,hi)</p>"),
    ("[x](/relative)", "<p>x</p>"),  # no link to a path of the gateway
    ("<script>alert(1)</script>", "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"),
    ('<img src=x onerror="alert(1)">', '<p>&lt;img src=x onerror="alert(1)"&gt;</p>'),
    (
        "| a | b |\n|---|:-:|\n| 1 | **2** |",
        '<div class="tablewrap"><table><thead><tr><th>a</th><th style="text-align: center;">b</th>'
        '</tr></thead><tbody><tr><td>1</td><td style="text-align: center;"><strong>2</strong></td>'
        "</tr></tbody></table></div>",
    ),
    (
        "| l | c | r | n |\n|:--|:-:|--:|---|\n| 1 | 2 | 3 | 4 |",
        '<div class="tablewrap"><table><thead><tr><th style="text-align: left;">l</th>'
        '<th style="text-align: center;">c</th><th style="text-align: right;">r</th><th>n</th></tr></thead>'
        '<tbody><tr><td style="text-align: left;">1</td><td style="text-align: center;">2</td>'
        '<td style="text-align: right;">3</td><td>4</td></tr></tbody></table></div>',
    ),
    # math is found, its TeX kept as text until KaTeX typesets it (test_webchat_math.py)
    ("area $\\pi r^2$ here", '<p>area <span class="math" data-tex="\\pi r^2">$\\pi r^2$</span> here</p>'),
    ("costs $5 and $10", "<p>costs $5 and $10</p>"),
    ("$$\na^2 + b^2\n$$", '<div class="math display" data-tex="a^2 + b^2">$$a^2 + b^2$$</div>'),
    ("`$x$` stays code", "<p><code>$x$</code> stays code</p>"),
]

HOSTILE = [
    "<script>window.__pwned = 1</script>",
    '<img src=x onerror="window.__pwned = 2">',
    "[click](javascript:window.__pwned=3)",
    "[click](  javascript:window.__pwned=4)",
    "[click](java\tscript:window.__pwned=5)",
    '<a href="javascript:window.__pwned=6">x</a>',
    '<iframe src="https://example.com"></iframe>',
    "**<svg onload=window.__pwned=7>**",
    "```\n</code></pre><script>window.__pwned=8</script>\n```",
    "| <b onclick=x> | b |\n|---|---|\n| <script>x</script> | 2 |",
    '<https://example.com/" onmouseover="window.__pwned=9>',
]

CHECK_HOSTILE = """async (cases) => {
  const md = await import('/static/markdown.js');
  const box = document.createElement('div');
  document.body.append(box);
  for (const text of cases) box.append(md.render(text));
  const bad = [...box.querySelectorAll('*')].filter((el) =>
    !['P', 'BR', 'STRONG', 'EM', 'DEL', 'CODE', 'PRE', 'DIV', 'SPAN', 'BUTTON', 'A', 'TABLE', 'THEAD',
      'TBODY', 'TR', 'TH', 'TD', 'UL', 'OL', 'LI', 'BLOCKQUOTE', 'H3', 'HR'].includes(el.tagName)
    || [...el.attributes].some((a) => a.name.startsWith('on')));
  const links = [...box.querySelectorAll('a')].map((a) => new URL(a.href).protocol);
  await new Promise((resolve) => setTimeout(resolve, 50));
  return {bad: bad.map((el) => el.outerHTML), links, pwned: window.__pwned ?? null};
}"""


async def test_renderer_builds_the_expected_nodes_for_each_construct(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    gateway = await start_gateway()
    page = await open_chat(browser.page, gateway.port)
    rendered: list[str] = await page.evaluate(RENDER, [text for text, _ in CASES])
    mismatches = [(text, want, got) for (text, want), got in zip(CASES, rendered, strict=True) if got != want]
    assert not mismatches, "\n".join(f"{t!r}\n  want {w}\n  got  {g}" for t, w, g in mismatches)


async def test_renderer_never_makes_markup_or_script_links_from_hostile_text(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    gateway = await start_gateway()
    page = await open_chat(browser.page, gateway.port)
    result: dict[str, Any] = await page.evaluate(CHECK_HOSTILE, HOSTILE)
    assert result["bad"] == []
    assert set(result["links"]) <= {"https:"}, result["links"]
    assert result["pwned"] is None


DEEP = """async (cases) => {
  const md = await import('/static/markdown.js');
  const letters = (text) => text.replace(/[^a-z]/g, '');
  return cases.map((text) => {
    const box = document.createElement('div');
    box.append(md.render(text));
    let depth = 0;
    const nested = 'ul, ol, blockquote';
    for (let node = box.querySelector(nested); node; node = node.querySelector(nested)) depth += 1;
    return {depth, sameLetters: letters(box.textContent) === letters(text)};
  });
}"""


async def test_hostile_nesting_is_cut_at_a_bounded_depth_and_keeps_its_text(
    start_gateway: StartGateway, browser: BrowserSession
) -> None:
    """A line of 100k '>' (or of '- ') used to recurse once per level, past the stack's end."""
    gateway = await start_gateway()
    page = await open_chat(browser.page, gateway.port)
    cases = [
        ">" * 100_000 + " deep",
        "\n".join("  " * n + "- level" for n in range(1_000)),  # 1 MB of indentation
        "- " * 50_000 + "x",
    ]
    results = await page.evaluate(DEEP, cases)
    # nested at most 8 deep; what is no longer nested is shown as text, every letter still there
    assert results == [{"depth": 8, "sameLetters": True}] * 3
