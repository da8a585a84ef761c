"""Compute factories for the CPU tests of ``CommSpec(compute=...)``: each records what the rank called it with."""

from __future__ import annotations

CALLS: list[dict] = []


def step(device=0, stream=None, sm_count=None, width=4):
    """A user step: records its call and returns a callable fn(*, stream) that records its launches."""
    CALLS.append({"factory": "step", "device": device, "stream": stream, "sm_count": sm_count, "width": width})
    launched = []

    def run(*, stream):
        launched.append(stream)

    run.launched = launched
    return run


def fails_on_a_partition(device=0, sm_count=None):
    """Builds on the whole GPU, raises on any smaller partition (as a step that does not fit would)."""
    CALLS.append({"factory": "fails_on_a_partition", "device": device, "sm_count": sm_count})
    if sm_count is not None and sm_count < 132:
        raise RuntimeError(f"this step needs the whole GPU, got {sm_count} SMs")
    return lambda *, stream: None


def with_comm(device=0, comm=None):
    """A step running its own collectives: declares the communicator it enqueues on."""
    CALLS.append({"factory": "with_comm", "device": device, "comm": comm})

    def run(*, stream):
        pass

    run.communicators = (comm,)
    return run


def needs_x(x):
    return x


NOT_A_FUNCTION = 3
