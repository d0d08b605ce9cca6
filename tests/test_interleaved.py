"""Cells timed in turns (``bench.interleaved``): each its own process, a failure or a timeout ends that cell alone."""

from __future__ import annotations

from lra_bench.bench import interleaved
from lra_bench.bench.interleaved import Job, run_interleaved
from tests.test_efficiency import attention_payload


def test_cells_in_turns_keep_their_own_results_and_failures():
    good = attention_payload("softmax", 64)  # warmup 1, repeats 2
    good["repeats"] = 4
    broken = attention_payload("softmax", 64)
    broken["config"]["attention"]["no_such_knob"] = 1  # the layer cannot be built: a failed cell
    slow = attention_payload("performer", 64)
    jobs = [Job("good", good, 300), Job("broken", broken, 300), Job("slow", slow, 0.001)]
    results = run_interleaved(jobs, rounds=2)
    ok, failed, timeout = results
    assert ok["status"] == "ok" and ok["repeats"] == 4 and len(ok["durations"]) == 4 and ok["rounds"] == 2
    assert ok["interleaved_with"] == ["broken", "slow"] and ok["peak_delta_bytes"] is not None
    assert ok["machine"]["usable_cores"] >= 1
    assert failed["status"] == "failed" and "no_such_knob" in failed["message"]
    assert timeout["status"] == "timeout"
    assert all(job.proc.poll() is not None for job in jobs)  # no process left behind


def test_every_burst_after_the_first_rewarms_at_least_two_steps(monkeypatch):
    """Parking hands memory back; the heap then takes two steps to regrow, so one untimed step is not enough."""
    asked = []
    real_ask = interleaved._ask

    def spy(job, command):
        asked.append(command)
        return real_ask(job, command)

    monkeypatch.setattr(interleaved, "_ask", spy)
    payload = attention_payload("softmax", 64)  # warmup 1
    payload["repeats"] = 3
    (result,) = run_interleaved([Job("softmax", payload, 300)], rounds=3)
    bursts = [c for c in asked if c and "warmup" in c]
    assert [(c["warmup"], c["repeats"]) for c in bursts] == [(1, 1), (2, 1), (2, 1)]
    assert result["status"] == "ok" and result["rewarm"] == 2 and result["warmup"] == 1
    assert interleaved.rewarm(5) == 5  # a longer warm-up asked for is kept in every burst
