/**
 * What replicas tell each other on the change channel (changes.ts follows it, leases.ts numbers
 * and acknowledges the changes the Bearer check depends on). One JSON object per notice.
 */

/** PostgreSQL refuses a payload of 8000 bytes or more: beyond this, only the tables are named. */
const MAX_PAYLOAD = 7_000;

export interface Notice {
  /** the replica that made the change */
  o?: string;
  /** [table, key] of each change */
  c?: [string, string][];
  /** tables changed in more ways than fit */
  t?: string[];
  /** the change's number, when the Bearer check depends on it (leases.ts) */
  n?: number;
  /** an acknowledgement: replica `a` has dropped every numbered change up to `p` */
  a?: string;
  p?: number;
}

/** What a transaction sends: the keys it changed (the tables only, when they are too many to name). */
export function noticeFor(origin: string, changes: { table: string; key: string }[]): string {
  const full = JSON.stringify({ o: origin, c: changes.map((c) => [c.table, c.key]) } satisfies Notice);
  if (full.length <= MAX_PAYLOAD) return full;
  return JSON.stringify({ o: origin, t: [...new Set(changes.map((c) => c.table))] } satisfies Notice);
}

/** A notice's text, read; null for anything else. */
export function parseNotice(payload: string | undefined): Notice | null {
  try {
    const notice = JSON.parse(payload ?? '') as unknown;
    return notice && typeof notice === 'object' && !Array.isArray(notice) ? (notice as Notice) : null;
  } catch {
    return null;
  }
}
