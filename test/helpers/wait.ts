/**
 * The suite's wait: poll for the event itself (a log line, a file, an answer, a counter) with a
 * deadline, and fail naming what was waited for when it passes. A test never sleeps a fixed time
 * and then asserts (docs/testing.md).
 */

/** Polls `check` until it answers something truthy; fails with `what` when the deadline passes. */
export async function eventually<T>(check: () => Promise<T> | T, what: string, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
