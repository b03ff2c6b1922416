import type { Command } from 'commander';
import type { z } from 'zod';
import type { accessRequestSummary, reviewResponse } from '../../../access-requests/schemas.js';
import { APP_ROLE_NAMES } from '../../../auth/roles.js';
import type { AppRole } from '../../../store/vocabulary.js';
import { DaemonClient, usage } from '../../client.js';
import { resolve } from '../../ids.js';
import type { Output } from '../../output.js';

/** as the API answers them (the routes' own schemas; type-only, so the CLI never loads zod) */
export type Summary = z.infer<typeof accessRequestSummary>;

export type Review = z.infer<typeof reviewResponse>;

export type Limits = { requests_per_minute: number | null; tokens_per_day: number | null };

/** What every `svc requests` verb shares: the output, the daemon, and how ids and roles read. */
export interface RequestsCli {
  o: Output;
  connect: (cmd: Command) => Promise<DaemonClient>;
  /** The full id of a request from a unique prefix (6+ characters), among the requests you may see. */
  requestId: (client: DaemonClient, typed: string) => Promise<string>;
  /** On a terminal the name and the value (`Power User (scope_user_power_user)`); piped, the value. */
  role: (value: string) => string;
}

export function requestsCli(o: Output): RequestsCli {
  return {
    o,
    connect: (cmd) => DaemonClient.connect(cmd.optsWithGlobals(), o.env, o.err),
    requestId: (client, typed) => resolve(client, 'request', typed),
    role: (value) => (o.isTTY ? `${roleName(value)} (${value})` : value),
  };
}

export const enc = encodeURIComponent;

export const collect = (value: string, previous: string[] = []) => [...previous, value];

/** `--mcp URL=INSTANCE_ID` pairs, grouped by URL. The URL may itself contain '=', so split at the last one. */
export function parseMcpSelections(pairs: string[]): { url: string; instance_ids: string[] }[] {
  const byUrl = new Map<string, string[]>();
  for (const pair of pairs) {
    const at = pair.lastIndexOf('=');
    if (at <= 0 || at === pair.length - 1) throw usage(`--mcp takes URL=INSTANCE_ID, not "${pair}".`);
    const url = pair.slice(0, at);
    byUrl.set(url, [...(byUrl.get(url) ?? []), pair.slice(at + 1)]);
  }
  return [...byUrl].map(([url, instance_ids]) => ({ url, instance_ids }));
}

/** `--rpm` and `--tokens-per-day` as a limits body; `none` (where allowed) removes one. Undefined when neither is given. */
export function limitsFrom(opts: { rpm?: string; tokensPerDay?: string }, allowNone: boolean): Partial<Limits> | undefined {
  const one = (flag: string, text: string | undefined) => {
    if (text === undefined) return undefined;
    if (allowNone && text === 'none') return null;
    if (!/^[1-9]\d{0,11}$/.test(text)) throw usage(`${flag} takes a whole number above 0${allowNone ? ' or none' : ''}, not "${text}".`);
    return Number(text);
  };
  const rpm = one('--rpm', opts.rpm);
  const tokens = one('--tokens-per-day', opts.tokensPerDay);
  if (rpm === undefined && tokens === undefined) return undefined;
  return { ...(rpm !== undefined ? { requests_per_minute: rpm } : {}), ...(tokens !== undefined ? { tokens_per_day: tokens } : {}) };
}

export const describeLimits = (l: Limits) =>
  `${l.requests_per_minute === null ? 'no limit on calls a minute' : `${l.requests_per_minute} calls a minute`}; ${l.tokens_per_day === null ? 'no limit on tokens a day' : `${l.tokens_per_day} tokens a day`}`;

export const roleName = (role: string) => APP_ROLE_NAMES[role as AppRole] ?? role;
