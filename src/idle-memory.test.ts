import { afterEach, describe, expect, it, vi } from 'vitest';
import { reduceMemoryWhenIdle } from './idle-memory.js';

describe('reduceMemoryWhenIdle', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('collects once per idle spell, never while requests come in or one is in flight', () => {
    vi.useFakeTimers();
    let served = 0;
    let open = false;
    const collect = vi.fn();
    const stop = reduceMemoryWhenIdle({ idleMs: 1000, served: () => served, inFlight: () => open, collect });
    served++;
    vi.advanceTimersByTime(1000); // served something in this period
    expect(collect).not.toHaveBeenCalled();
    open = true;
    vi.advanceTimersByTime(3000); // a stream stays open
    expect(collect).not.toHaveBeenCalled();
    open = false;
    vi.advanceTimersByTime(1000);
    expect(collect).toHaveBeenCalledTimes(1);
    expect(collect).toHaveBeenCalledWith({ type: 'minor' });
    vi.advanceTimersByTime(10_000); // still idle: once is enough
    expect(collect).toHaveBeenCalledTimes(1);
    served++;
    vi.advanceTimersByTime(2000); // busy, then idle again
    expect(collect).toHaveBeenCalledTimes(2);
    stop();
    served++;
    vi.advanceTimersByTime(10_000);
    expect(collect).toHaveBeenCalledTimes(2);
  });

  it("reaches V8's own collector when none is given", () => {
    const stop = reduceMemoryWhenIdle({ idleMs: 60_000, served: () => 0, inFlight: () => false });
    stop();
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
  });
});
