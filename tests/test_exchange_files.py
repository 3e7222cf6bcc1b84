"""The shuffle through files (sdc_tasks.exchange_files): each destination reads exactly the rows bound to it, in
the senders' order and each sender's row order, empty batches included, numbers and text alike."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sdc_tasks.exchange_files import read_batches, write_batches


def test_each_destination_reads_its_rows_in_order(tmp_path):
    rng = np.random.default_rng(4)
    count = 6  # destination 5 never receives a row
    senders = []
    for i, n in enumerate([50, 0, 1, 77]):
        frame = pd.DataFrame({"value": rng.normal(size=n), "pos": np.arange(n, dtype=np.int64) + 100 * i,
                              "label": np.array([f"r{i}-{k}" for k in range(n)], dtype=object)})
        senders.append((frame, rng.integers(0, count - 1, n), tmp_path / f"sender-{i}.arrow"))
    for frame, destinations, path in senders:
        assert write_batches(frame, destinations, count, path) == len(frame)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"sender-{i}.arrow" for i in range(4)]  # no partial file
    for j in range(count):
        got = read_batches([path for _, _, path in senders], j)
        expected = pd.concat([frame[destinations == j] for frame, destinations, _ in senders], ignore_index=True)
        pd.testing.assert_frame_equal(got, expected.astype({"pos": "int64"}), check_exact=True)
    assert read_batches([path for _, _, path in senders], count - 1).empty


def test_a_rewritten_file_replaces_the_first_whole(tmp_path):
    path = tmp_path / "sender.arrow"
    write_batches(pd.DataFrame({"x": np.arange(10.0)}), np.zeros(10, np.int64), 2, path)
    write_batches(pd.DataFrame({"x": np.arange(3.0)}), np.array([1, 1, 0]), 2, path)
    assert read_batches([path], 0)["x"].tolist() == [2.0]
    assert read_batches([path], 1)["x"].tolist() == [0.0, 1.0]
