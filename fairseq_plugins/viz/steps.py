"""What happened at each iteration of one sentence, read from the core's kept trace.

The core records per iteration a ``TraceStep``: the drafts d_1..d_k, the verifier's
choice after each drafted prefix (k+1 tokens), how many tokens became final, and the
verifier's probabilities.  With the sentence's final output this tells, for every
iteration, which drafts were accepted (also by the SpecDec++ relaxation), where the
bifurcation was and which output positions became final.
"""
from dataclasses import dataclass
from typing import List, Optional, Union

from fairseq_plugins.decoding.stats import TraceStep


@dataclass
class SentenceTrace:
    """One decoded sentence: ``source`` and ``output`` token ids (no pad; the output ends
    with EOS, as fairseq's hypothesis ``tokens``) and its iterations; ``source_text`` is
    the source as the source dictionary spells it (None: spelled with the target's)."""

    sentence_id: Union[int, str]
    source: List[int]
    output: List[int]
    steps: List[TraceStep]
    source_text: Optional[str] = None


@dataclass
class StepView:
    """One iteration, in the SpecDec paper's terms (block index j: 0-based).

    start: output tokens final before this iteration (the drafts continue from there).
    accepted: leading drafts that became final.
    bifurcation: j of the first rejected draft (the verifier's choice replaced it), or
        None when no draft was rejected (all accepted, or cut after an accepted EOS).
    relaxed: j < accepted where the draft differs from the verifier's choice (SpecDec++).
    final: the output tokens made final here, ``output[start: start + gained]``.
    """

    index: int
    start: int
    step: TraceStep
    accepted: int
    bifurcation: Optional[int]
    relaxed: List[int]
    final: List[int]

    @property
    def drafts(self) -> List[int]:
        return self.step.drafts

    @property
    def choices(self) -> List[int]:
        return self.step.choices

    @property
    def gained(self) -> int:
        return self.step.gained

    def final_prob(self, j: int) -> Optional[float]:
        """The verifier's probability of the token made final at block index j < gained."""
        step = self.step
        if step.choice_probs is None:
            return None
        if j < self.accepted and step.draft_probs is not None:
            return step.draft_probs[j]
        return step.choice_probs[j]


def view_step(index: int, start: int, step: TraceStep, output: List[int]) -> StepView:
    """Compare the step's drafts with the tokens the output got at its positions."""
    final = output[start: start + step.gained]
    if len(final) != step.gained:
        raise ValueError(f"iteration {index}: {step.gained} tokens gained past the output's {len(output)} tokens")
    accepted = 0
    while accepted < min(step.gained, len(step.drafts)) and step.drafts[accepted] == final[accepted]:
        accepted += 1
    rejected = accepted < step.gained and accepted < len(step.drafts)
    relaxed = [j for j in range(accepted) if step.drafts[j] != step.choices[j]]
    return StepView(index, start, step, accepted, accepted if rejected else None, relaxed, final)


def view_steps(sentence: SentenceTrace) -> List[StepView]:
    """Every iteration of ``sentence``; their gains add up to the output length."""
    views, start = [], 0
    for index, step in enumerate(sentence.steps, start=1):
        views.append(view_step(index, start, step, sentence.output))
        start += step.gained
    if start != len(sentence.output):
        raise ValueError(f"sentence {sentence.sentence_id}: iterations gained {start} tokens, output has {len(sentence.output)}")
    return views


class Symbols:
    """Token id -> display string; special tokens as in the papers' tables ([EOS], ...)."""

    def __init__(self, dictionary):
        self.dictionary = dictionary
        self.special = {dictionary.eos(): "[EOS]", dictionary.pad(): "[PAD]", dictionary.unk(): "[UNK]",
                        dictionary.bos(): "[BOS]"}

    def __call__(self, token: int) -> str:
        if token in self.special:
            return self.special[token]
        return self.dictionary[token] if 0 <= token < len(self.dictionary) else f"<{token}>"

    def many(self, tokens: List[int]) -> List[str]:
        return [self(t) for t in tokens]

    def text(self, tokens: List[int]) -> str:
        return " ".join(self(t) for t in tokens if t != self.dictionary.eos())

    def source(self, sentence: SentenceTrace) -> str:
        return sentence.source_text if sentence.source_text is not None else self.text(sentence.source)
