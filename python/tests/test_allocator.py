"""scripts/allocator.sh, which the SmolLM2 scripts source to pick the C allocator of the processes they start: each
setting reaches a started process (jemalloc mapped into it with its pages kept, or glibc's huge-pages tunable), a
setting the caller made is kept, and an unknown name or a missing library is refused with a message."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from conftest import REPO

JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"  # Debian's libjemalloc2, which scripts/test-setup.sh installs


def started(setting: str | None, **extra: str) -> subprocess.CompletedProcess[str]:
    """A process started after sourcing the script: which allocator it names, the environment, the memory map."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "MALLOC_CONF", "GLIBC_TUNABLES", "MCPRL_ALLOCATOR", "MCPRL_JEMALLOC")}
    if setting is not None:
        env["MCPRL_ALLOCATOR"] = setting
    env.update(extra)
    return subprocess.run(["bash", "-c", ". scripts/allocator.sh && allocator_name && env && cat /proc/self/maps"],
                          cwd=REPO, env=env, capture_output=True, text=True)


def mapped(proc: subprocess.CompletedProcess[str]) -> set[str]:
    """The files mapped into the last process (cat's /proc/self/maps)."""
    return {line.split()[-1] for line in proc.stdout.splitlines()
            if re.match(r"[0-9a-f]+-[0-9a-f]+ [r-]", line) and len(line.split()) == 6}


@pytest.mark.skipif(not os.path.exists(JEMALLOC), reason="libjemalloc2 is not installed (scripts/test-setup.sh)")
@pytest.mark.parametrize("setting", ["auto", "jemalloc"])
def test_jemalloc_reaches_the_process(setting: str) -> None:
    proc = started(setting)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("jemalloc (")
    assert "\nMALLOC_CONF=dirty_decay_ms:-1,muzzy_decay_ms:-1\n" in proc.stdout
    assert JEMALLOC in mapped(proc)
    assert "\nGLIBC_TUNABLES=" not in proc.stdout


@pytest.mark.parametrize("setting", [None, "glibc"])
def test_glibc_sets_huge_pages_and_keeps_the_callers(setting: str | None) -> None:
    proc = started(setting)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("glibc (") and "\nGLIBC_TUNABLES=glibc.malloc.hugetlb=1\n" in proc.stdout
    assert not any("jemalloc" in f for f in mapped(proc))
    mine = started("glibc", GLIBC_TUNABLES="glibc.malloc.hugetlb=0")
    assert "\nGLIBC_TUNABLES=glibc.malloc.hugetlb=0\n" in mine.stdout


def test_refusals_and_fallback() -> None:
    bad = started("tcmalloc")
    assert bad.returncode == 2 and "want auto, glibc or jemalloc" in bad.stderr
    missing = started("jemalloc", MCPRL_JEMALLOC="/nonexistent/libjemalloc.so.2")
    assert missing.returncode == 2 and "no libjemalloc.so.2" in missing.stderr
    fallback = started("auto", MCPRL_JEMALLOC="/nonexistent/libjemalloc.so.2")
    assert fallback.returncode == 0 and fallback.stdout.startswith("glibc (")
    assert not any("jemalloc" in f for f in mapped(fallback))
