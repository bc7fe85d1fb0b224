"""Dangerous shell commands: rules as data, matched against normalized views of a command.

A tool call waits for a human when any rule's regex is found in one of the command's
*views* (docs/approvals-rules.md). The views undo the quoting tricks and peel the
wrappers a shell would, so ``r''m -rf``, ``/bin/rm -rf`` and ``env rm -rf`` all look like
``rm -rf``. Pure: no I/O, no environment, no filesystem; a parse failure adds views, it
never removes any, so a command the parser does not understand is never "safe" for that.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Literal

import msgspec

from chatgate.domain.shell.allow import DEFAULT_ALLOW, AllowList
from chatgate.domain.shell.proof import prove
from chatgate.domain.shell.views import SAFE_DEV as _SAFE_DEV
from chatgate.domain.shell.views import command_views

Tier = Literal["once", "session", "always", "deny"]
MaxTier = Literal["session", "always"]
ALL_TIERS: tuple[Tier, ...] = ("once", "session", "always", "deny")
SESSION_TIERS: tuple[Tier, ...] = ("once", "session", "deny")
ONCE_TIERS: tuple[Tier, ...] = ("once", "deny")
UNPROVEN_KEY = "unproven"

_KEY_RE = re.compile(r"[a-z][a-z0-9_]{0,63}")


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


class DangerRule(msgspec.Struct, frozen=True):
    """One kind of danger: ``pattern`` is searched in every view of a command.

    ``max_tier`` is the longest an approval of this rule may be remembered: ``"always"``
    (persisted by ``key``) or at most ``"session"``.
    """

    key: str
    description: str
    pattern: str
    max_tier: MaxTier

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not _KEY_RE.fullmatch(self.key):
            raise ValueError(f"danger rule key {self.key!r} must match [a-z][a-z0-9_]* (at most 64 chars)")
        if not isinstance(self.description, str):
            raise ValueError(f"danger rule {self.key!r}: description must be a string")
        if self.max_tier not in ("session", "always"):
            raise ValueError(f"danger rule {self.key!r}: max_tier must be 'session' or 'always'")
        if not isinstance(self.pattern, str) or not self.pattern:
            raise ValueError(f"danger rule {self.key!r}: pattern must be a non-empty string")
        try:
            compiled = _compiled(self.pattern)
        except re.error as exc:
            raise ValueError(f"danger rule {self.key!r}: invalid regex {self.pattern!r}: {exc}") from None
        if compiled.search(""):
            raise ValueError(f"danger rule {self.key!r}: pattern matches the empty string, so every command")


class Assessment(msgspec.Struct, frozen=True):
    """What :func:`assess` found; the approval prompt is built from this.

    ``unproven`` holds why the command could not be proven safe (empty: proven). A
    command runs without a prompt only when it is proven and matches no rule.
    """

    matched: tuple[DangerRule, ...]
    unproven: tuple[str, ...] = ()

    @property
    def dangerous(self) -> bool:
        return bool(self.matched or self.unproven)

    @property
    def keys(self) -> tuple[str, ...]:
        keys = tuple(rule.key for rule in self.matched)
        return (*keys, UNPROVEN_KEY) if self.unproven else keys

    @property
    def explained(self) -> tuple[DangerRule, ...]:
        """The matched rules, then one naming why the command could not be proven safe."""
        if not self.unproven:
            return self.matched
        why = "cannot be proven safe: " + "; ".join(self.unproven)
        return (*self.matched, DangerRule(UNPROVEN_KEY, why, r"^analysis:unproven$", "session"))

    @property
    def offered_tiers(self) -> tuple[Tier, ...]:
        """() when no approval is needed; "always" only if every matched rule allows it;
        only "once" for a command that could not be analysed (nothing to remember it by)."""
        if not self.dangerous:
            return ()
        if self.unproven:
            return ONCE_TIERS
        if all(rule.max_tier == "always" for rule in self.matched):
            return ALL_TIERS
        return SESSION_TIERS


# Git global options that may precede the subcommand (an option's argument never starts with "-").
_GIT = r"^git(?: (?:-[Cc] [^-\s]\S*|--(?:git-dir|work-tree|namespace|exec-path|config-env) [^-\s]\S*|-\S+))*"
_SHELL_NAMES = r"(?:sh|bash|zsh|dash|ksh|mksh|ash|fish)"

BUILTIN_RULES: tuple[DangerRule, ...] = (
    DangerRule(
        "recursive_delete",
        "deletes files recursively (rm -r, find -delete, find -exec rm)",
        r"^rm(?: \S+)* (?:-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)(?: |$)"
        r"|^find(?: \S+)* -delete(?: |$)"
        r"|^find(?: \S+)* -(?:exec|execdir|ok|okdir) (?:\S*/)?(?:rm|rmdir|unlink|shred)(?: |$)",
        "always",
    ),
    DangerRule(
        "sudo",
        "runs as another user (sudo, doas, su, pkexec)",
        r"^(?:sudo|sudoedit|doas|pkexec|run0|su|runuser)(?: |$)",
        "session",
    ),
    DangerRule(
        "pipe_to_shell",
        "runs a downloaded or decoded script (curl ... | sh, bash <(curl ...))",
        r"(?m)^(?:\| )?(?:curl|wget|fetch|aria2c|base64|xxd)(?: .*)?\n(?:.*\n)*?\| (?:"
        + _SHELL_NAMES
        + r"(?: |$)|(?:python[0-9.]*|perl|ruby|node|php)(?: -[a-zA-Z]+)*(?: -)?$)"
        r"|^(?:" + _SHELL_NAMES + r"|source|\.|eval|python[0-9.]*|perl|ruby|node|php)(?: \S+)*? "
        r"[<$]\((?:curl|wget|fetch|aria2c)(?: |\))",
        "session",
    ),
    DangerRule(
        "chmod_world_writable",
        "makes files world-writable recursively (chmod -R 777, chmod -R a+rwx)",
        r"^chmod(?=(?: \S+)* (?:-[a-zA-Z]*R[a-zA-Z]*|--recursive)(?: |$))"
        r"(?=(?: \S+)* (?:[0-7]?[0-7]{2}[2367]|(?:[^ ,]*,)*[ugoa]*[ao][ugoa]*[+=][rwxXst]*w\S*)(?: |$))",
        "session",
    ),
    DangerRule(
        "disk_write",
        "writes a disk device or a file system (dd of=/dev/..., mkfs, wipefs, > /dev/sda)",
        r"^dd(?: \S+)* of=/dev/(?!" + _SAFE_DEV + r"(?: |$)|fd/|shm/|pts/)"
        r"|^(?:mkfs(?:\.\S+)?|mke2fs|mkswap|mkdosfs|mkntfs|wipefs|blkdiscard|sfdisk|sgdisk)(?: |$)"
        r"|^(?:fdisk|gdisk|cfdisk|parted)(?! (?:-l|--list)(?: |$))(?: |$)"
        r"|^shred(?: \S+)* /dev/"
        r"|^write:/dev/(?!" + _SAFE_DEV + r"$|fd/|shm/|pts/)",
        "session",
    ),
    DangerRule(
        "force_push",
        "force-pushes or mirrors git refs (git push --force, -f, --force-with-lease, +ref)",
        _GIT + r" push(?: \S+)* (?:--force|--force-with-lease(?:=\S*)?|--force-if-includes|--mirror"
        r"|-[a-zA-Z]*f[a-zA-Z]*|\+\S+)(?: |$)",
        "always",
    ),
    DangerRule(
        "git_history_rewrite",
        "discards git work or history (reset --hard, clean -f, filter-branch, branch -D, ...)",
        _GIT + r" (?:reset(?: \S+)* --hard|clean(?: \S+)* (?:-[a-zA-Z]*f[a-zA-Z]*|--force)"
        r"|filter-branch|filter-repo|reflog (?:expire|delete)|stash (?:clear|drop)"
        r"|branch(?: \S+)* -[a-zA-Z]*D[a-zA-Z]*|checkout(?: \S+)* (?:-f|--force)"
        r"|update-ref(?: \S+)* -d)(?: |$)",
        "always",
    ),
    DangerRule(
        "fork_bomb",
        "a fork bomb (:(){ :|:& };: and friends)",
        r"([^;&|(){}]{1,64})\(\)\{\1\|\1&|function([^;&|(){}]{1,64}?)(?:\(\))?\{\2\|\2&"
        r"|forkwhilefork|while(?:True|true|1|\(1\)):?\{?(?:os\.)?fork\(\)",
        "session",
    ),
    DangerRule(
        "shutdown_reboot",
        "shuts down or reboots the machine",
        r"^(?:shutdown|reboot|halt|poweroff|kexec)(?: |$)"
        r"|^(?:systemctl|loginctl)(?: \S+)* (?:poweroff|reboot|halt|kexec|soft-reboot|suspend|hibernate"
        r"|hybrid-sleep|suspend-then-hibernate|rescue|emergency)(?: |$)"
        r"|^(?:init|telinit) [06](?: |$)",
        "session",
    ),
    DangerRule(
        "kill_all",
        "kills every process or every process of a name (kill -9 -1, pkill -9, killall -9)",
        r"^kill(?: \S+)+ -1(?: |$)"
        r"|^(?:pkill|killall)(?: \S+)* (?i:-9|-kill|-sigkill|-s (?:9|kill|sigkill)"
        r"|--signal[= ](?:9|kill|sigkill))(?: |$)"
        r"|^killall5(?: |$)",
        "session",
    ),
    DangerRule(
        "outside_workdir_write",
        "writes, moves or deletes a path outside the working directory",
        r"^write-outside:",
        "session",
    ),
    DangerRule(
        "nesting_too_deep",
        "nests sh -c, eval or substitutions deeper than the checker follows, so what runs is unknown",
        r"^analysis:nesting-too-deep$",
        "session",
    ),
)

_RULE_FIELDS = frozenset({"key", "description", "pattern", "max_tier"})


def load_rules(config_list: Iterable[Mapping[str, Any]] | None) -> tuple[DangerRule, ...]:
    """Build extra rules from config dicts ``{key, description, pattern, max_tier}``.

    ``key`` and ``pattern`` are required; ``description`` defaults to a generic text and
    ``max_tier`` to ``"session"``. Raises ValueError naming the bad entry and key.
    """
    if config_list is None:
        return ()
    if isinstance(config_list, (str, bytes, Mapping)):
        raise ValueError("approvals.rules must be a list of {key, description, pattern, max_tier} mappings")
    taken = {rule.key for rule in BUILTIN_RULES} | {UNPROVEN_KEY}
    rules: list[DangerRule] = []
    for index, item in enumerate(config_list):
        where = f"approvals.rules[{index}]"
        if not isinstance(item, Mapping):
            raise ValueError(f"{where}: expected a mapping with key and pattern, got {type(item).__name__}")
        key = item.get("key")
        if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
            raise ValueError(f"{where}: key {key!r} must match [a-z][a-z0-9_]* (at most 64 chars)")
        unknown = sorted(str(field) for field in item if field not in _RULE_FIELDS)
        if unknown:
            raise ValueError(f"{where} (key {key!r}): unknown field(s) {', '.join(unknown)}")
        if key in taken:
            raise ValueError(f"{where}: key {key!r} is already used by a built-in or an earlier rule")
        if "pattern" not in item:
            raise ValueError(f"{where} (key {key!r}): pattern is required")
        try:
            rule = DangerRule(
                key=key,
                description=item.get("description", f"matches the custom rule {key}"),
                pattern=item["pattern"],
                max_tier=item.get("max_tier", "session"),
            )
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        taken.add(key)
        rules.append(rule)
    return tuple(rules)


def assess(
    command: str,
    workdir: str,
    extra_rules: Sequence[DangerRule] = (),
    allow: AllowList = DEFAULT_ALLOW,
) -> Assessment:
    """Prove ``command`` (run by ``/bin/sh -c`` in the absolute ``workdir``) safe against the
    allow-list, and match it against the rules, which explain what it does."""
    found = views(command, workdir)
    proof = prove(command, workdir, allow)
    found = (*found, *proof.views)
    matched = tuple(
        rule
        for rule in (*BUILTIN_RULES, *extra_rules)
        if any(_compiled(rule.pattern).search(view) for view in found)
    )
    return Assessment(matched, proof.reasons)


def views(command: str, workdir: str) -> tuple[str, ...]:
    """Every normalized view of ``command`` that rules are searched in (see the rules doc)."""
    return command_views(command, workdir)
