"""`ownvoice bench` as a user runs it, on a tiny checkpoint: every figure is there and sane.

Speed targets live in the benchmark's output, not here; this checks that the benchmark measures
what it says (split, RTF, first audio, memory, floor, the CPU's flags, int8 / int4 quality,
the reference beside it).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from ownvoice.kernels import cpu_kernels

needs_kernels = pytest.mark.skipif(
    cpu_kernels() is None, reason="the bench's rows need the kernels"
)


def bench(*args, tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "ownvoice", "bench", *args, "--json", str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, json.loads(out.read_text())


@needs_kernels
def test_bench_reports_the_split_rtf_first_audio_memory_and_quantized_quality(
    tiny_checkpoints, tmp_path
):
    model = tiny_checkpoints["0.6B-CustomVoice"]
    table, result = bench(
        "--model", str(model), "--frames", "12", "--first-chunk", "1", "--quantize", "int8,int4",
        "--text", "Words of my own.", tmp_path=tmp_path,
    )  # fmt: skip
    ours = result["rows"]["ownvoice"]
    for key in ("talker_ms", "code_predictor_ms", "decoder_ms", "total_ms", "ttfa_ms"):
        assert ours[key] > 0, key
    assert ours["frames"] <= 12 and ours["peak_rss"] > 0 and ours["rss_growth"] >= 0
    assert ours["rtf"] == pytest.approx(ours["total_ms"] / 80, rel=1e-6)
    assert 0 < ours["floor_fraction"]
    assert result["spec"]["text"] == "Words of my own."
    q8, q4 = result["quality"]["int8"], result["quality"]["int4"]
    assert q8["mode"] == "int8" and q8["model_type"] == "custom_voice" and q8["prompts"] == 1
    assert 0.5 < q8["code_agreement"] <= 1 and 0 < q8["logit_rel_error"] < 0.2
    assert q4["logit_rel_error"] > q8["logit_rel_error"]  # 4 bits cost more than 8
    assert q8["mel_distance"] >= 0 and q4["mel_distance_takes"] > 0
    assert result["rows"]["ownvoice int8"]["dtype"] == "w8a12"
    assert result["rows"]["ownvoice int4"]["dtype"] == "w4a12"
    assert result["rows"]["ownvoice"]["dtype"] == "bf16>fp32"
    # decoding beside generation where it pays (2+ threads): with integer weights always,
    # with float weights while two or more rows play
    two = result["spec"]["threads"] >= 2
    assert result["rows"]["ownvoice int8"]["overlap"] == ("on" if two else "off")
    assert result["rows"]["ownvoice"]["overlap"] == ("batches" if two else "off")
    assert result["cpu"]["kernels"] in result["cpu"]["flags"] or result["cpu"]["kernels"] in (
        "avx2", "avx512vnni", "avxvnni",
    )  # fmt: skip
    assert "avx2" in result["cpu"]["flags"]
    assert "code agreement" in table and "ms/frame" in table and "growth" in table
    assert "integer kernels: " in table and "log-mel distance" in table
    # where decoder_dtype: bfloat16 runs: our bf16 dot products on CPUs with AVX512-BF16
    assert result["cpu"]["bf16_products"] is cpu_kernels().has_bf16dot()
    assert ("bf16 decoder: our bf16 products" in table) is result["cpu"]["bf16_products"]
    assert "less than their sum when the decoder overlaps" in table  # why columns don't add up
    machine = result["machine"]
    assert machine["cpus"] >= 1 and machine["load"] is not None


def test_a_busy_machine_is_said_under_the_table():
    """Figures measured while other processes held the cores say so, with the load average."""
    from ownvoice.bench.common import busy_warning

    assert busy_warning({"load": 0.4, "cpus": 2}) is None
    assert busy_warning({"load": None, "cpus": 2}) is None
    line = busy_warning({"load": 3.2, "cpus": 2})
    assert "busy" in line and "load average 3.2 on 2 usable CPUs" in line


@needs_kernels
def test_bench_compares_decoding_beside_generation_with_one_after_the_other(
    tiny_checkpoints, tmp_path
):
    model = tiny_checkpoints["0.6B-CustomVoice"]
    table, result = bench(
        "--model", str(model), "--frames", "6", "--threads", "2", "--overlap", "on,off",
        tmp_path=tmp_path,
    )  # fmt: skip
    rows = result["rows"]
    assert rows["ownvoice ov on"]["overlap"] == "on" and rows["ownvoice ov off"]["overlap"] == "off"
    assert rows["ownvoice ov on"]["frames"] == rows["ownvoice ov off"]["frames"] == 6
    assert "ownvoice ov on" in table


@needs_kernels
def test_bench_batch_reports_each_size_with_and_without_the_overlap(tiny_checkpoints, tmp_path):
    model = tiny_checkpoints["0.6B-CustomVoice"]
    table, result = bench(
        "--model", str(model), "--frames", "6", "--threads", "2", "--batch", "1,2",
        "--probes", "1", "--quantize", "int8", "--overlap", "on,off", tmp_path=tmp_path,
    )  # fmt: skip
    rows = result["batch_rows"]
    assert [(r["batch"], r["overlap"]) for r in rows] == [
        (1, "on"), (2, "on"), (1, "off"), (2, "off"),
    ]  # fmt: skip
    for r in rows:
        assert r["frames_per_s"] > 0 and r["ttfa_p50_ms"] > 0 and r["dtype"] == "w8a12"
        assert r["frames_per_s"] == pytest.approx(r["batch"] * 6 / (r["rtf"] * 6 * 0.08))
    lines = table.splitlines()
    head = next(i for i, line in enumerate(lines) if "ms/step" in line)
    # "x B=1" is against the B=1 row with the same overlap setting
    for r, line in zip(rows, lines[head + 1 : head + 5], strict=True):
        base = next(b for b in rows if b["batch"] == 1 and b["overlap"] == r["overlap"])
        assert f"{r['frames_per_s'] / base['frames_per_s']:.2f}" in line.split()


@pytest.mark.reference
def test_bench_runs_the_reference_beside_us(tiny_checkpoints, tmp_path):
    from tests.reference import import_reference

    import_reference()  # skips (or fails under OWNVOICE_REQUIRE_REFERENCE) when missing
    model = tiny_checkpoints["0.6B-CustomVoice"]
    table, result = bench(
        "--model", str(model), "--frames", "8", "--compare-reference", tmp_path=tmp_path
    )  # fmt: skip
    ref = result["rows"]["qwen-tts 0.1.1"]
    assert ref["total_ms"] > 0 and ref["frames"] > 0
    assert result["speedup"]["ownvoice"] == pytest.approx(
        ref["total_ms"] / result["rows"]["ownvoice"]["total_ms"]
    )
    assert "faster than qwen-tts 0.1.1" in table


def test_teacher_forcing_reproduces_greedy_codes(tiny_checkpoints):
    """Fed the model's own greedy codes, the forced logits pick those codes again; and an
    engine compared with itself agrees everywhere. A wrong text row or position would not."""
    from ownvoice.bench.quality import mel_distance, quantized_quality
    from ownvoice.engine.engine import Engine
    from ownvoice.engine.options import SamplingOptions, SynthesisOptions

    engine = Engine.load(str(tiny_checkpoints["0.6B-CustomVoice"]), device="cpu", fast=False)
    greedy = SamplingOptions.greedy()
    options = SynthesisOptions(
        language="english", max_frames=12,
        sampling=SamplingOptions(**{**greedy.__dict__, "repetition_penalty": 1.0}),
    )  # fmt: skip
    text = "A short sentence for the check."
    codes = engine.synthesize(text, voice="ryan", options=options).codes
    forced = engine.forced_logits(text, codes, voice="ryan", options=options)
    assert np.array_equal(forced.residual.argmax(-1).numpy(), codes[:, 1:])
    assert np.array_equal(forced.code0[:, :2048].argmax(-1).numpy(), codes[:, 0])
    same = quantized_quality(engine, engine, "int8", frames=6, prompts=(text,))
    assert same.code_agreement == 1 and same.logit_rel_error == 0 and same.mel_distance == 0
    assert same.mel_distance_takes > 0  # two seeds: two takes
    audio = engine.synthesize(text, voice="ryan", options=options).audio
    assert mel_distance(audio, audio) == 0 < mel_distance(audio, audio * 0.5)


def test_bench_shared_times_two_processes_against_a_fair_share(tiny_checkpoints, tmp_path):
    model = str(tiny_checkpoints["0.6B-CustomVoice"])
    out, result = bench("--model", model, "--shared", "--frames", "2", "--tries", "1",
                        "--policies", "ownvoice", tmp_path=tmp_path)  # fmt: skip
    # what it measures is the report's; the test holds its shape (no bound on a time: a busy
    # machine makes the shares uneven, never wrong)
    (r,) = result["shared"]
    assert r["policy"] == "OWNVOICE" and len(r["solo"]) == 2 and len(r["pairs"]) == 1
    assert r["fair"] == [pytest.approx(sum(r["solo"]))]
    assert all(t > 0 for t in r["pairs"][0])
    assert "OWNVOICE" in out and "1 tries" in out
    assert result["quota"] is None  # no --cpus


def test_quota_cgroups_are_made_with_the_limit_asked(tmp_path):
    from ownvoice.bench.shared import make_quota_cgroup
    from ownvoice.threads import _v1, _v2

    (tmp_path / "v1" / "cpu").mkdir(parents=True)
    v1 = make_quota_cgroup(1.5, root=tmp_path / "v1")
    assert v1 is not None and _v1(v1) == 1.5
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "cgroup.controllers").write_text("cpu memory\n")
    v2 = make_quota_cgroup(2, root=tmp_path / "v2")
    assert v2 is not None and _v2(v2 / "cpu.max") == 2.0
    assert make_quota_cgroup(2, root=tmp_path / "nowhere") is None


def test_bench_text_rate_speaks_before_the_first_sentence_is_whole(tiny_checkpoints, tmp_path):
    """--text-rate: at 8 tokens per second the first sentence takes seconds to write; word by
    word, a tiny model speaks long before that, and sentence by sentence only after it."""
    model = tiny_checkpoints["0.6B-CustomVoice"]
    table, rows = bench("--model", str(model), "--text-rate", "8", "--frames", "6",
                        tmp_path=tmp_path)  # fmt: skip
    assert "TTFA from 1st word" in table
    word, sentence = rows
    assert (word["way"], sentence["way"]) == ("word-level", "sentence-level")
    assert word["rate"] == sentence["rate"] == 8
    assert word["frames"] == sentence["frames"] == 6
    assert word["ttfa_s"] < word["first_sentence_s"] < sentence["ttfa_s"]
    assert word["waited_steps"] >= 0 and word["ms_per_frame"] > 0
