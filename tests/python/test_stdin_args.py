"""`-` for standard input where a program reads a JSON argument: pasa-sweep's config,
pasa-attn's and pasa-attribute's --problem, --algo-json. The same file given by name is the reference: the
same output, and messages that name "stdin" where they named the file; stdin read once per command."""
import json
import subprocess

from conftest import BUILD

PROBLEM = {"shape": {"Nq": 1, "Sq": 16, "D": 8}, "seed": 3, "generator": {"kind": "uniform", "x0": 2, "am": 0.5}}
ALGORITHM = {"name": "fa2", "alloc": "fa_fp16_fp32", "s1": 8, "s2": 8}
SWEEP = {"name": "stdin", "problem": {"shape": {"Nq": 1, "Sq": 16, "D": 8}, "seed": "$seed",
                                      "generator": {"kind": "uniform", "x0": "$x0", "am": 0.5}},
         "grid": {"x0": [1, 30]}, "seeds": [1, 2],
         "algorithms": [{"label": "FA", "name": "fa2", "alloc": "fa_fp16_fp32", "s1": 8, "s2": 8}]}


def run(name, *args, stdin=""):
    return subprocess.run([str(BUILD / name), *map(str, args)], input=stdin, capture_output=True, text=True)


def test_problem_and_algorithm_from_stdin(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps(PROBLEM))
    (tmp_path / "a.json").write_text(json.dumps(ALGORITHM))
    by_name = run("pasa-attn", "--problem", tmp_path / "p.json", "--algo-json", tmp_path / "a.json", "--json")
    assert by_name.returncode == 0, by_name.stderr
    for args, text in ((["--problem", "-", "--algo-json", tmp_path / "a.json"], json.dumps(PROBLEM)),
                       (["--problem", tmp_path / "p.json", "--algo-json", "-"], json.dumps(ALGORITHM))):
        r = run("pasa-attn", *args, "--json", stdin=text)
        assert r.returncode == 0, r.stderr
        a, b = json.loads(r.stdout), json.loads(by_name.stdout)
        assert a["metrics"] == b["metrics"] and a["algorithm"] == b["algorithm"]
    r = run("pasa-attribute", "--problem", "-", "--algo-json", tmp_path / "a.json", "--json", tmp_path / "s.json",
            stdin=json.dumps(PROBLEM))
    assert r.returncode == 0, r.stderr
    assert run("pasa-attribute", "--problem", tmp_path / "p.json", "--algo-json", tmp_path / "a.json", "--json",
               tmp_path / "f.json").returncode == 0
    stages = [json.loads((tmp_path / n).read_text())["stages"] for n in ("s.json", "f.json")]
    assert stages[0] == stages[1]
    # errors name stdin as they name a file
    bad = dict(PROBLEM, generator={"kind": "uniform", "x0": 2, "amm": 0.5})
    r = run("pasa-attn", "--problem", "-", stdin=json.dumps(bad))
    assert r.returncode == 2 and r.stderr.startswith("pasa-attn: error: stdin:/generator"), r.stderr


def test_stdin_is_read_once(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(ALGORITHM))
    r = run("pasa-attn", "--problem", "-", "--algo-json", "-", stdin=json.dumps(ALGORITHM))
    assert r.returncode == 2 and "standard input is --algo-json's; give one of them a file" in r.stderr, r.stderr


def test_sweep_config_from_stdin(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps(SWEEP))
    a = run("pasa-sweep", tmp_path / "c.json", "--out", tmp_path / "named", "--threads", 1)
    b = run("pasa-sweep", "-", "--out", tmp_path / "piped", "--threads", 1, stdin=json.dumps(SWEEP))
    assert a.returncode == b.returncode == 0, b.stderr
    assert b.stdout.replace("/piped/", "/named/") == a.stdout
    table = [(tmp_path / d / "results.csv").read_text().splitlines() for d in ("named", "piped")]
    assert [l.rsplit(",", 2)[0] for l in table[0]] == [l.rsplit(",", 2)[0] for l in table[1]]
    r = run("pasa-sweep", "-", "--out", tmp_path / "bad", stdin=json.dumps(dict(SWEEP, seeds="1")))
    assert r.returncode == 2 and r.stderr.splitlines()[-1].startswith("pasa-sweep: error: stdin:/seeds"), r.stderr
    r = run("pasa-sweep", "missing.json")
    assert r.returncode != 0 and "missing.json" in r.stderr  # a name is still checked
