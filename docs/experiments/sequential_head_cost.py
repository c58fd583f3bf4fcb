"""What would sequential_head.py's head cost in a drafted iteration on this CPU?  (issue 12)

Microbenchmark, one thread, the demo drafter's shapes (states of width 256, the 3,456-entry draft vocabulary stored
as float16 and multiplied through fbgemm as the drafter cache does, k = 10), random weights: the block drafter's
output (one 10-row product, then argmax) against the head drafting the block's tokens one after another, either
through the whole draft vocabulary each step or among the 8 best tokens of the block's own logits at that position
(one 10-row product first; a cheaper, approximate variant whose drafts can differ from the full head's).  In ms per
drafted block.

    python docs/experiments/sequential_head_cost.py      # pause background work first
"""
import time
import warnings

import torch
from torch import nn

warnings.simplefilter("ignore")  # fbgemm's float16 product is deprecated (torch 2.13 is pinned)
torch.set_num_threads(1)
WIDTH, VOCAB, K, CANDIDATES = 256, 3456, 10, 8

states = torch.randn(K, WIDTH)  # the block's query states
embeddings = torch.randn(8008, WIDTH)
inner, outer = nn.Linear(2 * WIDTH, WIDTH), nn.Linear(WIDTH, WIDTH)
weight = torch.randn(VOCAB, WIDTH).half().float()
packed, zeros = torch.fbgemm_pack_gemm_matrix_fp16(weight), torch.zeros(VOCAB)
banned = torch.tensor([0, 1, 2, 3])


def output_layer(x):
    return torch.fbgemm_linear_fp16_weight(x, packed, zeros).index_fill_(-1, banned, float("-inf"))


def head(x, previous):
    return x + outer(torch.relu(inner(torch.cat([x, embeddings[previous]], dim=-1))))


def block():
    return output_layer(states).argmax(-1)


def head_whole_vocabulary():
    previous, drafted = torch.tensor(5), []
    for j in range(K):
        previous = output_layer(head(states[j:j + 1], previous.view(1)))[0].argmax()
        drafted.append(previous)
    return torch.stack(drafted)


def head_among_block_candidates():
    candidates = output_layer(states).topk(CANDIDATES, dim=-1).indices  # (K, 8)
    candidate_weights = weight[candidates]  # (K, 8, C)
    previous, drafted = torch.tensor(5), []
    for j in range(K):
        x = head(states[j], previous)
        previous = candidates[j, (candidate_weights[j] @ x).argmax()]
        drafted.append(previous)
    return torch.stack(drafted)


def milliseconds(f, n=500):
    for _ in range(30):
        f()
    start = time.perf_counter()
    for _ in range(n):
        f()
    return (time.perf_counter() - start) / n * 1e3


with torch.inference_mode():
    for name, f in (("block drafter's output", block), ("head, whole vocabulary each step", head_whole_vocabulary),
                    (f"head among the block's {CANDIDATES} best", head_among_block_candidates)):
        print(f"{name}: {milliseconds(f):.3f} ms a block")
