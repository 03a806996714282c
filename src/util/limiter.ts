// A counting semaphore for async work: the sandbox's processes and an API comparator's requests each run at most so
// many at once, the rest waiting in arrival order.

/** Runs work with at most `limit()` holders at once (read at every acquire, so a raised limit takes effect), FIFO. */
export function limiter(limit: () => number): <T>(work: () => Promise<T>) => Promise<T> {
  let active = 0;
  const waiting: Array<() => void> = [];
  return async <T>(work: () => Promise<T>): Promise<T> => {
    if (active >= limit()) await new Promise<void>((resolve) => waiting.push(resolve));
    active++;
    try {
      return await work();
    } finally {
      active--;
      waiting.shift()?.();
    }
  };
}
