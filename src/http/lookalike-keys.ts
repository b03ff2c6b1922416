/**
 * Folds case the way lenient parsers match keys: Go's encoding/json (which also takes `ſ` for s
 * and the Kelvin sign for k) and .NET's web defaults (`ı` for i) read `"Stream"` as `stream`,
 * the last spelling winning. Each character folds to one, so a lookalike has its key's length.
 */
export const foldKey = (key: string) => key.toLowerCase().toUpperCase();

/**
 * The keys svc reads in one JSON object, and the spellings of them a lenient parser would take
 * for them: a body svc reads one way would be another request to such a server, so what finds a
 * lookalike is refused rather than guessed at. Built once; a look at an object walks its own keys
 * and folds only those of a length one of the keys has and that are not one exactly.
 */
export class LookalikeKeys {
  private readonly exact: Set<string>;
  private readonly folded: Map<string, string>;
  private readonly lengths: Set<number>;

  constructor(keys: readonly string[]) {
    this.exact = new Set(keys);
    this.folded = new Map(keys.map((k) => [foldKey(k), k]));
    this.lengths = new Set(keys.map((k) => k.length));
  }

  /** A key of `obj` that is not one of the keys but folds onto one of them, and which. */
  find(obj: unknown): { key: string; as: string } | undefined {
    if (!obj || typeof obj !== 'object' || Array.isArray(obj)) return undefined;
    for (const key in obj) {
      if (this.exact.has(key) || !this.lengths.has(key.length)) continue;
      const as = this.folded.get(foldKey(key));
      if (as !== undefined) return { key, as };
    }
    return undefined;
  }
}
