import path from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** Files that took at least this long at their last run start first. */
const LONG_MS = 8_000;

/**
 * The order of the test files: shuffled with the run's seed (printed at the start; --sequence.seed=N
 * repeats it), as vitest's own shuffle does, but with the files that took long at their last run
 * (vitest's results cache, in node_modules/.vite) put first, still in shuffled order among
 * themselves. On two workers one long file drawn last left the other worker idle for as long as
 * it ran (store-lock: 14 s of a 180 s run); started early, the short ones fill in around it. With
 * no cache (a fresh checkout) the order is the plain shuffle.
 */
export class ShuffledLongFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const shuffled = shuffle(files, this.ctx.config.sequence.seed ?? Date.now());
    const took = (spec: TestSpecification) =>
      this.ctx.cache.getFileTestResults(`${spec.project.name}:${path.relative(this.ctx.config.root, spec.moduleId)}`)?.duration ?? 0;
    const long = shuffled.filter((spec) => took(spec) >= LONG_MS);
    return [...long, ...shuffled.filter((spec) => !long.includes(spec))];
  }
}

/** Fisher-Yates with a small seeded generator (mulberry32): the same seed, the same order. */
function shuffle<T>(items: T[], seed: number): T[] {
  let state = seed >>> 0;
  const random = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}
