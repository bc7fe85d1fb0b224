"""axe-core (vendored, tests/support/vendor/axe-core) run inside the test browser's page.

The page's Content-Security-Policy forbids inline scripts, so axe is evaluated through the
browser's debugging protocol (Playwright's ``evaluate``), which the policy does not govern;
nothing is added to what the gateway serves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

AXE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
BLOCKING = ("serious", "critical")
_SOURCE: list[str] = []


async def axe_violations(page: Any) -> list[str]:
    """The page's serious and critical violations, one line each (rule, impact, targets)."""
    if not _SOURCE:
        _SOURCE.append(AXE.read_text("utf-8"))
    if not await page.evaluate("typeof window.axe !== 'undefined'"):
        await page.evaluate(_SOURCE[0] + "\n;0")
    found = await page.evaluate(
        "axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map(v => ({"
        "id: v.id, impact: v.impact, help: v.help,"
        " targets: v.nodes.map(n => n.target.join(' ')).slice(0, 5)})))"
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {v['targets']}" for v in found if v["impact"] in BLOCKING
    ]
