// Task options are checked against the task's own option names: names every object inherits (constructor,
// toString, __proto__, hasOwnProperty) are unknown options, not accepted as if the task declared them.
import { describe, expect, it } from "vitest";
import { getTask } from "../../src/tasks/registry.js";

describe("getTask options", () => {
  it("refuses inherited names as unknown options, listing the task's own", () => {
    for (const name of ["constructor", "toString", "hasOwnProperty", "__proto__"]) {
      const options = JSON.parse(`{"${name}": 1}`) as Record<string, unknown>;
      expect(() => getTask("cover-vowels", options), name).toThrow(`task "cover-vowels" has no option "${name}"; its options: chatTemplate (`);
      expect(() => getTask("story-len-ratio", options), name).toThrow(`task "story-len-ratio" has no option "${name}"; its options: none`);
    }
  });

  it("still takes a declared option", () => {
    expect(getTask("vowel-relay", { turns: 2 }).name).toBe("vowel-relay");
  });
});
