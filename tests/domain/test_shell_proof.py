"""Approvals fail closed (issues 12.1 and 27): only a command the analysis proves safe runs unasked.

HOSTILE: commands that delete a tree, write outside the work directory, make files
world-writable, destroy git history or run code the check cannot see, written for this
table (not the issue's strings), by class. Issue 27 adds three classes: programs a
repository's configuration names (git's drivers, hooks, pager, other version control),
tools that execute the work directory's code (test runners, build tools, interpreters,
package managers), and escapes through the environment or host sockets. Each must ask a
human, say why, and never offer "always" unless the command was fully analysed. BENIGN:
everyday read-only or work-directory-confined commands that must still run unasked, so the
inversion is not "ask for everything".
"""

from __future__ import annotations

import pytest

from chatgate.domain.shell.allow import DEFAULT_ALLOW, load_allow
from chatgate.domain.shell.code_runners import CODE_RUNNERS, REASON, runs_workdir_code
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
    # issue 27: each names what it tries in HOSTILE_IDS below
    "config_driven_programs": [
        "git status -v",
        "git commit -v -m wip",
        "git -c core.fsmonitor=./x status",
        "git -c diff.external=./x diff",
        "git --config-env=core.pager=X log",
        "git -C evil status",
        "git --git-dir=evil status",
        "git --work-tree=/ status",
        "git --exec-path=./bin status",
        "git diff --ext-diff",
        "git log -p --textconv",
        "git show --show-signature",
        "git difftool HEAD~1",
        "git submodule update --init",
        "git config core.fsmonitor ./x",
        "git rebase -x ./check.sh HEAD~3",
        "git bisect run ./check.sh",
        "git status --help",
        "printf '[filter \"x\"]\\n' > inc.cfg | git status",
        "git diff | tee .git/config",
        "hg status",
        "direnv allow",
        "pre-commit run --all-files",
        "less notes.txt",
    ],
    "code_executing_tools": [
        "pytest -q -x",
        "pytest -q tests/test_app.py",
        "py.test",
        "python -m pytest",
        "python3 -m unittest discover",
        "python3.11 setup.py build",
        "tox -e py311",
        "nox -s tests",
        "make",
        "make -n all",
        "cmake -S . -B build",
        "ninja -C build",
        "cargo test",
        "go test ./...",
        "go build ./...",
        "go generate ./...",
        "npm test",
        "npm install",
        "yarn run build",
        "pnpm install",
        "npx jest",
        "pip install -e .",
        "pip install -r requirements.txt",
        "poetry install",
        "uv run pytest",
        "gradle test",
        "mvn -q test",
        "node index.js",
        "deno run main.ts",
        "bun test",
        "ruby app.rb",
        "perl Makefile.PL",
        "php artisan migrate",
        "bash build.sh",
        "sh setup.sh",
        "bundle exec rspec",
        "rake test",
        "sphinx-build docs out",
        "latexmk -pdf paper.tex",
        "just test",
    ],
    "environment_and_socket_escapes": [
        "GIT_CONFIG_GLOBAL=./evil.cfg git status",
        "GIT_EXEC_PATH=./bin git status",
        "GIT_CONFIG_COUNT=0 git status",
        "HOME=./evil git log",
        "XDG_CONFIG_HOME=. git status",
        "GIT_PAGER=./x git log",
        "unset GIT_CONFIG_COUNT; git status",
        "export GIT_CONFIG_NOSYSTEM=0",
        "env -i git status",
        "env",
        "printenv OPENAI_API_KEY",
        "cat /proc/self/environ",
        "cat /proc/1/environ",
        "psql -h /var/run/postgresql -c 'create table pwned()'",
        "psql -h /run/postgresql test",
        "socat - UNIX-CONNECT:/var/run/postgresql/.s.PGSQL.5432",
        "nc -U /run/docker.sock",
        "curl --unix-socket /var/run/docker.sock http://x/containers/json",
        "ls /run/user",
        "cat /var/run/secrets/kubernetes.io/serviceaccount/token",
        "ssh-add -l",
        "cat ../chatgate.db",
        "ls /home",
    ],
}
HOSTILE_CASES = [(cls, cmd) for cls, cmds in HOSTILE.items() for cmd in cmds]
ISSUE_27_CLASSES = ("config_driven_programs", "code_executing_tools", "environment_and_socket_escapes")
HOSTILE_IDS = {
    # config_driven_programs: what the command tries
    "git status -v": "git-status-verbose-runs-textconv",
    "git commit -v -m wip": "git-commit-verbose-runs-textconv",
    "git -c core.fsmonitor=./x status": "git-c-sets-fsmonitor",
    "git -c diff.external=./x diff": "git-c-sets-external-diff",
    "git --config-env=core.pager=X log": "git-config-env-sets-pager",
    "git -C evil status": "git-C-into-embedded-repo",
    "git --git-dir=evil status": "git-dir-names-embedded-bare-repo",
    "git --work-tree=/ status": "git-work-tree-outside",
    "git --exec-path=./bin status": "git-exec-path-in-workdir",
    "git diff --ext-diff": "git-diff-asks-for-external-driver",
    "git log -p --textconv": "git-log-asks-for-textconv",
    "git show --show-signature": "git-show-runs-gpg-program",
    "git difftool HEAD~1": "git-difftool-runs-configured-tool",
    "git submodule update --init": "git-submodule-update-command",
    "git config core.fsmonitor ./x": "git-config-writes-fsmonitor",
    "git rebase -x ./check.sh HEAD~3": "git-rebase-exec",
    "git bisect run ./check.sh": "git-bisect-run",
    "git status --help": "git-help-runs-man-viewer",
    "printf '[filter \"x\"]\\n' > inc.cfg | git status": "git-beside-a-writer-races-its-config",
    "git diff | tee .git/config": "git-diff-piped-into-its-own-config",
    "hg status": "hg-runs-hgrc-hooks",
    "direnv allow": "direnv-runs-envrc",
    "pre-commit run --all-files": "pre-commit-runs-configured-hooks",
    "less notes.txt": "less-reads-lesskey-from-home",
    # environment_and_socket_escapes
    "GIT_CONFIG_GLOBAL=./evil.cfg git status": "env-prefix-global-git-config",
    "GIT_EXEC_PATH=./bin git status": "env-prefix-git-exec-path",
    "GIT_CONFIG_COUNT=0 git status": "env-prefix-drops-git-overrides",
    "HOME=./evil git log": "env-prefix-home",
    "XDG_CONFIG_HOME=. git status": "env-prefix-xdg-config",
    "GIT_PAGER=./x git log": "env-prefix-pager",
    "unset GIT_CONFIG_COUNT; git status": "unset-git-overrides",
    "export GIT_CONFIG_NOSYSTEM=0": "export-git-setting",
    "env -i git status": "env-i-clears-the-environment",
    "env": "env-prints-the-environment",
    "printenv OPENAI_API_KEY": "printenv-a-secret",
    "cat /proc/self/environ": "proc-self-environ",
    "cat /proc/1/environ": "proc-1-environ",
    "psql -h /var/run/postgresql -c 'create table pwned()'": "psql-var-run-socket",
    "psql -h /run/postgresql test": "psql-run-socket",
    "socat - UNIX-CONNECT:/var/run/postgresql/.s.PGSQL.5432": "socat-postgres-socket",
    "nc -U /run/docker.sock": "nc-docker-socket",
    "curl --unix-socket /var/run/docker.sock http://x/containers/json": "curl-docker-socket",
    "ls /run/user": "list-user-runtime-dirs",
    "cat /var/run/secrets/kubernetes.io/serviceaccount/token": "read-service-account-token",
    "ssh-add -l": "ssh-agent-socket",
    "cat ../chatgate.db": "read-the-state-database",
    "ls /home": "list-other-homes",
}
"""Ids for the issue-27 cases that are not just a program's name (code_executing_tools use
``runs-<command>``)."""


def hostile_id(cls: str, command: str) -> str:
    if cls == "code_executing_tools":
        return "runs-" + "-".join(command.split())
    return HOSTILE_IDS.get(command, f"{cls}-{HOSTILE[cls].index(command)}")


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


def reasons(command: str) -> tuple[str, ...]:
    return assess(command, W).unproven


def test_the_hostile_table_has_at_least_sixty_commands_across_every_class() -> None:
    assert len(HOSTILE_CASES) >= 60
    assert all(len(commands) >= 10 for commands in HOSTILE.values())
    assert len({cmd for _, cmd in HOSTILE_CASES}) == len(HOSTILE_CASES)
    assert sum(len(HOSTILE[cls]) for cls in ISSUE_27_CLASSES) >= 30  # issue 27: at least 30 more
    ids = [hostile_id(cls, cmd) for cls, cmd in HOSTILE_CASES if cls in ISSUE_27_CLASSES]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize(
    ("cls", "command"),
    [pytest.param(cls, cmd, id=hostile_id(cls, cmd)) if cls in ISSUE_27_CLASSES else (cls, cmd)
     for cls, cmd in HOSTILE_CASES],
)  # fmt: skip
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
        ("printf x | sh", "`sh` runs code from the work directory (conftest.py, setup.py, Makefile…)"),
        ("pytest -q", "`pytest` runs code from the work directory (conftest.py, setup.py, Makefile…)"),
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


@pytest.mark.parametrize("command", HOSTILE["code_executing_tools"], ids=lambda c: "-".join(c.split()))
def test_a_program_that_runs_work_directory_code_always_asks_and_says_so(command: str) -> None:
    """Issue 27, finding 2: pytest ran conftest.py unasked under the sandbox. No sandbox and no
    approvals.allow entry makes such a program provable."""
    found = reasons(command)
    assert any(REASON in reason for reason in found), found
    assert assess(command, W).offered_tiers == ("once", "deny")
    program = command.split()[0]
    widened = load_allow({program: {"options": ["-q", "-m TEXT"], "operands": "text", "asks": True}})
    assert not prove(command, W, widened).proven


def test_no_built_in_allow_list_entry_runs_work_directory_code() -> None:
    """The audit of allow_defaults.py, kept: pytest was the one such entry (issue 27)."""
    assert [name for name in DEFAULT_ALLOW if runs_workdir_code(name)] == []
    assert "pytest" in CODE_RUNNERS and "pytest" not in DEFAULT_ALLOW


@pytest.mark.parametrize(
    "config",
    [
        {"make": {"options": ["-n"]}},
        {"pytest": {"options": ["-q"]}},
        {"python3.12": {"operands": "text"}},
        {"npm": {"subcommands": {"test": {}}}},
    ],
)
def test_an_allow_entry_cannot_prove_a_program_that_runs_work_directory_code(
    config: dict[str, object],
) -> None:
    with pytest.raises(ValueError, match="runs code from the work directory") as caught:
        load_allow(config)
    assert f"approvals.allow.{next(iter(config))}" in str(caught.value)


def test_needs_sandbox_is_refused_with_what_to_write_instead() -> None:
    with pytest.raises(ValueError, match=r"approvals.allow.jq.needs_sandbox: removed.*asks: true"):
        load_allow({"jq": {"options": ["-r"], "needs_sandbox": True}})


@pytest.mark.parametrize(
    ("command", "proven"),
    [
        ("git log --oneline | head -n 5", True),
        ("git diff > changes.patch", True),  # the shell opens the file before git starts
        ("git status; echo x > notes.txt", True),
        ("git log | sort > /dev/null", True),
        ("echo x > notes.txt | git status", False),
        ("git log | sort -o out.txt", False),
        ("cat notes.txt | git status | cp a b", False),
    ],
)
def test_git_never_runs_beside_a_command_that_writes_files(command: str, proven: bool) -> None:
    """A file git's configuration includes may be in the work directory: written while git runs,
    it would escape the runner's guard, which reads the configuration just before."""
    found = reasons(command)
    if proven:
        assert found == ()
    else:
        assert any("pipeline beside a command that writes files" in r for r in found), found


def test_the_allow_list_is_extended_and_trimmed_from_config() -> None:
    allow = load_allow({"jq": {"options": ["-r", "-c", "-L PATH"]}, "rm": False})
    assert prove("jq -r -c . data.json", W, allow).proven
    assert not prove("jq -L /etc . data.json", W, allow).proven
    assert not prove("jq --raw-output . data.json", W, allow).proven
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
