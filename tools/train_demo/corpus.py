# corpus.py — the training corpus of petrel's demo model: the King James Bible from Debian's
# `bible-kjv-text` (read through the `bible` program of `bible-kjv`), split into train and
# held-out validation chapters, plus short chat-formatted samples built from train verses so
# the model also answers inside the glm-dsa chat template.
#
# Text form: each chapter is "Book N\n" followed by one verse per line (verse numbers dropped).
# Validation = every 40th chapter (starting at chapter 7), never seen in training.
import random
import re
import subprocess

VAL_EVERY, VAL_OFFSET = 40, 7


def read_kjv():
    """Return a list of (heading, [verses]) for all 1189 chapters, in canonical order."""
    raw = subprocess.run(["bible", "-l0", "gen1:1-rev22:21"], check=True, capture_output=True,
                         text=True).stdout
    chapters = []
    for line in raw.split("\n"):
        if not line.strip():
            continue
        m = re.match(r"^\s+(\d+) (.*)$", line)
        if m:
            chapters[-1][1].append(m.group(2).strip())
        else:
            chapters.append((line.strip(), []))
    return chapters


def chapter_text(ch):
    head, verses = ch
    return head + "\n" + "\n".join(verses) + "\n\n"


def split(chapters):
    """(train chapters, validation chapters)"""
    tr = [c for i, c in enumerate(chapters) if i % VAL_EVERY != VAL_OFFSET]
    va = [c for i, c in enumerate(chapters) if i % VAL_EVERY == VAL_OFFSET]
    return tr, va


def chat_samples(chapters, n, seed=1):
    """n (user, assistant) pairs: the user gives the opening words of a verse, the assistant
    continues it (and sometimes the next verse)."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        head, verses = chapters[rng.randrange(len(chapters))]
        i = rng.randrange(len(verses))
        words = verses[i].split(" ")
        if len(words) < 6:
            continue
        k = rng.randint(2, min(8, len(words) - 3))
        user = " ".join(words[:k])
        ans = " ".join(words[k:])
        if rng.random() < 0.4 and i + 1 < len(verses):
            ans += "\n" + verses[i + 1]
        out.append((user, ans))
    return out


if __name__ == "__main__":
    ch = read_kjv()
    tr, va = split(ch)
    print(len(ch), "chapters;", len(tr), "train;", len(va), "validation")
    print(sum(len(chapter_text(c)) for c in tr), "train chars;", sum(len(chapter_text(c)) for c in va), "val chars")
    print(chapter_text(ch[0])[:300])
    print(chat_samples(tr, 3))
