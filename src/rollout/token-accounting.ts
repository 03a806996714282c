// CoMLRL 1.4.3's token accounting in its decentralized MAGRPO loss (COMLRL-SPEC §3.4), for tokenAccounting
// "comlrl". CoMLRL keeps each completion as its row of the generate() output for the node's K samples: the
// sampled tokens, then the pad token up to the longest sample's length (generation stops when every sample has
// ended). Its loss feeds prompt ⧺ row[:-1] and scores the targets row[0 .. W−2], so every row loses its last
// position — a longest sample's EOS, or its last token when it hit maxNewTokens — and a shorter sample's trailing
// pads are scored as targets. Our own ("exact") accounting scores each completion's tokens up to and including EOS.

/**
 * The completions of one node's K samples (each its tokens up to and including EOS) as CoMLRL scores them: padded
 * with padTokenId to the longest one's length W, then cut to W − 1 tokens.
 */
export function comlrlScoredCompletions(completions: readonly Int32Array[], padTokenId: number): Int32Array[] {
  const width = Math.max(0, ...completions.map((c) => c.length));
  return completions.map((completion) => {
    const row = new Int32Array(Math.max(width - 1, 0)).fill(padTokenId);
    row.set(completion.subarray(0, row.length));
    return row;
  });
}
