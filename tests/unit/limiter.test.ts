// The counting semaphore the sandbox and the API comparator share: never more holders than the limit, waiters served
// in arrival order, a raised limit honoured at the next acquire, and a failing holder frees its slot.
import { describe, expect, it } from "vitest";
import { limiter } from "../../src/util/limiter.js";

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("limiter", () => {
  it("holds at most `limit` at once and serves waiters in arrival order", async () => {
    const run = limiter(() => 2);
    let active = 0;
    let most = 0;
    const started: number[] = [];
    const releases: Array<() => void> = [];
    const jobs = [0, 1, 2, 3, 4].map((n) =>
      run(async () => {
        started.push(n);
        most = Math.max(most, ++active);
        await new Promise<void>((resolve) => releases.push(resolve));
        active--;
        return n;
      }),
    );
    await tick();
    expect(started).toEqual([0, 1]);
    releases.shift()!();
    await tick();
    await tick();
    expect(started).toEqual([0, 1, 2]);
    while (started.length < 5 || releases.length > 0) {
      releases.shift()?.();
      await tick();
    }
    expect(await Promise.all(jobs)).toEqual([0, 1, 2, 3, 4]);
    expect(started).toEqual([0, 1, 2, 3, 4]);
    expect(most).toBe(2);
  });

  it("reads the limit at every acquire, and a holder that throws frees its slot", async () => {
    let limit = 1;
    const run = limiter(() => limit);
    await expect(run(async () => Promise.reject(new Error("boom")))).rejects.toThrow("boom");
    let active = 0;
    let most = 0;
    limit = 3;
    await Promise.all(
      [0, 1, 2].map(() =>
        run(async () => {
          most = Math.max(most, ++active);
          await tick();
          active--;
        }),
      ),
    );
    expect(most).toBe(3);
  });
});
