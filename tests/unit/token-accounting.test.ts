// tokenAccounting "comlrl": which tokens CoMLRL 1.4.3's MAGRPO scores, worked by hand from its loss
// (input prompt ⧺ row[:-1], targets row[0 .. W−2] of the node's pad-padded generate() rows). The loss on these rows
// is matched against CoMLRL itself in tests/golden/comlrl.test.ts.
import { describe, expect, it } from "vitest";
import { comlrlScoredCompletions } from "../../src/rollout/token-accounting.js";

const EOS = 2;
const rows = (...r: number[][]) => r.map((ids) => Int32Array.from(ids));
const plain = (r: Int32Array[]) => r.map((ids) => [...ids]);

describe("comlrlScoredCompletions", () => {
  it("pads to the longest completion, then drops every row's last position", () => {
    // Width 4 (the completion that hit maxNewTokens): its last token goes unscored; the shorter ones score their
    // EOS and the pads after it, up to position 2.
    const scored = comlrlScoredCompletions(rows([5, 6, EOS], [7, EOS], [8, 9, 10, 11]), EOS);
    expect(plain(scored)).toEqual([[5, 6, EOS], [7, EOS, EOS], [8, 9, 10]]);
  });

  it("drops the longest completion's EOS when every completion ended", () => {
    expect(plain(comlrlScoredCompletions(rows([5, EOS], [6, 7, EOS]), EOS))).toEqual([[5, EOS], [6, 7]]);
  });

  it("pads with the pad token, not EOS, when they differ", () => {
    expect(plain(comlrlScoredCompletions(rows([5, EOS], [6, 7, 8, EOS]), 0))).toEqual([[5, EOS, 0], [6, 7, 8]]);
  });

  it("scores nothing when every completion is one token", () => {
    expect(plain(comlrlScoredCompletions(rows([EOS], [9]), EOS))).toEqual([[], []]);
    expect(comlrlScoredCompletions([], EOS)).toEqual([]);
  });

  it("leaves the given completions as they were", () => {
    const given = rows([5, EOS], [6, 7, 8]);
    comlrlScoredCompletions(given, EOS);
    expect(plain(given)).toEqual([[5, EOS], [6, 7, 8]]);
  });
});
