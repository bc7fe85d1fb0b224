"""Programs that run code or configuration found in the work directory: never proven safe.

A test runner imports ``conftest.py``, a build tool runs the ``Makefile``, a package manager
runs ``setup.py`` or an ``install`` script, an interpreter runs whatever file it is given.
The work directory holds what a cloned repository or the agent itself put there, so what
such a program does is decided by those files, not by its arguments: the approval check
cannot read them (it is pure, and the files may change before the program runs), so a
command that names one of these programs always asks a human, whatever ``approvals.allow``
says (docs/approvals.md, "Programs that are never proven safe"). The sandbox does not change
that: it confines writes, not what the code reads or tells the model.

``git`` is not here: the runner runs it with every program its configuration names turned
off (``agents/tools/git_guard.py``), so its allow-listed subcommands stay provable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

REASON = "runs code from the work directory (conftest.py, setup.py, Makefile…)"
"""The start of every reason this module gives; the prompt shows it."""

_TEST = "its tests, their conftest.py or setup files and the plugins they name"
_BUILD = "the build file of the work directory and every command it names"
_PACKAGE = "the project's install, build or run scripts and its dependencies' setup code"
_INTERPRETER = "the script or code it is given, and files the work directory puts on its path"
_SHELL = "a script from the work directory, or whatever code it is given"
_CONFIG = "commands named by configuration files in the work directory"

CODE_RUNNERS: Mapping[str, str] = {
    # test runners
    **dict.fromkeys(
        ("pytest", "py.test", "tox", "nox", "nose2", "trial", "behave", "ward", "green", "unittest",
         "ctest", "jest", "mocha", "vitest", "karma", "ava", "tap", "playwright", "cypress", "phpunit",
         "pest", "rspec", "cucumber", "prove", "bats", "busted"),
        _TEST,
    ),
    # interpreters and shells
    **dict.fromkeys(
        ("python", "python2", "python3", "pypy", "pypy3", "ipython", "jupyter", "node", "nodejs",
         "deno", "bun", "ruby", "irb", "perl", "php", "lua", "luajit", "tclsh", "wish", "guile",
         "racket", "Rscript", "R", "julia", "elixir", "iex", "erl", "escript", "ghci", "runghc",
         "runhaskell", "java", "jshell", "kotlin", "scala", "groovy", "swift", "pwsh", "osascript",
         "awk", "gawk", "mawk", "nawk", "busybox", "expect", "gdb", "lldb", "vim", "vi", "nvim",
         "emacs", "ex"),
        _INTERPRETER,
    ),
    **dict.fromkeys(("sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh"), _SHELL),
    # build tools
    **dict.fromkeys(
        ("make", "gmake", "bmake", "cmake", "ninja", "meson", "scons", "bazel", "bazelisk", "buck",
         "buck2", "pants", "cargo", "rustc", "go", "gradle", "gradlew", "mvn", "mvnw", "ant", "sbt",
         "lein", "mix", "rebar3", "dune", "xcodebuild", "msbuild", "dotnet", "just", "task", "invoke",
         "fab", "doit", "earthly", "rake", "latexmk", "sphinx-build", "mkdocs", "jekyll", "hugo"),
        _BUILD,
    ),
    # package managers and project runners
    **dict.fromkeys(
        ("npm", "npx", "yarn", "pnpm", "pnpx", "corepack", "pip", "pip3", "pipx", "poetry", "pdm",
         "hatch", "uv", "uvx", "pipenv", "conda", "mamba", "micromamba", "gem", "bundle", "bundler",
         "composer", "cpan", "cpanm", "rustup", "cabal", "stack", "opam", "nix", "nix-shell",
         "nix-build", "nix-env", "setup.py"),
        _PACKAGE,
    ),
    # programs whose configuration in the work directory runs commands
    **dict.fromkeys(
        ("hg", "svn", "fossil", "bzr", "brz", "darcs", "direnv", "pre-commit", "husky", "lefthook",
         "docker", "docker-compose", "podman", "vagrant", "terraform", "ansible", "ansible-playbook",
         "less", "more", "man"),
        _CONFIG,
    ),
}  # fmt: skip
"""Program -> what it runs from the work directory (the second half of the reason)."""

_VERSIONED = re.compile(
    r"(?:python|pypy|pip|ruby|irb|gem|perl|php|lua|luajit|node|tclsh|wish|guile|bundle|julia)"
    r"-?[0-9][0-9.]*"
)
"""``python3.11``, ``pip3.12``, ``perl5.36``, ``php8.2``, ``lua5.4``: the versioned names."""


def runs_workdir_code(program: str) -> str | None:
    """Why ``program`` (a bare command name) runs work-directory code, or None."""
    why = CODE_RUNNERS.get(program)
    if why is None and _VERSIONED.fullmatch(program):
        why = _INTERPRETER
    return why


def reason(program: str, why: str) -> str:
    """The reason shown in the prompt for a program of this table."""
    return f"`{program}` {REASON}: {why}; it is never proven safe, so it always asks"
