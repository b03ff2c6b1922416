/** Fixtures for the `svc review` terminal UI tests (ink-testing-library). */
import { AppError } from '../../src/errors.js';
import type { ApproveRequest, PendingRequest, ReviewClient, ReviewData } from '../../src/tui/types.js';

export const NOW = Date.parse('2026-11-02T10:00:00.000Z');
export const URL_A = 'http://127.0.0.1:3001/mcp';
export const URL_B = 'http://127.0.0.1:4000/mcp';

/** Keys as a terminal sends them. */
export const KEY = {
  up: '\u001B[A',
  down: '\u001B[B',
  enter: '\r',
  escape: '\u001B',
  space: ' ',
  pageDown: '\u001B[6~',
} as const;

export const SGR = /\u001B\[[0-9;]*m/;

let n = 0;
const uuid = (i: number) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;

export function pending(over: Partial<PendingRequest> = {}): PendingRequest {
  const id = over.id ?? uuid(++n);
  return {
    id,
    app_client_id: 'demo-app',
    app_registered: true,
    flow_type: 'popup',
    status: 'draft',
    requested_role: 'scope_user_power_user',
    approved_role: null,
    requested: { version: '1', mcp_servers: [{ url: URL_A }] },
    approved: null,
    created_at: new Date(NOW - 60_000).toISOString(),
    expires_at: new Date(NOW + 9 * 60_000).toISOString(),
    decided_at: null,
    user: null,
    ...over,
  };
}

export function review(over: Partial<ReviewData> = {}): ReviewData {
  return {
    id: uuid(++n),
    app_client_id: 'notes-app',
    app_name: 'Notes App',
    app_description: 'Takes notes and searches your files',
    app_registered: true,
    flow_type: 'popup',
    status: 'draft',
    requested_role: 'scope_user_power_user',
    requested: { version: '1', mcp_servers: [{ url: URL_A }, { url: URL_B }] },
    created_at: new Date(NOW - 60_000).toISOString(),
    expires_at: new Date(NOW + 9 * 60_000).toISOString(),
    expires_in_seconds: 540,
    max_grantable_role: 'scope_user_power_user',
    suggested_role: over.max_grantable_role ?? 'scope_user_power_user',
    mcp_servers: [
      {
        url: URL_A,
        instances: [
          { id: 'aaaaaaaa-0000-4000-8000-000000000001', name: 'files-home', url: URL_A, enabled: true, selected: true },
          { id: 'bbbbbbbb-0000-4000-8000-000000000002', name: 'files-old', url: URL_A, enabled: false, selected: false },
          { id: 'cccccccc-0000-4000-8000-000000000003', name: 'files-work', url: URL_A, enabled: true, selected: false },
        ],
      },
      { url: URL_B, instances: [{ id: 'dddddddd-0000-4000-8000-000000000004', name: 'search', url: URL_B, enabled: true, selected: true }] },
    ],
    ...over,
  };
}

/** A daemon stand-in: drafts to list, review data per id, and a record of every decision sent. */
export class FakeClient implements ReviewClient {
  drafts: PendingRequest[] = [];
  reviews = new Map<string, ReviewData>();
  approvals: { id: string; body: ApproveRequest }[] = [];
  denials: string[] = [];
  listCalls = 0;
  approveError: Error | null = null;
  denyError: Error | null = null;
  listError: Error | null = null;

  /** A draft in the list and its review data, with the same id. */
  add(data: Partial<ReviewData> = {}, row: Partial<PendingRequest> = {}): ReviewData {
    const r = review(data);
    this.reviews.set(r.id, r);
    this.drafts.unshift(
      pending({ id: r.id, app_client_id: r.app_client_id, app_name: r.app_name, requested_role: r.requested_role, requested: r.requested, expires_at: r.expires_at, ...row }),
    );
    return r;
  }

  async listPending() {
    this.listCalls++;
    if (this.listError) throw this.listError;
    return [...this.drafts];
  }

  async review(id: string) {
    const r = this.reviews.get(id);
    if (!r) throw new AppError('not_found', 'No such access request.');
    return structuredClone(r);
  }

  async approve(id: string, body: ApproveRequest) {
    if (this.approveError) throw this.approveError;
    this.approvals.push({ id, body });
    this.drafts = this.drafts.filter((d) => d.id !== id);
    return { id, status: 'approved' as const, approved_role: body.approved_role, access_request_scope: `scope_access_request:${id}`, flow_type: 'popup' as const };
  }

  async deny(id: string) {
    if (this.denyError) throw this.denyError;
    this.denials.push(id);
    this.drafts = this.drafts.filter((d) => d.id !== id);
    return { id, status: 'denied' as const, flow_type: 'popup' as const };
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Retries `check` (which throws or returns false while not yet true) until it holds or `timeoutMs` passes. */
export async function until(check: () => unknown, timeoutMs = 3000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      if ((await check()) !== false) return;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw last instanceof Error ? last : new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}
