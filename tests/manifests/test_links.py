"""The link check of .ci/run (.ci/links.sh): it passes on the repository and
fails, naming each one, on a missing file, a missing heading and a line
past a file's end."""
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_links(*args):
    return subprocess.run(["bash", str(ROOT / ".ci/links.sh"), *args],
                          capture_output=True, text=True, timeout=300)


def test_the_repository_has_no_broken_link():
    result = run_links()
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_fails_on_broken_links(tmp_path):
    (tmp_path / "code.rs").write_text("fn main() {}\n")
    (tmp_path / "a.md").write_text(
        "# Title\n\n## Where a change goes\n\n"
        "[ok](#where-a-change-goes) [ok](code.rs#L1) [web](https://example.invalid/x)\n\n"
        "[gone](b.md) [heading](#nowhere) [line](code.rs#L9)\n\n"
        "`[in code](b.md)`\n")
    result = run_links("--root", str(tmp_path), str(tmp_path / "a.md"))
    assert result.returncode == 1, result.stdout
    broken = [line for line in result.stdout.splitlines() if line.startswith("a.md:")]
    assert broken == [
        "a.md:7: b.md: no such file",
        "a.md:7: #nowhere: no such heading",
        "a.md:7: code.rs#L9: the file has 1 lines",
    ], result.stdout
    print("proof: the link check fails on a missing file, heading and line")
