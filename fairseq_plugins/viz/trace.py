"""Draft/verify trace of a speculative decoder, per iteration (SpecDec paper, Table 19).

For every iteration: the tokens final before it (prefix), the drafted tokens D and the
verifier's choice after each drafted prefix V.  Marks, in the text version:

    a b |     the prefix (final before this iteration; highlighted in HTML)
    [x]       the bifurcation: the first rejected draft, and the verifier's token there
    {x}       a draft accepted by the SpecDec++ relaxation although V chose another token
    ~x~       discarded: drafts and verifications after the bifurcation (or after EOS)

    python -m fairseq_plugins.viz.trace DATA --path verifier.pt --drafter-path drafter.pt \\
        --decoding specdec++ --ids 0 5 --out trace/specdec    # -> trace/specdec.txt, .html
"""
import argparse
import html
from typing import List, Tuple

from fairseq_plugins.viz.runner import add_common_args, decode_selected, out_path, run_main
from fairseq_plugins.viz.steps import SentenceTrace, StepView, Symbols, view_steps

LEGEND = ("D: drafted tokens, V: the verifier's choice after each drafted prefix; 'a b |' final before the "
          "iteration; [x] bifurcation; {x} draft accepted by the SpecDec++ relaxation; ~x~ discarded")


def draft_marks(view: StepView) -> List[str]:
    """Mark of each drafted token (k): accepted, relaxed, bifurcation or discarded."""
    marks = []
    for j in range(len(view.drafts)):
        if j in view.relaxed:
            marks.append("relaxed")
        elif j < view.accepted:
            marks.append("accepted")
        elif j == view.bifurcation:
            marks.append("bifurcation")
        else:
            marks.append("discarded")
    return marks


def verify_marks(view: StepView) -> List[str]:
    """Mark of each verified token (k+1): verified (up to the tokens gained),
    bifurcation, or discarded."""
    return ["bifurcation" if j == view.bifurcation else "verified" if j < view.gained else "discarded"
            for j in range(len(view.choices))]


TEXT_MARKS = {"accepted": "{}", "verified": "{}", "relaxed": "{{{}}}", "bifurcation": "[{}]", "discarded": "~{}~"}


def marked_text(tokens: List[str], marks: List[str]) -> str:
    return " ".join(TEXT_MARKS[mark].format(token) for token, mark in zip(tokens, marks))


def rows_of(view: StepView, output: List[int], symbols: Symbols) -> Tuple[str, List[Tuple[str, str]], List[Tuple[str, str]]]:
    """(prefix text, D [(token, mark)], V [(token, mark)]) of one iteration."""
    prefix = " ".join(symbols.many(output[: view.start]))
    drafts = list(zip(symbols.many(view.drafts), draft_marks(view)))
    verified = list(zip(symbols.many(view.choices), verify_marks(view)))
    return prefix, drafts, verified


def iteration_header(view: StepView) -> str:
    parts = [f"ITERATION {view.index}", f"+{view.gained} tokens", f"{view.accepted}/{len(view.drafts)} drafts accepted"]
    if view.bifurcation is not None:
        parts.append(f"bifurcation at draft {view.bifurcation + 1}")
    if view.relaxed:
        parts.append("relaxed: " + ", ".join(str(j + 1) for j in view.relaxed))
    return "  ".join(parts)


def sentence_text(sentence: SentenceTrace, symbols: Symbols) -> str:
    """Plain-text trace of one sentence (see the module docstring for the marks)."""
    lines = [f"SENTENCE {sentence.sentence_id}", f"SOURCE  {symbols.source(sentence)}"]
    for view in view_steps(sentence):
        prefix, drafts, verified = rows_of(view, sentence.output, symbols)
        lead = f"{prefix} | " if prefix else ""
        lines.append(iteration_header(view))
        lines.append(f"  D  {lead}{marked_text(*zip(*drafts)) if drafts else ''}".rstrip())
        lines.append(f"  V  {lead}{marked_text(*zip(*verified))}")
    lines.append(f"RESULT  {symbols.text(sentence.output)}")
    lines.append(f"ITERATIONS {len(sentence.steps)}  TOKENS {len(sentence.output)}")
    return "\n".join(lines) + "\n"


def trace_text(sentences: List[SentenceTrace], symbols: Symbols, title: str = "") -> str:
    head = [title] if title else []
    return "\n".join(head + [LEGEND, ""] + [sentence_text(s, symbols) for s in sentences])


CSS = """
body { font-family: sans-serif; margin: 1.5em; }
table.trace { border-collapse: collapse; margin-bottom: 2em; }
table.trace td, table.trace th { border: 1px solid #ccc; padding: 4px 6px; vertical-align: top; text-align: left; }
.line { font-family: monospace; white-space: nowrap; margin: 2px 0; }
.tok { padding: 0 2px; margin: 0 1px; }
.prefix { background: #fff3b0; }
.bifurcation { outline: 2px solid #d62728; }
.relaxed { outline: 2px solid #1f77b4; }
.discarded { text-decoration: line-through; color: #999; }
.label { font-weight: bold; color: #555; }
"""


def html_tokens(tokens: List[Tuple[str, str]]) -> str:
    return " ".join(f'<span class="tok {mark}">{html.escape(token)}</span>' for token, mark in tokens)


def html_iteration(view: StepView, sentence: SentenceTrace, symbols: Symbols) -> str:
    """One table row (one iteration): number, summary, and the D and V lines."""
    prefix, drafts, verified = rows_of(view, sentence.output, symbols)
    lead = f'<span class="tok prefix">{html.escape(prefix)}</span> ' if prefix else ""
    summary = html.escape(iteration_header(view).split("  ", 1)[1])
    return (f'<tr class="iteration"><td>{view.index}</td><td>{summary}</td><td>'
            f'<div class="line"><span class="label">D</span> {lead}{html_tokens(drafts)}</div>'
            f'<div class="line"><span class="label">V</span> {lead}{html_tokens(verified)}</div></td></tr>')


def sentence_html(sentence: SentenceTrace, symbols: Symbols) -> str:
    rows = "\n".join(html_iteration(view, sentence, symbols) for view in view_steps(sentence))
    return (f'<h2>Sentence {html.escape(str(sentence.sentence_id))}</h2>\n'
            f'<p><span class="label">SOURCE</span> {html.escape(symbols.source(sentence))}</p>\n'
            f'<table class="trace"><thead><tr><th>#</th><th>iteration</th><th>draft / verify</th></tr></thead>\n'
            f'<tbody>\n{rows}\n</tbody></table>\n'
            f'<p><span class="label">RESULT</span> {html.escape(symbols.text(sentence.output))} '
            f'({len(sentence.steps)} iterations, {len(sentence.output)} tokens)</p>')


def trace_html(sentences: List[SentenceTrace], symbols: Symbols, title: str = "draft/verify trace") -> str:
    """A self-contained HTML page (inline CSS, no external assets)."""
    body = "\n".join(sentence_html(s, symbols) for s in sentences)
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f'<style>{CSS}</style></head>\n<body>\n<h1>{html.escape(title)}</h1>\n'
            f'<p>{html.escape(LEGEND)}</p>\n{body}\n</body></html>\n')


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m fairseq_plugins.viz.trace",
        description="Draft/verify trace of a speculative decoder per iteration (SpecDec paper, Table 19), "
                    "written as OUT.txt and OUT.html.")
    add_common_args(parser, default_decoding="specdec")
    return parser


def main(args) -> List[str]:
    task, sentences = decode_selected(args)
    symbols = Symbols(task.target_dictionary)
    title = f"--decoding {args.decoding}" + (f" --block-size {args.block_size}" if args.block_size else "")
    written = []
    for suffix, render in ((".txt", trace_text), (".html", trace_html)):
        path = out_path(args.out, suffix)
        with open(path, "w", encoding="utf-8") as f:
            f.write(render(sentences, symbols, title))
        written.append(path)
    print("\n".join(written))
    return written


def cli_main(argv=None):
    run_main(main, get_parser(), argv)


if __name__ == "__main__":
    cli_main()
