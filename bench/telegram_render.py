#!/usr/bin/env python
"""Telegram's Markdown-to-HTML rendering against its floor (issue 33).

Every send and every preview edit of a Telegram reply renders the text so far
(``chatgate.platforms.telegram.render.markdown_to_html``), so a long streamed answer
is rendered many times. The floor is ``html.escape`` of the same text: what any sender
in Telegram's HTML mode pays to show text at all.

Texts: the one-line answer of ``telegram.py``'s fake model, a 1,500- and a 4,000-character
answer with the Markdown a model writes (bold, italics, code spans, a link, a fenced block,
and a literal ``*`` and ``snake_case``), and a 4,000-character line of nothing but code
spans (a list of file names: an atom every 14 characters). For each: the median over
``--rounds`` of the microseconds one render takes (``--reps`` renders a round), the
floor's, and their ratio. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import html
import json
import statistics
import time
from collections.abc import Callable

from chatgate.platforms.telegram.render import markdown_to_html

PARAGRAPH = (
    "Here is **how** it works: the gateway keeps each `session` in its own row, and a reply "
    "is _streamed_ as edits. See [the docs](https://example.org/docs?a=1&b=2) for more; "
    "2 * 3 < 7 & snake_case_names stay literal.\n"
)
CODE = "\n```python\nfor row in rows:\n    print(row)  # a < b\n```\n"


def texts() -> dict[str, str]:
    return {
        "one_line_reply": "Sure: here is a short answer from the model.",
        "answer_1500_chars": (PARAGRAPH * 8)[:1460] + CODE,
        "answer_4000_chars": (PARAGRAPH * 20)[:3950] + CODE,
        "code_spans_4000_chars": ("`src/app.py`, " * 300)[:4000],
    }


def per_call_us(render: Callable[[str], str], text: str, reps: int, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(reps):
            render(text)
        samples.append((time.perf_counter() - started) / reps * 1e6)
    return round(statistics.median(samples), 2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--reps", type=int, default=200, help="renders a round (ten times as many for one line)")
    p.add_argument("--quick", action="store_true", help="a smoke run")
    args = p.parse_args()
    if args.quick:
        args.rounds, args.reps = 3, 5
    figures = {}
    for name, text in texts().items():
        reps = args.reps * 10 if len(text) < 100 else args.reps
        ours = per_call_us(markdown_to_html, text, reps, args.rounds)
        floor = per_call_us(lambda t: html.escape(t, quote=False), text, reps, args.rounds)
        figures[name] = {
            "chars": len(text),
            "render_us": ours,
            "floor_escape_us": floor,
            "ratio": round(ours / floor, 1) if floor else None,
        }
    print(json.dumps({"rounds": args.rounds, "reps": args.reps, "texts": figures}, indent=2))


if __name__ == "__main__":
    main()
