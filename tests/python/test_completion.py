"""`<program> --completion bash`: a bash completion script generated from the program's own CLI11 options.
Checked against the program's --help (every option it lists completes) and by running the script's function
in bash as the shell's completion would (COMP_WORDS, COMP_CWORD -> COMPREPLY)."""
import re
import shutil
import subprocess

import pytest

from conftest import BUILD, run_app

PROGRAMS = ["pasa-attn", "pasa-attribute", "pasa-beta", "pasa-fdpp", "pasa-gemm", "pasa-hwcompare", "pasa-round",
            "pasa-sweep", "pasa-tables"]

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")


def complete(program, *words):
    """COMPREPLY for the command line `program words...` with the cursor on the last word."""
    script = run_app(program, "--completion", "bash").stdout
    line = " ".join(f"'{w}'" for w in (program,) + words)
    fn = "_" + program.replace("-", "_")
    r = subprocess.run(["bash", "-c", f'{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words)}; {fn}; '
                        'printf "%s\\n" "${COMPREPLY[@]}"'], capture_output=True, text=True, check=True)
    return [w for w in r.stdout.splitlines() if w]


def help_options(program, *sub):
    """The option names --help lists (the words that open its option lines, "  -h,--help", "  --a,--b TEXT"),
    not those its descriptions mention."""
    names = set()
    for line in run_app(program, *sub, "--help").stdout.splitlines():
        m = re.match(r"^  (-[\w-]+(?:,-[\w-]+)*)", line)
        if m:
            names |= set(m.group(1).split(","))
    return names


@pytest.mark.parametrize("program", PROGRAMS)
def test_every_option_of_help_completes(program):
    r = run_app(program, "--completion", "bash")
    assert r.stderr == "" and f"complete -o default -F _{program.replace('-', '_')} {program}\n" in r.stdout
    subprocess.run(["bash", "-n"], input=r.stdout, text=True, check=True)  # valid bash
    words = set(complete(program, "-"))
    listed = help_options(program)
    assert listed and listed - {"--completion"} <= words, listed - words
    assert "--completion" not in words and "--completion" not in run_app(program, "--help").stdout  # hidden


def test_prefixes_values_and_subcommands():
    assert complete("pasa-sweep", "--thr") == ["--threads"]
    assert complete("pasa-sweep", "--threads", "") == []  # a value: the shell's file names (-o default)
    assert complete("pasa-sweep", "CONFIG.json", "--resume", "--ov") == ["--overwrite"]
    assert complete("pasa-sweep", "me") == ["merge"]
    merge = set(complete("pasa-sweep", "merge", "runs/a", "-"))
    assert merge == help_options("pasa-sweep", "merge") and "--threads" not in merge
    assert set(complete("pasa-hwcompare", "")) == {"attention", "conversions", "gemm", "kernel"}
    assert set(complete("pasa-hwcompare", "kernel", "-")) == help_options("pasa-hwcompare", "kernel")
    assert sorted(complete("pasa-attn", "--al")) == sorted(o for o in help_options("pasa-attn") if o.startswith("--al"))
    assert complete("pasa-attn", "--threads", "") == []


def test_only_bash():
    r = run_app("pasa-attn", "--completion", "zsh", expect_rc=2)
    assert "--completion: zsh: only bash is supported" in r.stderr and r.stdout == ""
    # before the required arguments are checked: merge's folders need not be given
    assert "_pasa_sweep()" in run_app("pasa-sweep", "--completion", "bash").stdout
    assert (BUILD / "pasa-sweep").exists()


def test_library_names_complete_as_values():
    # The value of an option that takes a library name completes to the registry's names (the words its check
    # carries), not to file names; the other options' values stay file names.
    presets = complete("pasa-attn", "--alloc", "fa_")
    assert "fa_fp32" in presets and "pasa_fp16" not in presets and all(p.startswith("fa_") for p in presets)
    assert complete("pasa-attn", "--algorithm", "fa") == ["fa1", "fa2"]
    assert {"torch_flash_sm90", "sage2_sm90"} <= set(complete("pasa-attn", "--kernel", ""))
    assert complete("pasa-round", "--format", "fp1") == ["fp16"] and complete("pasa-round", "-f", "b") == ["bf16"]
    assert complete("pasa-round", "-m", "rn") == ["rne", "rna"]
    assert "mxfp4" in complete("pasa-round", "--block", "mx")
    assert set(complete("pasa-hwcompare", "gemm", "--a-format", "fp8")) == {"fp8_e4m3fn", "fp8_e5m2"}
    assert complete("pasa-hwcompare", "--a-format", "fp8") == []  # an option of `gemm`, not of the program
    assert complete("pasa-round", "--seed", "") == [] and complete("pasa-attn", "--q", "") == []
