"""Approvals fail closed (issue 12.1): only a command the analysis proves safe runs unasked.

HOSTILE: commands that delete a tree, write outside the work directory, make files
world-writable, destroy git history or run code the check cannot see, written for this
table (not the issue's strings), by class. Each must ask a human, say why, and never
offer "always" unless the command was fully analysed. BENIGN: everyday read-only or
work-directory-confined commands that must still run unasked, so the inversion is not
"ask for everything".
"""

from __future__ import annotations

import pytest

from chatgate.domain.shell.allow import load_allow
from chatgate.domain.shell.danger import ALL_TIERS, assess
from chatgate.domain.shell.proof import prove

W = "/home/agent/project"

HOSTILE: dict[str, list[str]] = {
    "expansion": [
        "r${q}m -r -f ./src",
        'rm -r"${flag:=f}" ./src',
        "rm -${opt:-rf} ./src",
        "d=-rf; rm $d ./src",  # resolved: the rules see rm -rf
        "p=/; rm -rf $p",
        "x='-r -f'; rm $x ./src",
        "cmd=rm; $cmd -rf ./src",
        "rm -rf $HOME",
        'rm -rf "$OLDPWD"',
        "rm -rf ${TMPDIR}/../..",
        "`printf rm` -rf ./src",
        "$(printf %s rm) -rf ./src",
        "$(which rm) -rf ./src",
        "IFS=:; v=rm:-rf:./src; $v",
        'set -- -rf ./src; rm "$@"',
        "rm -rf $1",
        "rm -rf $(cat list.txt)",
        "echo $((1+1)) > /etc/cron.d/x",
        "cat <(rm -rf ./src)",
        "rm -rf ~",
        "rm -rf ~root/.ssh",
        "rm -rf ./*",
        "rm -rf .[a-z]*",
        "rm -rf {src,docs}",
        "chmod -R 7?7 .",
    ],
    "long_option_abbreviation": [
        "rm --recursiv ./src",
        "rm --rec --forc ./src",
        "chmod --recursi 0777 .",
        "chmod --rec a+rwx ./www",
        "git reset --ha HEAD~3",
        "git clean --for -d",
        "git clean -d --fo",
        "git push --forc origin main",
        "git push --force-with origin main",
        "git branch --del --forc main",
        "cp --recur ./src /etc/x",
        "sort --out=/etc/passwd data.txt",
    ],
    "deferred_or_elsewhere": [
        "trap 'rm -rf ./src' EXIT",
        "trap 'rm -rf ./src' INT TERM",
        "alias ls='rm -rf ./src'; ls",
        "sed -n '1e rm -rf ./src' notes.txt",
        "sed 's/x/y/e' notes.txt",
        "sed -n 'w /etc/profile' notes.txt",
        "sed 'r /etc/shadow' notes.txt",
        "echo 'cm0gLXJmIC4vc3Jj' | base64 -d | sh",
        "printf 'rm -rf ./src' | bash",
        "echo fr- mr | rev | sh",
        "cat script.txt | python3",
        "echo 'system(\"rm -rf ./src\")' | perl",
        "find . -name '*.py' -exec rm {} +",
        "find . -type f -execdir chmod 777 {} ;",
        "find . -delete",
        "find . -okdir rm {} ;",
        "find . -fprint /etc/x",
        "find . -print0 | xargs -0 rm -rf",
        "ls | xargs -I{} rm {}",
        "eval 'rm -rf ./src'",
        "source ./evil.sh",
        ". ./evil.sh",
        "exec rm -rf ./src",
        "command rm -rf ./src",
        "env rm -rf ./src",
        "nohup rm -rf ./src",
        "timeout 5 rm -rf ./src",
        "sh -c 'rm -rf ./src'",
        "python3 -c 'import shutil; shutil.rmtree(\"src\")'",
        "awk 'BEGIN{system(\"rm -rf ./src\")}'",
        "f() { rm -rf ./src; }; f",
        "(rm -rf ./src)",
        "sleep 1 & rm -rf ./src",
        "git -c core.pager='rm -rf ./src' log",
        "git -c alias.st='!rm -rf ./src' st",
        "echo '[core] fsmonitor = rm -rf ./src' >> .git/config",
        "cp ./hook .git/hooks/pre-commit",
        "sort -o .git/config settings.txt",
        "./build.sh",
        "/bin/rm -rf ./src",
        "pytest -q",
    ],
    "untracked_directory_change": [
        "env -C / rm -rf tmp",
        "CDPATH=/ cd etc && rm -f passwd",
        "mv -t / ./a",
        "mv --target-directory=/etc ./a",
        "cp -t /usr/local/bin ./tool",
        "cd .. && rm -rf project",
        "cd / && rm -rf tmp",
        "cd && rm -rf .ssh",
        "cd - && rm -f x",
        "cd sub/../.. && touch x",
        "pushd /etc && rm -f x",
        "git -C / clean -fdx",
        "cd $TARGET && rm -rf .",
    ],
    "outside_paths_and_redirections": [
        "cat ~/.ssh/id_rsa",
        "cat /etc/shadow",
        "echo x > /etc/motd",
        "echo x >> ../outside.txt",
        "cp ./a ../b",
        "touch /tmp/x",
        "grep -r secret /home",
        "ls /",
        "cat < /etc/passwd",
        "echo x 2> /etc/x",
        "echo x >&/etc/x",
        "cat <<EOF > x.txt",
        "rm -rf /",
        "rm -rf --no-preserve-root /",
        "chmod 777 /etc",
        "ln -s / root",
        "date 010100002030",
        "git branch -f main HEAD~3",
    ],
    "environment_and_shell_state": [
        "PATH=. ls",
        "LD_PRELOAD=./evil.so ls",
        "GIT_DIR=/ git status",
        "HOME=/ cd",
        "export PATH=.; ls",
        "unset PATH; ls",
        "set -e; rm -rf ./src",
        "shopt -s expand_aliases",
        "read x; $x",
        "false && v=rm; ${v:-rm} -rf ./src",
        "ls | v=rm; $v -rf ./src",
    ],
}
HOSTILE_CASES = [(cls, cmd) for cls, cmds in HOSTILE.items() for cmd in cmds]

BENIGN = [
    "ls",
    "ls -la",
    "ls -la src",
    "pwd",
    "cat README.md",
    "cat -n src/app.py",
    "head -n 20 src/app.py",
    "head -20 notes.txt",
    "tail -n 50 build.log",
    "wc -l src/app.py",
    "grep -rn 'TODO' src",
    "grep -rn TODO . --include='*.py'",
    "grep -c import src/app.py",
    "git status",
    "git status --short",
    "git diff",
    "git diff --stat",
    "git diff --cached src/app.py",
    "git log --oneline -n 5",
    "git log -5 --stat",
    "git show HEAD~1 --stat",
    "git branch --show-current",
    "git add src/app.py",
    "git commit -m 'fix: handle empty input'",
    "git rev-parse --show-toplevel",
    "find . -name '*.py'",
    "find src -type f -name '*.txt' -maxdepth 2",
    "mkdir -p build/out",
    "touch build/out/.keep",
    "cp src/app.py build/app.py",
    "mv notes.txt docs/notes.txt",
    "rm -f build/app.py",
    "rmdir build/out",
    "echo hello > out.txt",
    "echo done >> build.log",
    "printf '%s\\n' a b > list.txt",
    "sort -u list.txt > sorted.txt",
    "sed -n '1,20p' src/app.py",
    "sed -i 's/foo/bar/g' src/app.py",
    "sed -n '/def main/p' src/app.py",
    "diff -u a.txt b.txt",
    "du -sh src",
    "stat src/app.py",
    "sha256sum dist/pkg.tar",
    "cd src && ls",
    "cd src && grep -n main app.py",
    "ls > /dev/null 2>&1",
    "cat missing.txt 2>/dev/null || echo missing",
    "[ -f setup.py ] && echo yes",
    "test -d src && echo dir",
    "x=src; ls $x",
    'name="my file.txt"; cat "$name"',
    "tree -L 2 src",
    "date +%Y-%m-%d",
    "uname -a",
    f"cat {W}/README.md",
    "git log --format=%H -n 1",
    "wc -l src/a.py src/b.py | sort -n",
]


def reasons(command: str, *, sandboxed: bool = False) -> tuple[str, ...]:
    return assess(command, W, sandboxed=sandboxed).unproven


def test_the_hostile_table_has_at_least_sixty_commands_across_every_class() -> None:
    assert len(HOSTILE_CASES) >= 60
    assert all(len(commands) >= 10 for commands in HOSTILE.values())
    assert len({cmd for _, cmd in HOSTILE_CASES}) == len(HOSTILE_CASES)


@pytest.mark.parametrize(("cls", "command"), HOSTILE_CASES)
def test_a_hostile_command_asks_a_human_and_says_why(cls: str, command: str) -> None:
    assessment = assess(command, W)
    assert assessment.dangerous, (cls, command)
    explained = assessment.explained
    assert explained and all(rule.description for rule in explained)
    if assessment.unproven:  # could not be analysed: nothing to remember it by
        assert assessment.offered_tiers == ("once", "deny")
        assert "unproven" in assessment.keys
    else:  # fully analysed (e.g. a variable it resolved): the rules decide the tiers
        assert assessment.matched, command


@pytest.mark.parametrize("command", BENIGN)
def test_a_benign_command_still_runs_unasked(command: str) -> None:
    assessment = assess(command, W)
    assert not assessment.dangerous, (assessment.keys, assessment.unproven)
    assert assessment.offered_tiers == ()


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("cmd=x; $a", "cannot tell what `$a` holds"),
        ("rm -f${x:-r} ./t", "cannot tell what `${x:-r}` expands to"),
        ("$(echo r)m -rf ./t", "cannot tell what `$(echo r)` runs"),
        ("rm --recur ./t", "`--recur` abbreviates `--recursive`"),
        ("git reset --har", "`--har` abbreviates `--hard`"),
        ("printf x | sh", "`sh` is not on the allow-list (it runs whatever code it is given)"),
        ("trap 'x' EXIT", "`trap` is not on the allow-list (it defines code that runs later)"),
        ("mv -t /srv ./a", "`mv` names `/srv`, outside the work directory"),
        ("ls *.py", "cannot tell which files the pattern `*.py` names"),
        ("find . -exec rm {} +", "`find` option `-exec` is not one the allow-list knows"),
        ("sed '1e id' f", "the sed script `1e id`"),
        ("CDPATH=/ cd etc", "sets `CDPATH` in the environment"),
        ("echo x > .git/config", "inside .git"),
    ],
)
def test_the_reason_names_what_could_not_be_proven(command: str, said: str) -> None:
    found = reasons(command)
    assert any(said in reason for reason in found), found
    assert said in assess(command, W).explained[-1].description


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("rm --recur ./t", "recursive_delete"),
        ("chmod --recurs 777 .", "chmod_world_writable"),
        ("git reset --har", "git_history_rewrite"),
        ("git clean --forc", "git_history_rewrite"),
        ("o=r; rm -f$o ./t", "recursive_delete"),
    ],
)
def test_resolved_abbreviations_and_variables_reach_the_rules_that_explain_them(
    command: str, rule: str
) -> None:
    assert rule in assess(command, W).keys


def test_a_fully_resolved_dangerous_command_keeps_its_rules_tiers() -> None:
    assessment = assess("o=r; rm -f$o ./t", W)
    assert assessment.unproven == ()
    assert assessment.offered_tiers == ALL_TIERS


def test_always_is_never_offered_for_what_could_not_be_analysed() -> None:
    for _, command in HOSTILE_CASES:
        assessment = assess(command, W)
        assert "always" not in assessment.offered_tiers or not assessment.unproven


def test_a_cd_is_tracked_so_later_paths_are_checked_from_every_directory_it_may_lead_to() -> None:
    assert reasons("cd src && rm -f app.py") == ()
    assert reasons("cd src || true; rm -f app.py") == ()
    assert reasons(f"cd {W}/src; cat app.py") == ()
    assert reasons("cd /srv; cat app.py") != ()


def test_variables_are_known_only_after_an_unconditional_assignment() -> None:
    assert reasons("f=app.py; cat $f") == ()
    assert reasons('f="a b.txt"; cat "$f"') == ()
    assert any("split or globbed" in r for r in reasons('f="a b.txt"; cat $f'))
    assert any("only on some paths" in r for r in reasons("true && f=x; cat $f"))


def test_programs_that_run_work_directory_code_need_the_sandbox() -> None:
    assert any("tools.sandbox" in r for r in reasons("pytest -q"))
    assert reasons("pytest -q", sandboxed=True) == ()
    assert reasons("pytest -q; rm -rf /", sandboxed=True) != ()  # the sandbox does not prove the rest


def test_the_allow_list_is_extended_and_trimmed_from_config() -> None:
    allow = load_allow(
        {"make": {"options": ["-n", "-j TEXT", "-C PATH"], "needs_sandbox": False}, "rm": False}
    )
    assert prove("make -n -j 4 all", W, allow).proven
    assert not prove("make -C /etc", W, allow).proven
    assert not prove("make --jobs=4", W, allow).proven
    assert not prove("rm -f x", W, allow).proven
    assert prove("rm -f x", W, load_allow(None)).proven


@pytest.mark.parametrize(
    ("config", "where"),
    [
        ({"make": {"options": ["-n", "--bad option"]}}, "approvals.allow.make.options[1]"),
        ({"make": {"opts": []}}, "approvals.allow.make: unknown field(s) opts"),
        ({"make": {"operands": "files"}}, "approvals.allow.make.operands"),
        ({"make": {"writes": "yes"}}, "approvals.allow.make.writes"),
        ({"../bin/x": {}}, "approvals.allow.../bin/x"),
        ({"git": {"subcommands": {"gc": {"options": "-q"}}}}, "approvals.allow.git.subcommands.gc.options"),
        ({"make": ["-n"]}, "approvals.allow.make: expected a mapping"),
    ],
)
def test_a_bad_allow_entry_is_refused_naming_the_key(config: dict[str, object], where: str) -> None:
    with pytest.raises(ValueError) as caught:
        load_allow(config)
    assert where in str(caught.value)


@pytest.mark.parametrize("command", ['""', '"" ls', "'' x=1", '""=x rm -rf ./t'])
def test_an_empty_word_where_the_program_goes_asks_and_never_crashes_the_analysis(command: str) -> None:
    """Found by the Hypothesis property of test_danger.py: an empty first word used to raise."""
    proof = prove(command, W, load_allow(None))
    assert not proof.proven and proof.reasons
