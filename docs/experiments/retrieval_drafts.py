"""A retrieval drafter's bound beside the block NAT drafter (REST-style drafting: no model, a datastore of target
sentences): on the records of ``draft_acceptance.py`` (lossless SpecDec along the NAT drafter's own trajectory,
drafting every iteration, k = 10), at each iteration's prefix the longest of its last 3/2/1 tokens is looked up in
the datastore and the most frequent continuation among the matches is followed token by token (up to 10); counted:
tokens per iteration of the NAT drafter, of the retrieval drafter alone, and of an oracle taking the better of the
two in every iteration (a bound: a real decoder would have to verify both or guess).

    RUNS=... python docs/experiments/draft_acceptance.py checkpoints/demo/drafter.pt 1014 RECORDS.json valid
    python docs/experiments/retrieval_drafts.py RECORDS.json DATASTORE.de [MORE.de ...]

DATASTORE: sentencepiece-encoded target sentences, one a line (e.g. the verifier's translations of the drafter's
training sources, ``$RUNS/multi30k/aug5/text/new.de``); the demo pair's target dictionary maps them to ids.
"""
import collections
import json
import sys

EOS, UNK, FIRST_SYMBOL = 2, 3, 4  # fairseq's dictionary: <s> <pad> </s> <unk>, then dict.txt's symbols
CONTEXTS = (3, 2, 1)
MATCHES_KEPT = 20000  # positions kept per context


def load_datastore(paths, dictionary="checkpoints/demo/dict.de.txt"):
    ids = {line.split()[0]: i + FIRST_SYMBOL for i, line in enumerate(open(dictionary))}
    return [[EOS] + [ids.get(piece, UNK) for piece in line.split()] + [EOS] for path in paths for line in open(path)]


def build_index(corpus):
    """context n-gram -> [(sentence, position of the token after it)] (each sentence starts with the decoder's EOS)."""
    index = collections.defaultdict(list)
    for s, tokens in enumerate(corpus):
        for pos in range(1, len(tokens)):
            for n in CONTEXTS:
                if pos >= n:
                    matches = index[tuple(tokens[pos - n:pos])]
                    if len(matches) < MATCHES_KEPT:
                        matches.append((s, pos))
    return index


def retrieve(corpus, index, prefix, k=10):
    tokens = [EOS] + prefix
    matches = next((index[tuple(tokens[-n:])] for n in CONTEXTS if len(tokens) >= n and tuple(tokens[-n:]) in index), [])
    draft = []
    while len(draft) < k and matches:
        offset = len(draft)
        following = [(s, pos) for s, pos in matches if pos + offset < len(corpus[s])]
        if not following:
            break
        token = collections.Counter(corpus[s][pos + offset] for s, pos in following).most_common(1)[0][0]
        draft.append(token)
        matches = [(s, pos) for s, pos in following if corpus[s][pos + offset] == token]
    return draft


def accepted(draft, target):
    n = 0
    while n < min(len(draft), len(target)) and draft[n] == target[n]:
        n += 1
    return n


def main():
    records = json.load(open(sys.argv[1]))
    corpus = load_datastore(sys.argv[2:])
    index = build_index(corpus)
    nat = alone = best = better = 0
    for record in records:
        prefix_len = record["len"] - 1
        prefix, target = record["out"][:prefix_len], record["out"][prefix_len:]
        n_nat = min(record["a"] + 1, len(target))
        n_retrieval = min(accepted(retrieve(corpus, index, prefix), target) + 1, len(target))
        nat, alone, best = nat + n_nat, alone + n_retrieval, best + max(n_nat, n_retrieval)
        better += n_retrieval > n_nat
    n = len(records)
    print(f"{len(corpus)} datastore sentences, {n} iterations: tokens per iteration NAT {nat / n:.3f}, retrieval "
          f"{alone / n:.3f}, the better of the two {best / n:.3f}; retrieval better in {better / n:.1%} of the iterations")


if __name__ == "__main__":
    main()
