"""``chatgate schedules list|pause ID|resume ID|delete ID``: the operator's view of schedules.

Like ``chatgate pairing`` it changes the store beside a running gateway through a store of
its own (``app.store_access``); the gateway's runner reads each schedule's row when it is
due, so a pause or delete takes effect at the next firing, without a restart. A ``config:``
schedule deleted here comes back at the next start while the config still names it: remove
it from the config (or pause it) instead.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

from chatgate.app.config import GatewayConfig
from chatgate.app.store_access import NoDatabaseYet, Purpose, open_store
from chatgate.domain.errors import StoreUnavailable
from chatgate.domain.schedules import Schedule, describe
from chatgate.domain.store_roles import Schedules


async def cmd_list(store: Schedules) -> int:
    return print_schedules(await store.list_schedules())


def print_schedules(rows: list[Schedule]) -> int:
    if not rows:
        print("No schedules. Add one under schedules.jobs in the config, or with /remind or /every.")
        return 0
    for schedule in rows:
        where = schedule.target.session_key or "(resolved at firing)"
        print(f"{describe(schedule)}\n    origin {schedule.origin}, fired {schedule.fired}x, session {where}")
    return 0


async def cmd_change(store: Schedules, verb: str, schedule_id: str) -> int:
    if verb == "delete":
        changed = await store.delete_schedule(schedule_id)
    else:
        changed = await store.pause_schedule(schedule_id, verb == "pause")
    return say_changed(changed, verb, schedule_id)


def say_changed(changed: bool, verb: str, schedule_id: str) -> int:
    if not changed:
        print(f"chatgate: no schedule {schedule_id!r}; `chatgate schedules list` shows them", file=sys.stderr)
        return 1
    done = {"delete": "Deleted", "pause": "Paused", "resume": "Resumed"}[verb]
    print(f"{done} schedule {schedule_id}.")
    if verb == "delete" and schedule_id.startswith("config:"):
        print("It is in the config: it comes back at the next start unless you remove it there.")
    return 0


def cmd_schedules(args: argparse.Namespace, config: GatewayConfig, state_dir: Path) -> int:
    verb = args.schedules_command
    purpose: Purpose = "read" if verb == "list" else "change"

    async def run() -> int:
        async with open_store(config, state_dir, purpose=purpose) as store:
            return await (cmd_list(store) if verb == "list" else cmd_change(store, verb, args.id))

    try:
        return asyncio.run(run())
    except NoDatabaseYet as exc:
        print(f"No database at {exc.path} yet: start the gateway (chatgate run) first.")
        return 0 if verb == "list" else 1
    except StoreUnavailable as exc:
        print(f"chatgate: {exc}", file=sys.stderr)
        return 1


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    common: Callable[[argparse.ArgumentParser], None],
    run: Callable[[argparse.Namespace], int],
) -> None:
    schedules = sub.add_parser("schedules", help="list, pause, resume or delete schedules")
    schedules.set_defaults(func=run)
    schedules_sub = schedules.add_subparsers(dest="schedules_command", required=True)
    common(schedules_sub.add_parser("list", help="every schedule with its next firing"))
    verbs = (("pause", "stop firing until resumed"), ("resume", "fire again"), ("delete", "forget"))
    for verb, text in verbs:
        parser = schedules_sub.add_parser(verb, help=f"{text}: chatgate schedules {verb} ID")
        common(parser)
        parser.add_argument("id", help="an id from `chatgate schedules list` (config:<name> for the config)")
