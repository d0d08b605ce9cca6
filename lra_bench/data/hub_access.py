"""Whether the Hugging Face Hub answers, asked once per process within a few seconds.

Offline, ``datasets.load_dataset`` retries every request with back-off (about half a minute, a dozen
warnings) before it fails. ``hub_unreachable`` probes the endpoint once (``HF_ENDPOINT``, default
https://huggingface.co; proxies from the environment are honoured); when it does not answer, the load runs in
``offline_mode``: ``datasets`` then reads its local cache only and fails at once when the dataset is not there.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator

DEFAULT_ENDPOINT = "https://huggingface.co"
PROBE_TIMEOUT_S = 4.0
TRUE = ("1", "on", "yes", "true")


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")


def offline_requested() -> bool:
    """Offline mode is already on (``HF_HUB_OFFLINE=1``, ``HF_DATASETS_OFFLINE=1``, or set in the libraries)."""
    import datasets.config
    from huggingface_hub import constants

    from_env = any(os.environ.get(v, "").strip().lower() in TRUE for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))
    return from_env or bool(constants.HF_HUB_OFFLINE) or bool(datasets.config.HF_HUB_OFFLINE)


def _probe(endpoint: str, answer: list[str | None]) -> None:
    try:
        urllib.request.urlopen(urllib.request.Request(endpoint, method="HEAD"), timeout=PROBE_TIMEOUT_S).close()
        answer.append(None)
    except urllib.error.HTTPError:  # an HTTP status, even an error one, means the Hub is reachable
        answer.append(None)
    except (urllib.error.URLError, OSError, ValueError) as e:
        answer.append(str(getattr(e, "reason", e)))


@functools.cache
def hub_unreachable(endpoint: str) -> str | None:
    """None when ``endpoint`` answers HTTP within ``PROBE_TIMEOUT_S`` (name lookup included); else why not."""
    answer: list[str | None] = []
    probe = threading.Thread(target=_probe, args=(endpoint, answer), daemon=True)  # bounds a slow name lookup
    probe.start()
    probe.join(PROBE_TIMEOUT_S + 1.0)
    return answer[0] if answer else f"no answer within {PROBE_TIMEOUT_S + 1.0:.0f} s"


@contextlib.contextmanager
def offline_mode() -> Iterator[None]:
    """Hub offline mode (as ``HF_HUB_OFFLINE=1``) for this block only: no request is made."""
    import datasets.config
    from huggingface_hub import constants

    saved = datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, constants.HF_HUB_OFFLINE = saved
