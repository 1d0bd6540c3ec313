"""The launcher's command line, its llama.cpp parameters, and how it fails."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolshim.local.launcher import (
    EXIT_FAILED,
    EXIT_USAGE,
    default_threads,
    parse_args,
    server_params,
    tune_openmp,
)

needs_xllamacpp = pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None, reason="xllamacpp is not installed"
)


def test_defaults(gguf: Path) -> None:
    args = parse_args(["--model", str(gguf)])
    assert args.host == "127.0.0.1"
    assert args.port == 0
    assert args.ctx_size == 8192
    assert args.parallel == 1
    assert args.jinja is True
    assert args.alias == "some-model.gguf"
    assert args.threads == default_threads() >= 1
    assert args.parent_pid == os.getppid()
    assert args.ready_file is None
    assert args.kill_with_parent is False
    assert args.temperature == 0.0


def test_every_option(gguf: Path, tmp_path: Path) -> None:
    args = parse_args(
        [
            "--model", str(gguf), "--host", "0.0.0.0", "--port", "8099", "--threads", "3",
            "--ctx-size", "2048", "--parallel", "2", "--alias", "qwen", "--no-jinja",
            "--ready-file", str(tmp_path / "r.json"), "--parent-pid", "4242",
            "--kill-with-parent", "--temperature", "0.7",
        ]
    )  # fmt: skip
    assert (args.host, args.port, args.threads, args.ctx_size) == ("0.0.0.0", 8099, 3, 2048)
    assert (args.parallel, args.alias, args.jinja) == (2, "qwen", False)
    assert args.ready_file == tmp_path / "r.json"
    assert (args.parent_pid, args.kill_with_parent) == (4242, True)
    assert args.temperature == 0.7


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--port", "70000"], "--port 70000 is not between 0 and 65535"),
        (["--threads", "0"], "--threads 0 must be at least 1"),
        (["--ctx-size", "10"], "--ctx-size 10 is too small"),
        (["--parallel", "0"], "--parallel 0 must be at least 1"),
        (["--temperature", "-1"], "--temperature -1.0 is not between 0 and 2"),
        (["--temperature", "nan"], "--temperature nan is not between 0 and 2"),
        (["--port", "eighty"], "invalid int value: 'eighty'"),
    ],
)
def test_bad_values_exit_2_with_one_line(
    gguf: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        parse_args(["--model", str(gguf), *extra])
    assert info.value.code == EXIT_USAGE
    assert message in capsys.readouterr().err


def test_a_missing_model_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        parse_args(["--model", str(tmp_path / "nope.gguf")])
    assert info.value.code == EXIT_USAGE
    assert "nope.gguf' does not exist" in capsys.readouterr().err


@needs_xllamacpp
def test_llama_cpp_parameters(gguf: Path) -> None:
    args = parse_args(
        ["--model", str(gguf), "--threads", "2", "--ctx-size", "4096", "--alias", "m", "--no-jinja"]
    )
    params = server_params(args)
    assert params.model.path == str(gguf)
    assert params.hostnames == ["127.0.0.1"]
    assert params.port == 0
    assert params.n_ctx == 4096
    assert params.n_parallel == 1
    assert params.cpuparams.n_threads == 2
    assert params.cpuparams_batch.n_threads == 2
    assert params.model_alias == {"m"}
    assert params.use_jinja is False
    assert params.ui is False
    assert params.sampling.temp == 0.0  # llama.cpp's own default is 0.8
    args = parse_args(["--model", str(gguf), "--temperature", "0.5"])
    assert server_params(args).sampling.temp == 0.5


def _launch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolshim.local.launcher", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.e2e
def test_help_explains_itself() -> None:
    result = _launch("--help")
    assert result.returncode == 0
    assert "llama.cpp" in result.stdout
    for flag in ("--model", "--port", "--threads", "--ctx-size", "--no-jinja", "--ready-file"):
        assert flag in result.stdout


@pytest.mark.e2e
def test_missing_model_exits_2_without_a_traceback(tmp_path: Path) -> None:
    result = _launch("--model", str(tmp_path / "none.gguf"))
    assert result.returncode == EXIT_USAGE
    assert "does not exist" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.e2e
@needs_xllamacpp
def test_a_file_that_is_not_a_model_exits_1_with_llama_cpp_reason(gguf: Path) -> None:
    result = _launch("--model", str(gguf), "--ctx-size", "256")
    assert result.returncode == EXIT_FAILED
    log = result.stdout + result.stderr
    assert "llama.cpp did not start" in log
    assert "failed to load model" in log
    assert "Traceback" not in log


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, {"OMP_WAIT_POLICY": "PASSIVE"}),
        ({"OMP_WAIT_POLICY": "ACTIVE"}, {"OMP_WAIT_POLICY": "ACTIVE"}),
        ({"GOMP_SPINCOUNT": "1000"}, {"GOMP_SPINCOUNT": "1000"}),
    ],
)
def test_openmp_threads_block_unless_the_user_chose(
    environ: dict[str, str], expected: dict[str, str]
) -> None:
    tune_openmp(environ)
    assert environ == expected
