import type { ActivityEvent, GrantUsage } from './schemas.js';

/**
 * Where the activity is kept, as the rest of svc sees it: the data dir's file (log.ts), the
 * default, or a team's PostgreSQL (postgres.ts), where every replica records into and reads from
 * the same events. Which one is chosen where the daemon opens its store.
 */
export interface ActivityStore {
  /** Takes one event; it is written off the request path, soon after (never failing the call). */
  record(event: Omit<ActivityEvent, 'id'>): void;
  /** Events newest first, by the filters of GET /svc/v1/activity. */
  list(q: ActivityQuery): Promise<ActivityEvent[]>;
  /** A grant's totals over the events kept; today's counts are for the daemon's local day now. */
  grantTotals(grantId: string): Promise<GrantTotals>;
  /** A grant's usage as the API shows it. */
  usageOf(grantId: string): Promise<GrantUsage>;
  /** The usage of many grants in one read (a list of requests), whatever their number. */
  usagesOf(grantIds: string[]): Promise<Map<string, GrantUsage>>;
  /** Removes the events past the bounds (days and number); answers how many went. */
  dropOld(): Promise<number>;
  /** Writes what is waiting. */
  flush(): Promise<void>;
  /** Writes what is waiting and stops; calling it again does nothing. */
  close(): Promise<void>;
}

export interface ActivityBounds {
  /** events older than this many days go; 0 keeps them */
  retentionDays: number;
  /** at most this many are kept; the oldest go first */
  maxEvents: number;
}

export interface GrantTotals {
  calls: number;
  refused: number;
  tokens_in: number;
  tokens_out: number;
  last_used_at: string | null;
  /** the daemon's local calendar day the `today` counts are for (YYYY-MM-DD) */
  day: string;
  today_calls: number;
  today_tokens: number;
}

export interface ActivityQuery {
  /** only these grants (access request ids); undefined: every grant */
  grants?: Set<string>;
  /** only events at or after this time (ms) */
  since?: number;
  /** only events after this id */
  after?: number;
  limit: number;
}

/** The last day localDay worked out, as the span of times it holds: [start, end). */
let lastDay = { start: 0, end: -1, day: '' };

/**
 * The daemon's local calendar day of a time, as the per-day limits count it. Every call and every
 * event asks it (often twice), nearly always of the same day: the day's span is kept, so a time
 * within it costs two comparisons rather than a Date and a formatted string.
 */
export function localDay(ms: number): string {
  if (ms >= lastDay.start && ms < lastDay.end) return lastDay.day;
  const d = new Date(ms);
  const [y, m, date] = [d.getFullYear(), d.getMonth(), d.getDate()];
  const day = `${y}-${String(m + 1).padStart(2, '0')}-${String(date).padStart(2, '0')}`;
  // local midnights (a day of 23 or 25 hours where the clocks change); NaN for a time that is none
  lastDay = { start: new Date(y, m, date).getTime(), end: new Date(y, m, date + 1).getTime(), day };
  return day;
}

export const emptyTotals = (day: string): GrantTotals => ({ calls: 0, refused: 0, tokens_in: 0, tokens_out: 0, last_used_at: null, day, today_calls: 0, today_tokens: 0 });

/** Totals as the API shows them. */
export function usageFromTotals(t: GrantTotals): GrantUsage {
  return { calls: t.calls, refused: t.refused, tokens_in: t.tokens_in, tokens_out: t.tokens_out, last_used_at: t.last_used_at, today: { calls: t.today_calls, tokens: t.today_tokens } };
}
