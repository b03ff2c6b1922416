import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { collectEvery, reduceMemoryWhenIdle, v8Collector } from './memory.js';

describe('reduceMemoryWhenIdle', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('collects once per idle spell, never in a period when requests came', () => {
    vi.useFakeTimers();
    let served = 0;
    const collect = vi.fn();
    const stop = reduceMemoryWhenIdle({ idleMs: 1000, served: () => served, collect });
    for (let i = 0; i < 3; i++) {
      served++;
      vi.advanceTimersByTime(1000); // served something in this period
    }
    expect(collect).not.toHaveBeenCalled();
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
    const stop = reduceMemoryWhenIdle({ idleMs: 60_000, served: () => 0 });
    stop();
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
  });
});

describe('v8Collector', () => {
  it('reaches the collector once, and leaves the flag off: no later context gets a gc', () => {
    const collect = v8Collector();
    expect(typeof collect).toBe('function');
    expect(v8Collector()).toBe(collect);
    collect!({ type: 'minor' });
    expect(runInNewContext('typeof gc')).toBe('undefined');
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
  });
});

describe('collectEvery', () => {
  it('collects fully once per so many records kept, and reaches the collector only then', () => {
    const collect = vi.fn();
    const reach = vi.fn(() => collect);
    const kept = collectEvery(3, reach);
    for (let n = 1; n <= 7; n++) kept(n);
    expect(reach).toHaveBeenCalledTimes(2);
    expect(collect).toHaveBeenCalledTimes(2);
    expect(collect).toHaveBeenCalledWith();
  });
});
