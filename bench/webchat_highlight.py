#!/usr/bin/env python
"""The web chat's code highlighting in Debian's Chromium: size, load cost, and work per input.

Measures ``static/highlight.js`` ("ours": the page's adapter over the vendored highlight.js
common build in ``static/vendor/highlight/``) and, with ``--hljs DIR`` (an unpacked
``@highlightjs/cdn-assets`` npm package: ``npm pack @highlightjs/cdn-assets``), highlight.js's
minified ES core plus the same eight languages, on the same inputs: a typical reply's code,
1 MB of Python, and inputs built to make regexes scan far and fail. highlight.js gets no
character limit here (it has none); ours is measured both through ``render`` (with its limit)
and without it (since highlighting moved to a Web Worker, "ours" times only the page's call,
which posts the code to the worker). ``main_thread`` renders hostile replies through
``markdown.js`` as the page does and records the main thread's long tasks (over 50 ms,
PerformanceObserver) until the code is highlighted; with ``--before DIR`` (an older
``static/`` directory, e.g. main's) the same is measured for it in the same run, side by side.
Prints one JSON object; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import http.server
import json
import os
import statistics
import sys
import threading
from pathlib import Path
from typing import Any, ClassVar

STATIC = Path(__file__).resolve().parents[1] / "src" / "chatgate" / "platforms" / "webchat" / "static"
HLJS_LANGS = ["python", "javascript", "typescript", "json", "bash", "yaml", "sql", "diff"]
TIMEOUT_S = 30.0

TYPICAL = (
    "def release(version: str) -> None:\n"
    '    """Tag and publish."""\n'
    "    if not version:\n"
    '        raise ValueError("no version")  # refuse\n'
    '    print(f"releasing {version}", 42)\n'
) * 4


def pathological(size: int) -> dict[str, str]:
    return {
        "backslashes after a quote": '"' + "\\" * size,
        "unclosed block comments": "/*" * (size // 2),
        "quotes": "'" * size,
        "triple quotes": '"""' * (size // 3),
        "words without a colon": "a " * (size // 2),
        "keys": "a:\n" * (size // 3),
        "dollars": "$" * size,
    }


class _Files(http.server.SimpleHTTPRequestHandler):
    """/static/* from the package, /hljs/* from --hljs; JavaScript with its MIME type."""

    extensions_map: ClassVar[dict[str, str]] = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".js": "text/javascript",
    }
    hljs: ClassVar[Path | None] = None
    before: ClassVar[Path | None] = None

    def translate_path(self, path: str) -> str:
        path = path.split("?")[0]
        if path.startswith("/hljs/") and self.hljs:
            return str(self.hljs / path.removeprefix("/hljs/"))
        if path.startswith("/before/") and self.before:
            return str(self.before / path.removeprefix("/before/"))
        return str(STATIC / path.removeprefix("/static/"))

    def log_message(self, format: str, *args: Any) -> None:
        return None


def _serve(hljs: Path | None, before: Path | None = None) -> tuple[http.server.ThreadingHTTPServer, str]:
    _Files.hljs, _Files.before = hljs, before
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _sizes(paths: list[Path]) -> dict[str, int]:
    data = b"".join(p.read_bytes() for p in paths)
    return {"files": len(paths), "bytes": len(data), "gzip_bytes": len(gzip.compress(data, 9))}


OURS_IMPORT = """async (n) => {
  const t = performance.now();
  await import('/static/highlight.js?' + n);
  return performance.now() - t;
}"""
HLJS_IMPORT = """async ([n, langs]) => {
  const t = performance.now();
  const hljs = (await import('/hljs/es/core.min.js?' + n)).default;
  for (const lang of langs) {
    const module = await import('/hljs/es/languages/' + lang + '.min.js?' + n);
    hljs.registerLanguage(lang, module.default);
  }
  window.hljs = hljs;
  return performance.now() - t;
}"""
OURS_RUN = """async ([how, lang, code]) => {
  const hl = await import('/static/highlight.js');
  const t = performance.now();
  if (how === 'render') hl.highlight(lang, code);
  else hl.highlight(lang, code, {left: Infinity});
  return performance.now() - t;
}"""
HLJS_RUN = """([lang, code]) => {
  const t = performance.now();
  window.hljs.highlight(code, {language: lang === 'js' ? 'javascript' : lang, ignoreIllegals: true});
  return performance.now() - t;
}"""


LONG_TASKS = """async ([root, lang, code]) => {
  const md = await import(root + '/markdown.js');
  const seen = [];
  const watch = new PerformanceObserver((l) => { for (const e of l.getEntries()) seen.push(e.duration); });
  watch.observe({ type: 'longtask' });
  const box = document.createElement('div');
  document.body.append(box);
  const t = performance.now();
  box.append(md.render('````' + lang + '\\n' + code + '\\n````'));
  const render = performance.now() - t;
  await md.settled();
  const highlighted = performance.now() - t;
  await new Promise((r) => setTimeout(r, 100));  // the observer reports a task after it ended
  watch.disconnect();
  box.remove();
  return [render, highlighted, seen];
}"""


async def _main_thread(page: Any, base: str, root: str, size: int) -> dict[str, Any]:
    """The main thread's long tasks while the page renders hostile replies (as long as its limit)."""
    await page.goto(f"{base}{root}/index.html", wait_until="domcontentloaded")
    renders, highlighted, tasks = [], [], []
    for lang in ("python", "js", "bash", "yaml", "sql"):
        for name, code in pathological(size).items():
            print(f"main thread {root}: {lang} / {name}", file=sys.stderr)
            render, done, seen = await asyncio.wait_for(
                page.evaluate(LONG_TASKS, [root, lang, code]), TIMEOUT_S
            )
            renders.append(render)
            highlighted.append(done)
            tasks += seen
    return {
        "inputs": len(renders),
        "input_chars": size,
        "render_ms_max": round(max(renders), 1),
        "until_highlighted_ms_max": round(max(highlighted), 1),
        "long_tasks": len(tasks),
        "long_task_ms_max": round(max(tasks, default=0.0), 1),
        "long_task_ms_total": round(sum(tasks), 1),
    }


async def _timed(page: Any, script: str, arg: Any) -> float | None:
    """Milliseconds the page spent, or None when it did not finish within TIMEOUT_S (30 s)."""
    try:
        return round(float(await asyncio.wait_for(page.evaluate(script, arg), TIMEOUT_S)), 2)
    except TimeoutError:
        return None


async def _measure(page: Any, base: str, which: str, reps: int, size: int) -> dict[str, Any]:
    run = OURS_RUN if which == "ours" else HLJS_RUN
    loads = []
    for n in range(reps):
        await page.goto(f"{base}/static/index.html?{n}", wait_until="domcontentloaded")
        arg: Any = n if which == "ours" else [n, HLJS_LANGS]
        loads.append(await _timed(page, OURS_IMPORT if which == "ours" else HLJS_IMPORT, arg))

    def args(code: str, how: str = "render", lang: str = "python") -> Any:
        return [how, lang, code] if which == "ours" else [lang, code]

    typical = [await _timed(page, run, args(TYPICAL)) for _ in range(reps)]
    big = "total = compute(x, 'label', 42)  # note\n" * (1_000_000 // 40)
    out: dict[str, Any] = {
        "import_ms_p50": statistics.median(x for x in loads if x is not None),
        "typical_code_chars": len(TYPICAL),
        "typical_code_ms_p50": statistics.median(x for x in typical if x is not None),
        "one_mb_python_ms": await _timed(page, run, args(big)),
    }
    if which == "ours":
        out["one_mb_python_without_limit_ms"] = await _timed(page, run, args(big, "tokenize"))
    worst: dict[str, Any] = {}
    for lang in ("python", "js", "bash", "yaml", "sql"):
        for name, code in pathological(size).items():
            print(f"{which}: {lang} / {name}", file=sys.stderr)
            ms = await _timed(page, run, args(code, "render", lang))  # as the page does: up to its limit
            worst[f"{lang}: {name}"] = ms
            if ms is None:  # the page is stuck in a regex: start a fresh one
                context = page.context
                await page.close()
                page = await context.new_page()
                await page.goto(f"{base}/static/index.html", wait_until="domcontentloaded")
                if which == "hljs":
                    await page.evaluate(HLJS_IMPORT, [0, HLJS_LANGS])
    finished = [v for v in worst.values() if v is not None]
    out["pathological_input_chars"] = size
    out["pathological_max_ms"] = max(finished) if finished else None
    out["pathological_unfinished"] = [k for k, v in worst.items() if v is None]
    return out


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hljs", type=Path, help="an unpacked @highlightjs/cdn-assets package, to compare")
    parser.add_argument("--before", type=Path, help="an older static/ directory, measured beside this one")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--size", type=int, default=300_000, help="characters of each pathological input")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 3 reps, 20 kB inputs")
    opts = parser.parse_args()
    reps, size = (3, 20_000) if opts.quick else (opts.reps, opts.size)
    from playwright.async_api import async_playwright

    server, base = _serve(opts.hljs, opts.before)
    result: dict[str, Any] = {"load_before": os.getloadavg()[0]}
    result["ours"] = {"size": _sizes([STATIC / "highlight.js", STATIC / "vendor/highlight/highlight.min.js"])}
    if opts.hljs:
        files = [opts.hljs / "es" / "core.min.js"] + [
            opts.hljs / "es" / "languages" / f"{lang}.min.js" for lang in HLJS_LANGS
        ]
        result["hljs"] = {"size": _sizes(files)}
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        for which in ("ours", "hljs") if opts.hljs else ("ours",):
            context = await browser.new_context()
            page = await context.new_page()
            result[which].update(await _measure(page, base, which, reps, size))
        page = await (await browser.new_context()).new_page()
        limit = 20_000  # static/highlight.js HIGHLIGHT_LIMIT: what one reply can make the page highlight
        result["main_thread"] = {"now": await _main_thread(page, base, "/static", limit)}
        if opts.before:
            result["main_thread"]["before"] = await _main_thread(page, base, "/before", limit)
        await browser.close()
    server.shutdown()
    result["load_after"] = os.getloadavg()[0]
    print(json.dumps(result, indent=2))
    return 0 if not result["ours"]["pathological_unfinished"] else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
