"""The built-in allow-list, as config-shaped data (docs/approvals.md lists it).

Read-only programs, and programs confined to the work directory by their operands.
Options that make a program run another program (``find -exec``, ``sort
--compress-program``, ``git -c``), follow a path given elsewhere, or reach the network
are deliberately absent: the check refuses an option it does not know.

No program here runs code or configuration found in the work directory (audited line by
line in docs/approvals.md, "Programs that are never proven safe"); such programs are in
``code_runners`` and always ask. ``git`` is the one exception made safe by the runner: it runs
every ``git`` with the programs its configuration names turned off (hooks, fsmonitor,
filters, diff drivers, pager, editor, ssh, ``ext::``; ``agents/tools/git_guard.py``).
Subcommands or options that would still run one ask: ``status -v`` and ``commit -v`` show a
diff through the repository's textconv drivers and take no ``--no-textconv``.
"""

from __future__ import annotations

from typing import Any


def _opts(flags: str = "", text: str = "", paths: str = "") -> list[str]:
    return [*flags.split(), *(f"{o} TEXT" for o in text.split()), *(f"{o} PATH" for o in paths.split())]


def _entry(flags: str = "", text: str = "", paths: str = "", **more: Any) -> dict[str, Any]:
    return {"options": _opts(flags, text, paths), **more}


_LS_FLAGS = " ".join(f"-{c}" for c in "aAbBcCdfFgGhHiklLmnNopqQrRsStuUvxX1Z") + (
    " --all --almost-all --human-readable --recursive --reverse --directory --classify --inode"
    " --size --color --no-group --numeric-uid-gid"
)
_GREP_FLAGS = " ".join(f"-{c}" for c in "rRniIlLcvwxEFGoOhHsqaz") + (
    " --recursive --line-number --ignore-case --files-with-matches --files-without-match --count"
    " --invert-match --word-regexp --line-regexp --extended-regexp --fixed-strings --only-matching"
    " --no-filename --with-filename --no-messages --quiet --silent --color"
)
_GREP_TEXT = "-e -A -B -C -m --regexp --after-context --before-context --context --max-count --include"
_GREP_TEXT += " --exclude --exclude-dir --color"
_GIT_LOG = (
    "--oneline --stat --shortstat --name-only --name-status --graph --all --decorate --reverse"
    " --no-merges --merges --first-parent -p --patch -s --no-patch --abbrev-commit --follow -NUM"
)
_GIT_LOG_TEXT = "-n --max-count --format --pretty --since --until --author --grep --date --skip"
_GIT_DIFF = (
    "--stat --shortstat --numstat --name-only --name-status --cached --staged --no-color --color"
    " --word-diff -w -b --ignore-all-space --ignore-space-change --exit-code --quiet --patience"
    " --minimal --no-ext-diff --no-textconv --check -R"
)

_GIT: dict[str, Any] = {
    "status": _entry("-s -b -u --short --branch --porcelain --long --untracked-files --ignored"),
    "diff": _entry(_GIT_DIFF, text="-U --unified --diff-filter"),
    "log": _entry(_GIT_LOG, text=_GIT_LOG_TEXT),
    "show": _entry(_GIT_LOG + " " + _GIT_DIFF, text="--format --pretty"),
    "blame": _entry("-w -s -e --porcelain -c", text="-L"),
    "ls-files": _entry("-m -o -d -c -s -z --modified --others --deleted --cached --stage --exclude-standard"),
    "rev-parse": _entry(
        "--show-toplevel --git-dir --is-inside-work-tree --abbrev-ref --short --verify -q --quiet",
        operands="text",
    ),
    "branch": _entry(
        "-a -r -v -l -d -D --all --remotes --verbose --list --show-current --merged --no-merged --delete"
    ),
    "add": _entry(
        "-A -u -n -v -f -N --all --update --dry-run --verbose --force --intent-to-add", writes=True
    ),
    "commit": _entry(
        "-a -q -s --all --quiet --signoff --amend --no-edit --allow-empty --no-verify",
        text="-m --message",
    ),
    "reset": _entry("-q --quiet --soft --mixed --hard"),
    "clean": _entry("-n -d -x -X -q -f --dry-run --quiet --force", writes=True),
    "restore": _entry("-S -W --staged --worktree --source", writes=True, asks=True),
    "checkout": _entry("-b -B -f --force -q --quiet --detach", writes=True, asks=True),
    "push": _entry(
        "-f -u -n -q -v --force --force-with-lease --set-upstream --dry-run --tags --all --delete",
        operands="text",
        asks=True,
    ),
    "fetch": _entry("--all --prune --tags -q -v", operands="text", asks=True),
    "pull": _entry("--rebase --ff-only --no-rebase -q -v", operands="text", asks=True),
}

DEFAULT_TABLE: dict[str, dict[str, Any]] = {
    "ls": _entry(_LS_FLAGS, text="-w -I -T --width --ignore --sort --time-style"),
    "cat": _entry("-n -b -s -A -E -T -v -e -t --number --number-nonblank --squeeze-blank --show-all"),
    "head": _entry("-q -v -z -NUM --quiet --verbose", text="-n -c --lines --bytes"),
    "tail": _entry("-q -v -z -f -F -NUM --quiet --verbose --follow", text="-n -c --lines --bytes"),
    "wc": _entry("-l -w -c -m -L --lines --words --bytes --chars --max-line-length"),
    "grep": _entry(_GREP_FLAGS, text=_GREP_TEXT, paths="-f --file"),
    "egrep": _entry(_GREP_FLAGS, text=_GREP_TEXT),
    "fgrep": _entry(_GREP_FLAGS, text=_GREP_TEXT),
    "pwd": _entry("-L -P"),
    "echo": _entry("-n -e -E", operands="text"),
    "printf": _entry(operands="text"),
    "true": _entry(operands="text"),
    "false": _entry(operands="text"),
    "test": _entry(operands="text"),
    "[": _entry(operands="text"),
    "stat": _entry("-L -f -t --dereference --terse", text="-c --format --printf"),
    "file": _entry("-b -i -L -z --brief --mime --dereference"),
    "du": _entry("-s -h -a -c -k -m -x --summarize --human-readable --all --total", text="-d --max-depth"),
    "diff": _entry(
        "-u -r -N -q -s -w -b -B -i -a --unified --recursive --new-file --brief --ignore-all-space"
        " --ignore-space-change --ignore-blank-lines --ignore-case --text --color",
        text="-U",
    ),
    "cmp": _entry("-s -l -b --silent --quiet --verbose"),
    "sort": _entry(
        "-r -n -u -f -h -V -s -z -b -d -g -M -c --reverse --numeric-sort --unique",
        text="-k -t --key --field-separator",
        paths="-o --output",
        writes=True,
    ),
    "uniq": _entry("-c -d -u -i -z --count --repeated --unique --ignore-case", text="-f -s -w", writes=True),
    "cut": _entry("-s -z --complement --only-delimited", text="-d -f -c -b --delimiter --fields"),
    "tr": _entry("-d -s -c -C --delete --squeeze-repeats --complement", operands="text"),
    "basename": _entry("-a -z --multiple", text="-s --suffix", operands="text"),
    "dirname": _entry("-z", operands="text"),
    "realpath": _entry("-e -m -s -q -z --canonicalize-existing --no-symlinks --quiet"),
    "readlink": _entry("-f -e -m -n -q -s -v -z --canonicalize"),
    "nl": _entry("-b -n -w", operands="paths"),
    "tac": _entry(),
    "rev": _entry(),
    "sha256sum": _entry("-b -t -c --check --quiet --status"),
    "sha1sum": _entry("-b -t -c --check --quiet --status"),
    "md5sum": _entry("-b -t -c --check --quiet --status"),
    "tree": _entry("-a -d -f -i -F -C -n --noreport", text="-L -I -P"),
    "seq": _entry("-w", text="-s -f", operands="text"),
    "sleep": _entry(operands="text"),
    "date": _entry("-u -R --utc --rfc-email", text="-d -I --date --iso-8601", operands="text"),
    "whoami": _entry(),
    "id": _entry("-u -g -G -n --user --group --groups --name"),
    "uname": _entry("-a -s -n -r -v -m -o --all"),
    "which": _entry("-a", operands="text"),
    "touch": _entry("-a -m -c --no-create", text="-d -t --date", paths="-r --reference", writes=True),
    "mkdir": _entry("-p -v --parents --verbose", text="-m --mode", writes=True),
    "rmdir": _entry("-p -v --parents --verbose --ignore-fail-on-non-empty", writes=True),
    "rm": _entry("-f -i -I -r -R -d -v --force --recursive --dir --verbose --preserve-root", writes=True),
    "cp": _entry(
        "-r -R -a -p -f -i -n -v -u -T -P -L --recursive --archive --force --no-clobber --verbose"
        " --update --no-target-directory",
        paths="-t --target-directory",
        writes=True,
    ),
    "mv": _entry(
        "-f -i -n -v -u -T --force --no-clobber --verbose --update --no-target-directory",
        paths="-t --target-directory",
        writes=True,
    ),
    "chmod": _entry("-R -v -c -f --recursive --verbose --changes --silent --quiet", writes=True),
    "sed": _entry(
        "-n -E -r -s -u -z -i --quiet --silent --regexp-extended --separate",
        text="-e --expression",
        writes=True,
    ),
    "find": _entry(
        "-print -print0 -empty -not -a -o -and -or -prune -readable -writable -executable -true -false"
        " -depth -ls",
        text="-name -iname -path -ipath -type -maxdepth -mindepth -size -mtime -mmin -regex -perm -user",
        paths="-newer",
    ),
    "cd": _entry("-L -P"),
    "git": {"options": ["--no-pager"], "subcommands": _GIT},
}
