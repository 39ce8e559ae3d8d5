#!/bin/sh
# bench/ab.sh — old vs new petrel, side by side in one run: `petrel generate` with a
# 64-token prompt and 32 greedy tokens, the two binaries alternated RUNS times per model
# with the order flipping every pair (the second of a pair tends to read slower here).
# Prints one line per run, "old|new MODEL prefill_tok/s decode_tok/s", then per model the
# medians and the pairwise new/old median, with the load average.
#
#   OLD=path/to/old/petrel NEW=build/petrel sh bench/ab.sh MODEL.gguf [MODEL.gguf ...]
#
# Build the old binary from a worktree (git worktree add /tmp/old REV && make -C /tmp/old).
set -eu
OLD=${OLD:?set OLD to the old petrel binary}
NEW=${NEW:-build/petrel}
RUNS=${RUNS:-8}
THREADS=${THREADS:-2}
[ $# -ge 1 ] || { echo "usage: OLD=... NEW=... sh bench/ab.sh MODEL.gguf..." >&2; exit 2; }
TOK=$(awk -v n=64 'BEGIN { for (i = 0; i < n; i++) printf "%s%d", i ? "," : "", (1000 + 7919 * i) % 30000 }')
TMP=$(mktemp)
trap 'rm -f "$TMP"' EXIT
for M in "$@"; do
    for B in "$OLD" "$NEW"; do "$B" generate -m "$M" --tokens "$TOK" -n 2 --greedy -t "$THREADS" >/dev/null 2>&1; done
    : >"$TMP"
    i=1
    while [ $i -le "$RUNS" ]; do
        if [ $((i % 2)) = 1 ]; then ORDER="old new"; else ORDER="new old"; fi
        for b in $ORDER; do
            BIN=$OLD
            [ "$b" = new ] && BIN=$NEW
            "$BIN" generate -m "$M" --tokens "$TOK" -n 32 --greedy -t "$THREADS" 2>&1 >/dev/null |
                sed -n "s/.*prompt [0-9]* tokens in [0-9.]* s (\([0-9.]*\) tok\/s).*generated [0-9]* in [0-9.]* s (\([0-9.]*\) tok\/s).*/$b \1 \2/p" >>"$TMP"
        done
        i=$((i + 1))
    done
    sed "s|^\([a-z]*\) |\1 $(basename "$M") |" "$TMP"
    awk -v m="$(basename "$M")" '
        function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
        $1 == "old" { op[++no] = $2; od[no] = $3 } $1 == "new" { np[++nn] = $2; nd[nn] = $3 }
        END { for (i = 1; i <= no; i++) { rp[i] = np[i] / op[i]; rd[i] = nd[i] / od[i] }
              printf "%s: prefill old %.1f new %.1f (pairwise new/old %.3f); decode old %.2f new %.2f (pairwise %.3f)\n",
                     m, med(op, no), med(np, nn), med(rp, no), med(od, no), med(nd, nn), med(rd, no) }' "$TMP"
    echo "load: $(cat /proc/loadavg)"
done
