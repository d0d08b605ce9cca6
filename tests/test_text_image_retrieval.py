"""Text (byte-level IMDb), Image (grayscale CIFAR-10) and Retrieval (AAN): tokenisation, formats, bad data, runs."""

from __future__ import annotations

import io

import numpy as np
import pytest

from lra_bench.config.plan import plan
from lra_bench.data import bytes as byte_tokens
from lra_bench.data.image import task as image_task
from lra_bench.data.image.task import ImageTask, downsample, grayscale, grayscale_reference
from lra_bench.data.retrieval.fixture import FILES, MARKERS, write_fixture
from lra_bench.data.retrieval.task import RELEASE_URL, RetrievalTask, read_tsv
from lra_bench.data.text import task as text_task
from lra_bench.data.text.task import TextTask
from lra_bench.errors import ConfigError, DataError
from lra_bench.run.runner import run
from tests.conftest import compose_run, shared_data

CIFAR_NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


# --------------------------------------------------------------------------- fixtures in the published formats


def write_imdb_parquet(root, rows: dict[str, list[tuple[str, int]]]):
    """The Hub layout of stanfordnlp/imdb: plain_text/{split}-00000-of-00001.parquet, columns text, label."""
    from datasets import ClassLabel, Dataset, Features, Value

    features = Features({"text": Value("string"), "label": ClassLabel(names=["neg", "pos"])})
    (root / "plain_text").mkdir(parents=True, exist_ok=True)
    for split, items in rows.items():
        ds = Dataset.from_dict({"text": [t for t, _ in items], "label": [y for _, y in items]}, features=features)
        ds.to_parquet(str(root / "plain_text" / f"{split}-00000-of-00001.parquet"))
    return root


def imdb_rows(n: int, seed: int) -> list[tuple[str, int]]:
    rng = np.random.default_rng(seed)
    words = ["good", "bad", "film", "naïve", "plot", "—", "actors", "très", "bien"]
    return [(" ".join(rng.choice(words, size=int(rng.integers(3, 30)))), i % 2) for i in range(n)]


def png(rgb: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG")
    return buf.getvalue()


def write_cifar_parquet(root, images: dict[str, tuple[np.ndarray, np.ndarray]], blobs: dict[str, list] | None = None):
    """The Hub layout of uoft-cs/cifar10: plain_text/{split}-00000-of-00001.parquet, columns img {bytes, path},
    label."""
    from datasets import ClassLabel, Dataset, Features
    from datasets import Image as HFImage

    features = Features({"img": HFImage(), "label": ClassLabel(names=CIFAR_NAMES)})
    (root / "plain_text").mkdir(parents=True, exist_ok=True)
    for split, (rgb, labels) in images.items():
        data = (blobs or {}).get(split) or [png(im) for im in rgb]
        img = [{"bytes": b, "path": f"{split}/{CIFAR_NAMES[y]}/{i:04d}.png"}
               for i, (b, y) in enumerate(zip(data, labels, strict=True))]
        Dataset.from_dict({"img": img, "label": labels.tolist()}, features=features).to_parquet(
            str(root / "plain_text" / f"{split}-00000-of-00001.parquet"))
    return root


def random_images(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, 32, 32, 3), dtype=np.uint8), np.arange(n) % 10


@pytest.fixture
def offline_hub(monkeypatch, tmp_path):
    """No network and empty Hugging Face caches, as on a machine that cannot reach the Hub."""
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf_datasets")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf_hub"))


# --------------------------------------------------------------------------- byte tokenisation


def test_byte_tokenisation_is_bytetextencoder():
    assert byte_tokens.VOCAB_SIZE == 257 and byte_tokens.PAD_ID == 0
    assert byte_tokens.encode("ab").tolist() == [ord("a") + 1, ord("b") + 1]
    assert byte_tokens.encode("é€").tolist() == [0xC3 + 1, 0xA9 + 1, 0xE2 + 1, 0x82 + 1, 0xAC + 1]  # multi-byte
    assert byte_tokens.encode(b"\xff\x00").tolist() == [256, 1]  # raw bytes pass through; 255 -> 256, no overflow
    ids = byte_tokens.encode_batch(["é€x", "", "abc"], max_len=4)
    assert ids.dtype == np.uint16 and ids.shape == (3, 4)
    assert ids[0].tolist() == [0xC4, 0xAA, 0xE3, 0x83]  # truncated mid-character, as LRA truncates bytes
    assert ids[1].tolist() == [0, 0, 0, 0] and ids[2].tolist() == [98, 99, 100, 0]  # padded with 0
    assert byte_tokens.decode(ids[2]) == b"abc"


# --------------------------------------------------------------------------- text


def test_imdb_shared_copy_sizes_balance_and_val_is_test(tmp_path):
    root = shared_data("imdb")
    data = TextTask(data_dir=str(root)).load(tmp_path)
    assert {s: len(y) for s, y in data.labels.items()} == {"train": 25000, "val": 25000, "test": 25000}
    for split in ("train", "test"):
        assert np.bincount(data.labels[split]).tolist() == [12500, 12500]
        assert data.inputs[split].shape == (25000, 1000) and data.inputs[split].dtype == np.uint16
    assert data.inputs["val"] is data.inputs["test"] and data.meta["val_is_test"]
    assert data.inputs["train"].max() <= 256 and (data.inputs["train"][:, 0] > 0).all()


def test_hub_layout_parquet_loads_strips_as_tfds_and_matches_datasets(tmp_path):
    rows = {"train": imdb_rows(40, 0), "test": imdb_rows(20, 1)}
    rows["train"][0] = ("\xa0 Great\tfilm! \n", 1)  # ASCII whitespace stripped, U+00A0 kept (bytes.strip, as TFDS)
    root = write_imdb_parquet(tmp_path / "imdb", rows)
    import datasets

    hf = datasets.load_dataset(str(root), cache_dir=str(tmp_path / "hf"))  # the fixture is the real Hub format
    assert hf["train"][0]["text"] == rows["train"][0][0]
    data = TextTask(data_dir=str(root), max_len=16).load(tmp_path / "cache")
    assert data.meta["layout"] == "parquet" and len(data.labels["train"]) == 40
    assert byte_tokens.decode(data.inputs["train"][0]) == "\xa0 Great\tfilm!".encode()[:16]
    expected = byte_tokens.encode_batch([t.encode().strip() for t, _ in rows["test"]], 16)
    np.testing.assert_array_equal(data.inputs["test"], expected)
    assert data.labels["test"].tolist() == [y for _, y in rows["test"]]


def test_text_validation_subset_is_drawn_from_the_test_subset(tmp_path):
    """Issue 46: task.max_val_examples evaluates validation on a seeded subset of the (possibly full) test split,
    so a large test set does not multiply the cost of every validation pass; unset, val is the test set (LRA)."""
    root = write_imdb_parquet(tmp_path / "imdb", {"train": imdb_rows(40, 0), "test": imdb_rows(60, 1)})
    full = TextTask(data_dir=str(root), max_len=16).load(tmp_path / "cache")
    assert full.inputs["val"] is full.inputs["test"] and full.meta["val_is_test"]
    data = TextTask(data_dir=str(root), max_len=16, max_val_examples=25).load(tmp_path / "cache")
    assert len(data.labels["test"]) == 60 and len(data.labels["val"]) == 25 and not data.meta["val_is_test"]
    test_rows = {row.tobytes(): y for row, y in zip(data.inputs["test"], data.labels["test"], strict=True)}
    assert all(test_rows[row.tobytes()] == y for row, y in zip(data.inputs["val"], data.labels["val"], strict=True))
    again = TextTask(data_dir=str(root), max_len=16, max_val_examples=25).load(tmp_path / "cache")
    np.testing.assert_array_equal(again.inputs["val"], data.inputs["val"])  # seeded: the same subset every run
    other = TextTask(data_dir=str(root), max_len=16, max_val_examples=25, subset_seed=1).load(tmp_path / "cache")
    assert not np.array_equal(other.inputs["val"], data.inputs["val"])
    assert data.meta["subset"]["max_val_examples"] == 25 and "max_val_examples" not in full.meta["subset"]


def test_text_validation_subset_larger_than_the_test_subset_is_refused():
    with pytest.raises(ConfigError, match="max_val_examples=500 is larger than task.max_eval_examples=100"):
        TextTask(source="synthetic", max_eval_examples=100, max_val_examples=500)
    with pytest.raises(ConfigError, match="max_val_examples=0 is out of range"):
        TextTask(source="synthetic", max_val_examples=0)


def test_aclimdb_folder_layout(tmp_path):
    base = tmp_path / "download" / "aclImdb"
    texts = {}
    for split in ("train", "test"):
        for folder, label in (("neg", 0), ("pos", 1)):
            (base / split / folder).mkdir(parents=True)
            for i in range(3):
                text = f"{split} {folder} review {i}: très {'bien' if label else 'mal'}"
                (base / split / folder / f"{i}_{7 if label else 2}.txt").write_bytes((text + "\n").encode())
                texts[(split, label, i)] = text
    data = TextTask(data_dir=str(tmp_path / "download"), max_len=64).load(tmp_path / "cache")  # parent of aclImdb
    assert data.meta["layout"] == "aclimdb"
    assert data.labels["train"].tolist() == [0, 0, 0, 1, 1, 1]
    assert byte_tokens.decode(data.inputs["test"][3]) == texts[("test", 1, 0)].encode()  # newline stripped


def test_text_cache_is_reused_and_subsets_are_seeded(tmp_path, monkeypatch):
    root = write_imdb_parquet(tmp_path / "imdb", {"train": imdb_rows(50, 0), "test": imdb_rows(30, 1)})
    first = TextTask(data_dir=str(root), max_len=32).load(tmp_path / "cache")
    assert not first.reused

    def boom(*args, **kwargs):
        raise AssertionError("re-read although cached")

    monkeypatch.setattr(text_task, "read_parquet", boom)
    task = TextTask(data_dir=str(root), max_len=32, max_train_examples=20, max_eval_examples=10, subset_seed=3)
    second = task.load(tmp_path / "cache")
    assert second.reused and second.meta["fingerprint"] == first.meta["fingerprint"]
    assert (len(second.labels["train"]), len(second.labels["val"]), len(second.labels["test"])) == (20, 10, 10)
    again = task.load(tmp_path / "cache")
    np.testing.assert_array_equal(again.inputs["train"], second.inputs["train"])
    rows = {tuple(r) for r in first.inputs["train"].tolist()}
    assert all(tuple(r) in rows for r in second.inputs["train"].tolist())  # a subset of the real rows


def test_text_bad_files_name_the_file(tmp_path):
    good = write_imdb_parquet(tmp_path / "good", {"train": imdb_rows(8, 0), "test": imdb_rows(8, 1)})
    # truncated parquet
    bad = write_imdb_parquet(tmp_path / "trunc", {"train": imdb_rows(8, 0), "test": imdb_rows(8, 1)})
    path = bad / "plain_text" / "test-00000-of-00001.parquet"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DataError, match=r"(?s)test-00000-of-00001\.parquet.*truncated"):
        TextTask(data_dir=str(bad)).load(tmp_path / "c1")
    # wrong columns
    import pyarrow as pa
    import pyarrow.parquet as pq

    wrong = tmp_path / "wrong" / "plain_text"
    wrong.mkdir(parents=True)
    for split in ("train", "test"):
        pq.write_table(pa.table({"review": ["x"], "label": [0]}), wrong / f"{split}-00000-of-00001.parquet")
    with pytest.raises(DataError, match=r"train-00000-of-00001\.parquet has columns \['review', 'label'\]"):
        TextTask(data_dir=str(wrong.parent)).load(tmp_path / "c2")
    # invalid UTF-8 in an aclImdb review
    for split in ("train", "test"):
        for folder in ("pos", "neg"):
            (tmp_path / "acl" / split / folder).mkdir(parents=True)
            (tmp_path / "acl" / split / folder / "0_1.txt").write_bytes(b"fine")
    (tmp_path / "acl" / "test" / "pos" / "0_1.txt").write_bytes(b"caf\xe9 latin-1")
    with pytest.raises(DataError, match=r"test/pos/0_1\.txt is not valid UTF-8"):
        TextTask(data_dir=str(tmp_path / "acl")).load(tmp_path / "c3")
    # neither layout, caught before any training
    with pytest.raises(DataError, match="neither the Hugging Face layout"):
        TextTask(data_dir=str(tmp_path / "acl" / "train")).check_source()
    assert TextTask(data_dir=str(good)).load(tmp_path / "c4").labels["train"].shape == (8,)


def test_offline_hub_names_dataset_and_data_dir(tmp_path, offline_hub):
    with pytest.raises(DataError) as e:
        TextTask(source="hub").load(tmp_path)
    assert "stanfordnlp/imdb" in str(e.value) and "https://huggingface.co/datasets/stanfordnlp/imdb" in str(e.value)
    assert "task.data_dir" in str(e.value) and "ConnectionError" in str(e.value)
    with pytest.raises(DataError, match=r"uoft-cs/cifar10.*task\.data_dir"):
        ImageTask().load(tmp_path)  # auto without data_dir = hub


def test_hub_code_path_on_local_copies(tmp_path, monkeypatch):
    """source=hub goes through datasets.load_dataset; pointed at local copies it gives what source=files gives."""
    import datasets.config

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf_datasets")
    imdb = write_imdb_parquet(tmp_path / "imdb", {"train": imdb_rows(12, 0), "test": imdb_rows(6, 1)})
    cifar = write_cifar_parquet(tmp_path / "cifar10", {"train": random_images(10, 0), "test": random_images(4, 1)})
    monkeypatch.setattr(text_task, "HUB_DATASET", str(imdb))
    monkeypatch.setattr(image_task, "HUB_DATASET", str(cifar))
    for task, files in ((TextTask(source="hub", max_len=32), TextTask(data_dir=str(imdb), max_len=32)),
                        (ImageTask(source="hub"), ImageTask(data_dir=str(cifar)))):
        hub, local = task.load(tmp_path / "cache"), files.load(tmp_path / "cache")
        assert hub.meta["source"] == "hub" and local.meta["source"] == "files"
        for split in ("train", "val", "test"):
            np.testing.assert_array_equal(hub.inputs[split], local.inputs[split])
            np.testing.assert_array_equal(hub.labels[split], local.labels[split])


# --------------------------------------------------------------------------- image


def test_grayscale_is_tf_rgb_to_grayscale_on_uint8():
    # hand computation: gray = 0.2989 r + 0.5870 g + 0.1140 b on x / 255, then truncate(gray * 255.5)
    pixels = np.array([[0, 0, 0], [255, 255, 255], [255, 0, 0], [0, 255, 0], [0, 0, 255], [100, 150, 200]],
                      dtype=np.uint8)
    # 0.2989*255.5 = 76.37 -> 76; 0.587*255.5 = 149.98 -> 149 (rounding would give 150); 0.114*255.5 = 29.13 -> 29;
    # (0.2989*100 + 0.587*150 + 0.114*200) / 255 * 255.5 = 141.02 -> 141; white: 0.9999*255.5 = 255.47 -> 255
    assert grayscale(pixels).tolist() == [0, 255, 76, 149, 29, 141]
    rgb = np.random.default_rng(0).integers(0, 256, size=(4, 32, 32, 3), dtype=np.uint8)
    np.testing.assert_array_equal(grayscale(rgb), grayscale_reference(rgb))
    assert downsample(np.array([[1, 2, 3, 5] * 256], dtype=np.uint8), 2)[0, :2].tolist() == [2, 4]


def test_cifar_shared_copy_split_sizes_and_balance(tmp_path):
    root = shared_data("cifar10")
    data = ImageTask(data_dir=str(root)).load(tmp_path)
    assert {s: len(y) for s, y in data.labels.items()} == {"train": 45000, "val": 5000, "test": 10000}
    assert np.bincount(data.labels["test"]).tolist() == [1000] * 10
    assert np.bincount(data.labels["train"], minlength=10).sum() == 45000
    assert data.inputs["train"].shape == (45000, 1024) and data.inputs["train"].dtype == np.uint8
    seeded = ImageTask(data_dir=str(root), split_seed=1).load(tmp_path)
    assert seeded.reused and len(seeded.labels["val"]) == 5000
    assert not np.array_equal(seeded.labels["val"], data.labels["val"])  # a different 5k, same cache


def test_cifar_hub_layout_parquet_split_and_pixels(tmp_path):
    train, test = random_images(20, 0), random_images(10, 1)
    root = write_cifar_parquet(tmp_path / "cifar10", {"train": train, "test": test})
    data = ImageTask(data_dir=str(root)).load(tmp_path / "cache")
    assert {s: len(y) for s, y in data.labels.items()} == {"train": 18, "val": 2, "test": 10}
    expected = grayscale_reference(train[0]).reshape(20, 1024)
    np.testing.assert_array_equal(data.inputs["train"], expected[:18])  # contiguous split, as train[:90%]
    np.testing.assert_array_equal(data.inputs["val"], expected[18:])
    assert data.labels["test"].tolist() == test[1].tolist()
    again = ImageTask(data_dir=str(root), split_seed=0).load(tmp_path / "cache")
    assert again.reused and sorted(again.labels["train"].tolist() + again.labels["val"].tolist()) == sorted(
        train[1].tolist())
    small = ImageTask(data_dir=str(root), downsample=4, max_len=64).load(tmp_path / "cache")
    assert small.inputs["test"].shape == (10, 64)


def test_cifar_corrupt_image_and_bad_config_are_clear(tmp_path):
    train, test = random_images(5, 0), random_images(5, 1)
    blobs = {"test": [png(im) for im in test[0]]}
    blobs["test"][3] = b"\x89PNG not really an image"
    root = write_cifar_parquet(tmp_path / "cifar10", {"train": train, "test": test}, blobs)
    with pytest.raises(DataError, match=r"test-00000-of-00001\.parquet, row 3 \(test/cat/0003\.png\): image cannot"):
        ImageTask(data_dir=str(root)).load(tmp_path / "cache")
    with pytest.raises(ConfigError, match="max_len must be 1024"):
        ImageTask(max_len=1000)
    with pytest.raises(DataError, match="no train-\\*.parquet or test-\\*.parquet"):
        ImageTask(data_dir=str(tmp_path)).check_source()


# --------------------------------------------------------------------------- retrieval


def test_fixture_round_trip_in_the_exact_tsv_format(tmp_path):
    out = write_fixture(tmp_path / "aan", sizes=(40, 10, 10), seed=1, topics=3, doc_bytes=200)
    lines = (out / FILES["train"]).read_bytes().decode().splitlines()
    assert len(lines) == 40
    for line in lines:
        label, id1, id2, text1, text2 = line.split("\t")  # exactly 5 columns, no header
        assert label in ("0.0", "1.0") and id1 != id2
        topic = {m for m in MARKERS if m in text1.split()} | {m for m in MARKERS if m in text2.split()}
        assert (len(topic) == 1) == (label == "1.0")  # label 1 iff the two documents share the topic word
    task = RetrievalTask(data_dir=str(out), max_len=64)
    data = task.load(tmp_path / "cache")
    assert data.inputs["train"].shape == (40, 2, 64) and data.inputs["train"].dtype == np.uint16
    assert np.bincount(data.labels["train"]).tolist() == [20, 20]
    fields = lines[0].split("\t")
    assert data.labels["train"][0] == int(float(fields[0]))
    assert byte_tokens.decode(data.inputs["train"][0, 1]) == fields[4].encode()[:64]
    assert task.load(tmp_path / "cache").reused


def test_retrieval_cuts_raw_texts_to_10000_bytes_then_max_len(tmp_path):
    path = tmp_path / "pairs.tsv"
    long = "é" * 6000  # 12,000 bytes
    path.write_bytes(f'1.0\ta\tb\t{long}\t"quoted" text\r\n0.0\tc\td\tx\ty'.encode())  # CRLF, no final newline
    ids, labels, stats = read_tsv(path, max_len=12000)
    assert labels.tolist() == [1, 0] and stats["rows"] == 2
    assert (ids[0, 0] > 0).sum() == 10000  # LRA: s[:10000] before encoding
    assert byte_tokens.decode(ids[0, 1]) == b'"quoted" text'  # quotes are ordinary characters


def test_retrieval_malformed_rows_and_missing_files(tmp_path):
    out = write_fixture(tmp_path / "aan", sizes=(6, 4, 4))
    path = out / FILES["eval"]
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "1.0\tonly\tfour\tcolumns", *lines[2:]]) + "\n")
    with pytest.raises(DataError, match=r"new_aan_pairs\.eval\.tsv:2: expected 5 tab-separated columns"):
        RetrievalTask(data_dir=str(out)).load(tmp_path / "c1")
    path.write_text("\n".join(["2.0" + lines[0][3:], *lines[1:]]) + "\n")
    with pytest.raises(DataError, match=r"new_aan_pairs\.eval\.tsv:1: label b'2\.0'"):
        RetrievalTask(data_dir=str(out)).load(tmp_path / "c2")
    (out / FILES["test"]).unlink()
    with pytest.raises(DataError) as e:
        RetrievalTask(data_dir=str(out)).check_source()
    assert "new_aan_pairs.test.tsv" in str(e.value) and RELEASE_URL in str(e.value)
    assert "lra_release/tsv_data/" in str(e.value) and "retrieval.fixture" in str(e.value)
    with pytest.raises(DataError, match="no Hub copy"):
        RetrievalTask().check_source()
    with pytest.raises(ConfigError, match="interaction"):
        RetrievalTask(interaction="dot")


# --------------------------------------------------------------------------- synthetic data, configs, runs


@pytest.mark.parametrize(("task", "shape", "dtype", "low"), [
    (TextTask(source="synthetic", max_len=32), (32,), np.uint16, 1),
    (ImageTask(source="synthetic"), (1024,), np.uint8, 0),
    (RetrievalTask(source="synthetic", max_len=24), (2, 24), np.uint16, 1),
])
def test_synthetic_shapes(task, shape, dtype, low, tmp_path):
    data = task.load(tmp_path)
    for split, n in zip(("train", "val", "test"), task.synthetic_sizes, strict=True):
        x = data.inputs[split]
        assert x.shape == (n, *shape) and x.dtype == dtype and x.max() < task.vocab_size
        assert data.labels[split].max() < task.num_classes
    assert data.meta["synthetic"] and data.inputs["train"][..., 0].min() >= low


@pytest.mark.parametrize("profile", ["smoke", "cpu", "quick", "small", "paper"])
def test_every_profile_composes_and_builds(profile, tmp_path):
    fixture = write_fixture(tmp_path / "aan", sizes=(4, 2, 2))
    for task, extra in (("listops", []), ("pathfinder", []), ("text", []), ("image", []),
                        ("retrieval", [f"task.data_dir={fixture}"])):
        p = plan(compose_run([f"task={task}", f"profile={profile}", *extra], tmp_path))
        assert p.task.name == task
    assert p.task.interaction == ("nli" if profile == "small" else "concat")


@pytest.mark.parametrize("task", ["text", "image", "retrieval"])
def test_smoke_run_in_process(task, tmp_path):
    record = run(compose_run([f"task={task}", "profile=smoke", "task.source=synthetic"], tmp_path))
    assert record["status"] == "ok" and record["synthetic"] and record["test_acc"] is not None


def test_smoke_runs_on_published_formats(tmp_path):
    fixture = write_fixture(tmp_path / "aan", sizes=(64, 16, 16))
    record = run(compose_run(["task=retrieval", "profile=smoke", f"task.data_dir={fixture}"], tmp_path))
    assert record["status"] == "ok" and not record["synthetic"] and record["examples"]["train"] == 64
    imdb = write_imdb_parquet(tmp_path / "imdb", {"train": imdb_rows(48, 0), "test": imdb_rows(32, 1)})
    record = run(compose_run(["task=text", "profile=smoke", f"task.data_dir={imdb}"], tmp_path))
    assert record["status"] == "ok" and record["dataset_source"] == "files" and record["val_examples"] == 32


def test_image_hub_split_names_are_checked(tmp_path, monkeypatch):
    """load_hub turns a Hub dataset without the expected split into a DataError (no network needed)."""
    import datasets

    monkeypatch.setattr(datasets, "load_dataset", lambda name: {"train": None})
    with pytest.raises(DataError, match="has splits \\['train'\\], not 'test'"):
        image_task.load_hub("uoft-cs/cifar10", ("train", "test"), ("img", "label"), "hint")


def test_quick_profile_sizes_its_test_sets_for_power(tmp_path):
    """Issue 46 item 3: image on LRA's full 5k/10k splits; text on its full 25,000-review test split with a 2,000-
    review validation subset (the full split adds about 13 % to a 2,000-step run); ListOps and Pathfinder with
    >= 10,000 generated test examples; every budget at the budget study's plateau (4x the 500-600 steps before)."""
    tasks = {t: plan(compose_run([f"task={t}", "profile=quick"], tmp_path)) for t in
             ("listops", "text", "image", "pathfinder")}
    image, text = tasks["image"].task, tasks["text"].task
    assert image.max_eval_examples is None and text.max_eval_examples is None and text.max_val_examples == 2000
    generator = tasks["listops"].task.generator
    assert generator["num_test"] >= 10_000 and generator["num_val"] >= 5_000
    assert tasks["pathfinder"].task.num_images // 10 >= 10_000  # the 80/10/10 split's test tenth
    assert {t: p.trainer.max_steps for t, p in tasks.items() if t != "pathfinder"} == {
        "listops": 2400, "text": 2000, "image": 2400}
