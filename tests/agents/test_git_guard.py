"""Issue 27, finding 1: allow-listed git runs no program a repository's configuration names.

Real repositories, made here with the real git; the real shell runner. Each configured
program writes a marker file outside the work directory, where a command the approval
check proves safe may not write; the test asserts the command runs unasked (the analysis
proves it), that git did its job, and that no marker exists. On main each of these ran the
program (the embedded bare repository of ``cd evil && git status`` among them); the pager
case is kept although git starts no pager without a terminal, and ``~/.gitconfig`` because
HOME is now the work directory. Commands that cannot be made safe must ask.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from chatgate.agents.tools.runner import ShellToolRunner
from chatgate.agents.tools.sandbox import BwrapSandbox
from chatgate.domain.shell.danger import assess

if shutil.which("git") is None:
    pytest.skip("git is not installed here", allow_module_level=True)


class Repo:
    """A work directory holding a git repository, and a markers directory beside it."""

    def __init__(self, tmp_path: Path) -> None:
        self.work = tmp_path / "work"
        self.markers = tmp_path / "markers"
        self.markers.mkdir()
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": "/dev/null",
            "LANG": "C.UTF-8",
        }

    def git(self, *args: str, cwd: Path | None = None) -> str:
        done = subprocess.run(
            ["git", *args], cwd=cwd or self.work, env=self.env, capture_output=True, text=True, check=True
        )
        return done.stdout

    def init(self, path: Path | None = None) -> Path:
        path = path or self.work
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main", cwd=path)
        self.git("config", "user.email", "agent@example.org", cwd=path)
        self.git("config", "user.name", "Agent", cwd=path)
        return path

    def commit(self, files: dict[str, str], message: str = "c", path: Path | None = None) -> None:
        path = path or self.work
        for name, text in files.items():
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            (path / name).write_text(text)
        self.git("add", "-A", cwd=path)
        self.git("commit", "-q", "-m", message, cwd=path)

    def program(self, name: str) -> str:
        """A shell command that leaves the marker ``name`` (and passes its input through)."""
        return f"touch {self.markers / name}; cat"

    def config(self, key: str, value: str, path: Path | None = None) -> None:
        self.git("config", key, value, cwd=path)

    def hook(self, name: str) -> None:
        hook = self.work / ".git" / "hooks" / name
        hook.write_text(f"#!/bin/sh\ntouch {self.markers / name}\n")
        hook.chmod(0o755)

    def ran(self) -> list[str]:
        return sorted(path.name for path in self.markers.iterdir())


async def run(repo: Repo, command: str, sandbox: bool = False) -> str:
    """``command`` must be proven safe (it runs unasked); returns what the model reads."""
    assessment = assess(command, str(repo.work))
    assert not assessment.dangerous, (command, assessment.unproven, assessment.keys)
    box = BwrapSandbox(repo.work) if sandbox else None
    result = await ShellToolRunner(repo.work, 60.0, 20_000, box).execute(command, "c1")
    assert result.status == "ok", result.content
    return result.content


def embedded_bare(repo: Repo) -> str:
    """The issue's case: a cloned repository holding a bare repository ``evil/`` as plain files."""
    upstream = repo.init(repo.work.parent / "upstream")
    bare = upstream / "evil"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], env=repo.env, check=True)
    (bare / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ..\n"
        f"\tfsmonitor = {repo.program('fsmonitor')}\n"
    )
    for keep in ("objects/.keep", "refs/.keep"):  # git stores no empty directory
        (bare / keep).write_text("")
    repo.commit({"README": "x\n"}, path=upstream)
    subprocess.run(["git", "clone", "-q", str(upstream), str(repo.work)], env=repo.env, check=True)
    assert (repo.work / "evil" / "config").is_file() and (repo.work / "evil" / "HEAD").is_file()
    return "cd evil && git status"


def fsmonitor(repo: Repo) -> str:
    repo.init()
    repo.commit({"a.txt": "a\n"})
    repo.config("core.fsmonitor", repo.program("fsmonitor"))
    (repo.work / "a.txt").write_text("changed\n")
    return "git status --short"


def hooks(repo: Repo) -> str:
    repo.init()
    repo.commit({"a.txt": "a\n"})
    for name in ("pre-commit", "prepare-commit-msg", "commit-msg", "post-commit"):
        repo.hook(name)
    (repo.work / "a.txt").write_text("b\n")
    return "git add a.txt && git commit -m 'change a'"


def external_diff(repo: Repo) -> str:
    repo.init()
    repo.commit({"a.txt": "a\n"})
    repo.config("diff.external", repo.program("diff-external"))
    (repo.work / "a.txt").write_text("b\n")
    return "git diff"


def diff_driver_command(repo: Repo) -> str:
    repo.init()
    repo.commit({"a.txt": "a\n", ".gitattributes": "*.txt diff=tool\n"})
    repo.config("diff.tool.command", repo.program("diff-driver"))
    (repo.work / "a.txt").write_text("b\n")
    return "git diff"


def textconv(repo: Repo) -> str:
    repo.init()
    repo.commit({"a.txt": "a\n", ".gitattributes": "*.txt diff=conv\n"})
    repo.commit({"a.txt": "b\n"})
    repo.config("diff.conv.textconv", f"sh -c 'touch {repo.markers / 'textconv'}; cat \"$0\"'")
    (repo.work / "a.txt").write_text("c\n")
    return "git diff; git log -p -n 1; git show; git blame a.txt; git diff HEAD~1 --stat"


def clean_smudge_filter(repo: Repo) -> str:
    repo.init()
    repo.commit({"a.txt": "a\n", ".gitattributes": "*.txt filter=crlf\n"})
    repo.config("filter.crlf.clean", repo.program("clean"))
    repo.config("filter.crlf.smudge", repo.program("smudge"))
    repo.config("filter.crlf.required", "true")
    (repo.work / "a.txt").write_text("b\n")
    return "git diff; git add a.txt; git status --short; git commit -q -m b; git diff HEAD~1 --stat"


def long_running_filter(repo: Repo) -> str:
    repo.init()
    repo.commit({"a.txt": "a\n", ".gitattributes": "*.txt filter=proc\n"})
    repo.config("filter.proc.process", repo.program("process"))
    (repo.work / "a.txt").write_text("b\n")
    return "git add a.txt"


def submodule_filter(repo: Repo) -> str:
    """A submodule's own configuration: git runs ``git status`` inside it, as another process."""
    upstream = repo.init(repo.work.parent / "sub-upstream")
    repo.commit({"f.txt": "x\n", ".gitattributes": "*.txt filter=sub\n"}, path=upstream)
    repo.init()
    repo.git("-c", "protocol.file.allow=always", "submodule", "-q", "add", str(upstream), "sub")
    repo.git("commit", "-q", "-m", "sub")
    repo.config("filter.sub.clean", repo.program("submodule-clean"), path=repo.work / "sub")
    (repo.work / "sub" / "f.txt").write_text("y\n")
    return "git status --short; git add -A; git commit -q -a -m all"


def pager(repo: Repo) -> str:
    repo.init()
    repo.commit({"a.txt": "a\n"})
    repo.config("core.pager", repo.program("pager"))
    repo.config("pager.log", repo.program("pager-log"))
    return "git log --oneline; git --no-pager log -n 1"


def editor(repo: Repo) -> str:
    repo.init()
    repo.commit({"a.txt": "a\n"})
    repo.config("core.editor", repo.program("editor"))
    repo.config("sequence.editor", repo.program("sequence-editor"))
    (repo.work / "a.txt").write_text("b\n")
    return "git add a.txt; git commit; git commit --amend; true"


def gpg_program(repo: Repo) -> str:
    """``%G?`` verifies a signed commit's signature with gpg.program."""
    repo.init()
    repo.commit({"a.txt": "a\n"})
    tree = repo.git("write-tree").strip()
    signed = (
        f"tree {tree}\nauthor A <a@example.org> 0 +0000\ncommitter A <a@example.org> 0 +0000\n"
        "gpgsig -----BEGIN PGP SIGNATURE-----\n \n iQEzBAABCAAdFiEE\n -----END PGP SIGNATURE-----\n\nsigned\n"
    )
    done = subprocess.run(
        ["git", "hash-object", "-t", "commit", "-w", "--stdin"],
        cwd=repo.work,
        env=repo.env,
        input=signed,
        capture_output=True,
        text=True,
        check=True,
    )
    repo.git("update-ref", "HEAD", done.stdout.strip())
    repo.config("gpg.program", str(marker_script(repo, "gpg")))
    repo.config("log.showSignature", "true")
    return "git log '--format=%G? %s' -n 1; git show --stat"


def include_path(repo: Repo) -> str:
    """A file the repository's configuration includes, in the work directory (writable unasked)."""
    repo.init()
    repo.commit({"a.txt": "a\n"})
    (repo.work / "extra.cfg").write_text(f"[core]\n\tfsmonitor = {repo.program('included-fsmonitor')}\n")
    repo.config("include.path", "../extra.cfg")
    return "git status --short"


def home_gitconfig(repo: Repo) -> str:
    """HOME is the work directory, so ``~/.gitconfig`` would be any command's to write."""
    repo.init()
    repo.commit({"a.txt": "a\n"})
    (repo.work / ".gitconfig").write_text(f"[core]\n\tfsmonitor = {repo.program('home-gitconfig')}\n")
    (repo.work / ".config" / "git").mkdir(parents=True)
    (repo.work / ".config" / "git" / "config").write_text(
        f"[core]\n\tpager = {repo.program('xdg-pager')}\n\tfsmonitor = {repo.program('xdg-fsmonitor')}\n"
    )
    return "git status --short"


def marker_script(repo: Repo, name: str) -> Path:
    script = repo.markers.parent / f"{name}.sh"
    script.write_text(f"#!/bin/sh\ntouch {repo.markers / name}\nexit 1\n")
    script.chmod(0o755)
    return script


CASES: dict[str, tuple[Callable[[Repo], str], str]] = {
    "embedded-bare-repo-fsmonitor": (embedded_bare, "cannot use bare repository"),
    "fsmonitor": (fsmonitor, "M a.txt"),
    "commit-hooks": (hooks, "change a"),
    "diff-external": (external_diff, "+b"),
    "diff-driver-command": (diff_driver_command, "+b"),
    "textconv": (textconv, "+c"),
    "clean-smudge-filter": (clean_smudge_filter, "a.txt"),
    "filter-process": (long_running_filter, "exit code 0"),
    "submodule-filter": (submodule_filter, "m sub"),
    "pager": (pager, "exit code 0"),
    "editor": (editor, "exit code 0"),
    "gpg-program": (gpg_program, "signed"),
    "include-path": (include_path, "exit code 0"),
    "home-gitconfig": (home_gitconfig, "exit code 0"),
}


@pytest.mark.parametrize("case", CASES)
async def test_git_runs_unasked_without_the_programs_its_configuration_names(
    tmp_path: Path, case: str
) -> None:
    setup, said = CASES[case]
    repo = Repo(tmp_path)
    command = setup(repo)
    content = await run(repo, command)
    assert repo.ran() == [], content
    assert said in content, content


async def test_a_filter_turned_off_leaves_the_file_as_git_stores_it(tmp_path: Path) -> None:
    """The guard empties the driver, it does not break git: add, commit and checkout still work."""
    repo = Repo(tmp_path)
    clean_smudge_filter(repo)
    content = await run(repo, "git add a.txt && git commit -q -m b && git show --stat && git status --short")
    assert "a.txt | 2 +-" in content and repo.ran() == []
    assert repo.git("show", "HEAD:a.txt") == "b\n"


@pytest.mark.skipif(shutil.which("bwrap") is None and not os.environ.get("CI"), reason="needs bubblewrap")
async def test_the_guard_works_inside_the_sandbox(tmp_path: Path) -> None:
    """The guard's directory is bound into bwrap; the marker is inside the work directory here,
    where the sandbox lets a program write, so only the guard keeps it from appearing."""
    repo = Repo(tmp_path)
    repo.init()
    repo.commit({"a.txt": "a\n", ".gitattributes": "*.txt filter=f diff=d\n"})
    inside = repo.work / "ran"
    repo.config("core.fsmonitor", f"touch {inside}-fsmonitor; false")
    repo.config("filter.f.clean", f"touch {inside}-clean; cat")
    repo.config("diff.d.textconv", f"sh -c 'touch {inside}-textconv; cat \"$0\"'")
    repo.hook("pre-commit")
    (repo.work / "a.txt").write_text("b\n")
    content = await run(repo, "git status --short; git diff; git add a.txt; git commit -m b", sandbox=True)
    assert " M a.txt" in content and "+b" in content and "] b" in content, content
    assert sorted(p.name for p in repo.work.iterdir() if p.name.startswith("ran")) == []
    assert repo.ran() == []


@pytest.mark.parametrize(
    "command",
    [
        "git status -v",  # the verbose diff runs textconv, and status takes no --no-textconv
        "git commit -v -m b",
        "git -C evil status",
        "git --git-dir=evil status",
        "git diff --ext-diff",
        "git log -p --textconv",
        "git fetch 'ext::sh -c touch% /tmp/x'",
        "git push origin main",
        "echo '[core]' > extra.cfg | git status",
    ],
)
def test_what_the_guard_cannot_make_safe_asks(tmp_path: Path, command: str) -> None:
    repo = Repo(tmp_path)
    textconv(repo)
    assessment = assess(command, str(repo.work))
    assert assessment.dangerous and assessment.unproven, command


async def test_the_guard_finds_the_subcommand_after_global_options(tmp_path: Path) -> None:
    """An approved command may use global options; the guard still turns the drivers off."""
    repo = Repo(tmp_path)
    inner = repo.init(repo.work / "inner")
    repo.commit({"a.txt": "a\n", ".gitattributes": "*.txt diff=d filter=f\n"}, path=inner)
    repo.config("diff.external", repo.program("external"), path=inner)
    repo.config("diff.d.textconv", repo.program("textconv"), path=inner)
    repo.config("filter.f.clean", repo.program("clean"), path=inner)
    (inner / "a.txt").write_text("b\n")
    runner = ShellToolRunner(repo.work, 60.0, 20_000)
    result = await runner.execute(
        "git -C inner --no-pager -c color.ui=never diff;"
        " git --git-dir=inner/.git --work-tree=inner log -p -n 1",
        "c1",
    )
    assert "+b" in result.content and "+a" in result.content, result.content
    assert repo.ran() == []


async def test_a_configuration_the_guard_cannot_read_stops_git(tmp_path: Path) -> None:
    repo = Repo(tmp_path)
    repo.init()
    repo.commit({"a.txt": "a\n"})
    (repo.work / ".git" / "config").write_text("[core\n\tfsmonitor = touch x\n")
    result = await ShellToolRunner(repo.work, 60.0, 20_000).execute("git status", "c1")
    assert "could not read git's configuration" in result.content and "git was not run" in result.content
    assert result.content.startswith("exit code 128")
