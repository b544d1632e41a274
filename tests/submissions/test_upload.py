"""Every kind of bad upload is rejected with its own message; good ones give sources."""

from __future__ import annotations

import gc
import sys
import threading
from collections import Counter

import pytest

from submissions.upload import UploadLimits, UploadRejected, read_upload
from tests.uploads import make_tgz, make_zip

OPERATORS = {"rms_norm", "gemm_fp16"}
GOOD = b"import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def reject(filename: str, data: bytes, match: str, **kwargs: object) -> None:
    with pytest.raises(UploadRejected, match=match):
        read_upload(filename=filename, data=data, operators=OPERATORS, **kwargs)  # type: ignore[arg-type]


def test_a_single_file_for_a_chosen_operator_is_accepted() -> None:
    assert read_upload(filename="mine.py", data=GOOD, operators=OPERATORS,
                       operator="rms_norm") == {"rms_norm": GOOD.decode()}


def test_a_single_file_named_after_its_operator_is_accepted() -> None:
    assert set(read_upload(filename="gemm_fp16.py", data=GOOD, operators=OPERATORS)) == {"gemm_fp16"}


def test_zip_and_tar_gz_archives_give_one_source_per_operator() -> None:
    entries = [("rms_norm.py", GOOD), ("gemm_fp16.py", GOOD.replace(b"Model", b"ModelNew"))]
    for filename, data in (("a.zip", make_zip(entries)), ("a.tar.gz", make_tgz(entries)),
                           ("a.tgz", make_tgz(entries))):
        sources = read_upload(filename=filename, data=data, operators=OPERATORS)
        assert set(sources) == OPERATORS and "class ModelNew" in sources["gemm_fp16"]


def test_an_unknown_operator_is_named() -> None:
    reject("nope.py", GOOD, "no operator named 'nope'.*gemm_fp16, rms_norm")
    reject("a.zip", make_zip([("nope.py", GOOD)]), "no operator named 'nope'")


def test_a_refusal_of_a_file_uploaded_for_a_chosen_operator_names_the_uploaded_file() -> None:
    # the file is evaluated as rms_norm.py, but the team knows it as mine.py
    reject("mine.py", b"class Model(:\n", r"^mine\.py \(as rms_norm\.py\): syntax error on line 1",
           operator="rms_norm")
    reject("mine.py", GOOD, r"^mine\.py \(as nope\.py\): no operator named 'nope'",
           operator="nope")
    reject("mine.py", b"class Kernel:\n    pass\n", r"^mine\.py \(as rms_norm\.py\) defines no class",
           operator="rms_norm")


def test_text_that_is_not_utf8_is_rejected() -> None:
    reject("rms_norm.py", b"x = '\xff\xfe'\n", "not UTF-8")


def test_a_syntax_error_gives_the_line() -> None:
    reject("rms_norm.py", b"class Model(:\n", "syntax error on line 1")


def test_a_file_without_model_is_rejected() -> None:
    reject("rms_norm.py", b"class Kernel:\n    pass\n", "defines no class Model")


@pytest.mark.parametrize("name", ["../rms_norm.py", "x/../../rms_norm.py"])
def test_path_traversal_is_rejected(name: str) -> None:
    reject("a.zip", make_zip([(name, GOOD)]), r"'\.\.'")
    reject("a.tar.gz", make_tgz([(name, GOOD)]), r"'\.\.'")


def test_absolute_paths_are_rejected() -> None:
    reject("a.zip", make_zip([("/tmp/rms_norm.py", GOOD)]), "absolute paths")
    reject("a.tar.gz", make_tgz([("/tmp/rms_norm.py", GOOD)]), "absolute paths")


def test_symlinks_are_rejected() -> None:
    reject("a.zip", make_zip([("rms_norm.py", GOOD)], symlink="gemm_fp16.py"), "symbolic links")
    reject("a.tar.gz", make_tgz([("rms_norm.py", GOOD)], symlink="gemm_fp16.py"), "links")


def test_folders_are_rejected() -> None:
    reject("a.zip", make_zip([("sub/rms_norm.py", GOOD)]), "top level")
    reject("a.tar.gz", make_tgz([], directory="sub"), "folders")


def test_nested_archives_are_rejected() -> None:
    reject("a.zip", make_zip([("inner.zip", make_zip([("rms_norm.py", GOOD)]))]),
           "archives inside archives")
    reject("a.tar.gz", make_tgz([("inner.tar.gz", b"x")]), "archives inside archives")


def test_decompression_bombs_are_stopped_before_they_expand() -> None:
    bomb = b"#" * (50 * 1024 * 1024)
    reject("a.zip", make_zip([("rms_norm.py", bomb)]), "limit is 1048576 bytes")
    reject("a.tar.gz", make_tgz([("rms_norm.py", bomb)]), "decompression bomb")


def test_a_zip_that_lies_about_its_size_is_still_capped() -> None:
    data = bytearray(make_zip([("rms_norm.py", b"#" * 4096)]))
    # Patch the declared uncompressed size in both headers down to 10 bytes.
    local = data.find(b"PK\x03\x04")
    central = data.find(b"PK\x01\x02")
    data[local + 22:local + 26] = (10).to_bytes(4, "little")
    data[central + 24:central + 28] = (10).to_bytes(4, "little")
    limits = UploadLimits(max_file_bytes=1000)
    with pytest.raises(UploadRejected):
        read_upload(filename="a.zip", data=bytes(data), operators=OPERATORS, limits=limits)


def test_duplicate_names_are_rejected() -> None:
    reject("a.zip", make_zip([("rms_norm.py", GOOD), ("rms_norm.py", GOOD)]), "appears twice")
    reject("a.tar.gz", make_tgz([("rms_norm.py", GOOD), ("rms_norm.py", GOOD)]), "appears twice")


def test_empty_archives_are_rejected() -> None:
    reject("a.zip", make_zip([]), "holds no files")
    reject("a.tar.gz", make_tgz([]), "holds no files")


def test_size_and_count_limits_apply() -> None:
    limits = UploadLimits(max_file_bytes=100, max_files=1, max_total_bytes=150)
    reject("rms_norm.py", GOOD + b"#" * 100, "limit is 100 bytes", limits=limits)
    reject("a.zip", make_zip([("rms_norm.py", b"class Model: pass\n"),
                              ("gemm_fp16.py", b"class Model: pass\n")]),
           "more than 1 files", limits=limits)
    two = UploadLimits(max_file_bytes=100, max_files=2, max_total_bytes=150)
    reject("a.zip", make_zip([("rms_norm.py", b"class Model: pass\n" + b"#" * 80),
                              ("gemm_fp16.py", b"class Model: pass\n" + b"#" * 80)]),
           "beyond 150 bytes in all", limits=two)


def test_other_file_types_and_damaged_archives_are_rejected() -> None:
    reject("kernel.cu", b"__global__ void k() {}", "upload a .py file")
    reject("a.zip", b"not a zip", "damaged")
    reject("a.tar.gz", b"not gzip", "damaged")
    reject("a.zip", make_zip([("notes.txt", b"hi")]), "only <operator>.py files")


# Sources CPython cannot parse: the parser's stack overflows (MemoryError) or building the
# tree recurses too far (RecursionError), or the nesting limit is a SyntaxError.
TOO_DEEP = {
    "parentheses": "(" * 100000 + ")" * 100000,
    "unary minus": "-" * 200000 + "1",
    "brackets": "[" * 5000,
    "a long chain": "x = " + "+".join(["1"] * 200000),
    "attributes": "a" + ".a" * 200000,
}


@pytest.mark.parametrize("source", TOO_DEEP.values(), ids=TOO_DEEP.keys())
def test_a_deeply_nested_source_is_rejected_not_crashed(source: str) -> None:
    reject("rms_norm.py", source.encode(), "nested too deeply|too many nested parentheses")
    reject("a.zip", make_zip([("rms_norm.py", source.encode())]),
           "nested too deeply|too many nested parentheses")


def test_parallel_uploads_parse_cleanly_while_the_garbage_collector_runs() -> None:
    """Eight threads parse at once while collections run finalizers that switch threads:
    without one parse at a time, CPython 3.11 raises "AST constructor recursion depth
    mismatch" (a SystemError) for some of them."""

    class Cycle:
        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            sum(range(50))  # Python code in a collection: the interpreter may switch threads

    nested = "(" * 50 + "1" + ")" * 50
    source = GOOD + f"x = {nested}\ny = [{', '.join(['{1: [2, (3, 4)]}'] * 300)}]\n".encode()
    outcomes: Counter[str] = Counter()

    def uploads() -> None:
        for _ in range(50):
            Cycle()
            try:
                read_upload(filename="rms_norm.py", data=source, operators=OPERATORS)
                outcomes["accepted"] += 1
            except UploadRejected as exc:
                outcomes[f"rejected: {exc}"] += 1

    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(1e-6)
    gc.set_threshold(50, 1, 1)
    try:
        threads = [threading.Thread(target=uploads) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*thresholds)
    assert outcomes == {"accepted": 8 * 50}
