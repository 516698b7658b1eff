"""The multi-turn sessions the real-vLLM replay tests send."""

from __future__ import annotations

from traces import Request, Session

BS = 128
VOCAB = 2048
# (prompt_tokens, output_tokens) per turn; each turn's prompt = previous prompt +
# previous output + new tokens. Outputs of 140 fill at least one whole new block.
TURNS = ((300, 140), (670, 140), (1060, 100))
SHARED = 2  # leading blocks of turn 0 common to both sessions (salt 0)
SECOND_ARRIVAL_S = 1.5  # session b starts once session a's first prompt is cached


def session(name: str, first_id: int) -> Session:
    reqs: list[Request] = []
    prev_p = prev_o = 0
    next_id = first_id
    for turn, (p, o) in enumerate(TURNS):
        prefix = prev_p // BS
        n_new = (p - 1) // BS + 1 - prefix
        if turn == 0:
            ids = (1, 2, *range(next_id, next_id + n_new - SHARED))
        else:
            ids = tuple(range(next_id, next_id + n_new))
        next_id += n_new
        reqs.append(Request(
            prompt_tokens=p, output_tokens=o, prefix_blocks=prefix, new_block_ids=ids,
            shared_blocks=SHARED if turn == 0 else 0, think_time_s=0.0 if turn == 0 else 0.3,
            arrival_s=(0.0 if name == "a" else SECOND_ARRIVAL_S) if turn == 0 else None,
        ))
        assert prev_p + prev_o < p, "each prompt must extend the previous context"
        prev_p, prev_o = p, o
    return Session(id=name, requests=tuple(reqs))
