"""pasa-attn's progress on a terminal: stage lines and the golden's row blocks done on stderr when stderr is a
terminal (a pseudo-terminal here), erased at the end; nothing on stderr otherwise, and stdout the same."""
import json
import os
import pty
import re
import subprocess

import pytest

from conftest import BUILD

# Long enough for the golden to be redrawn (> 0.2 s on one thread; its time is read back to decide).
ARGS = ["--heads", "8", "--seq", "1024", "--dim", "128", "--threads", "1", "--json"]


def untimed(text):
    """The --json output without its timings (any key ending in "seconds")."""
    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if not k.endswith("seconds")}
        return [strip(x) for x in v] if isinstance(v, list) else v
    return strip(json.loads(text))


def run_on_a_terminal(args):
    """(stdout, what the terminal got on stderr, exit status) with stderr a pseudo-terminal."""
    master, slave = pty.openpty()
    p = subprocess.Popen([str(BUILD / "pasa-attn"), *args], stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the program closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    out = p.stdout.read().decode()
    rc = p.wait()
    os.close(master)
    return out, seen.decode(), rc


def test_nothing_on_stderr_off_a_terminal_and_stdout_unchanged():
    piped = subprocess.run([str(BUILD / "pasa-attn"), *ARGS], capture_output=True, text=True)
    assert piped.returncode == 0 and piped.stderr == ""
    with open(os.devnull, "w") as null:  # a file, not a terminal
        to_file = subprocess.run([str(BUILD / "pasa-attn"), *ARGS[:-1]], stdout=subprocess.PIPE, stderr=null,
                                 text=True)
    assert to_file.returncode == 0 and "golden" in to_file.stdout
    out, seen, rc = run_on_a_terminal(ARGS)
    assert rc == 0 and untimed(out) == untimed(piped.stdout)  # stdout does not depend on stderr being a terminal
    assert "[pasa-attn]" in seen


def test_stages_and_golden_progress_on_a_terminal():
    out, seen, rc = run_on_a_terminal(ARGS)
    assert rc == 0
    stages = re.findall(r"\[pasa-attn\] (running fa2|golden|metrics) \.\.\.", seen)
    assert stages == ["running fa2", "golden", "metrics"]
    assert seen.endswith("\r\x1b[K")  # the status line erased: the terminal is left as it was
    progress = re.findall(r"golden: (\d+)/(\d+) row blocks \((\d+) %\)", seen)
    if json.loads(out)["golden"]["seconds"] > 0.5:
        assert progress
    for done, total, pct in progress:
        assert 0 < int(done) <= int(total) and int(pct) == round(100 * int(done) / int(total))


def test_an_error_starts_its_own_line():
    _, seen, rc = run_on_a_terminal(["--heads", "1", "--seq", "8", "--dim", "8", "--alloc", "nope"])
    assert rc == 2 and "[pasa-attn]" not in seen and "nope" in seen
