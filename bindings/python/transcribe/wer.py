"""Word error rate as NeMo's word_error_rate computes it: words split on whitespace (no normalisation),
word-level Levenshtein distance summed over the corpus, divided by the reference words."""

from __future__ import annotations


def edit_distance(ref: list, hyp: list) -> int:
    """Substitutions + insertions + deletions turning hyp into ref."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def corpus_wer(pairs) -> tuple[float, int, int]:
    """(wer, errors, reference words) over (reference, hypothesis) text pairs; wer is errors / words
    (inf when the references have no words but the hypotheses do, 0 when neither has any)."""
    errors = words = 0
    for ref, hyp in pairs:
        r, h = ref.split(), hyp.split()
        errors += edit_distance(r, h)
        words += len(r)
    if words == 0:
        return (0.0 if errors == 0 else float("inf")), errors, 0
    return errors / words, errors, words
