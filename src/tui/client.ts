import type { DaemonClient } from '../cli/client.js';
import { QUIET_HEADER } from '../daemon-info.js';
import type { ApproveResult, DenyResult, PendingRequest, ReviewClient, ReviewData } from './types.js';

const enc = encodeURIComponent;

/** The review API over the CLI's daemon connection (the same calls as `svc requests`). */
export function daemonReviewClient(client: Pick<DaemonClient, 'request'>): ReviewClient {
  return {
    // polled every second: asked quietly, so the daemon's log is not filled with it
    listPending: async () => (await client.request<{ data: PendingRequest[] }>('GET', '/svc/v1/access-requests?status=draft', undefined, { headers: { [QUIET_HEADER]: '1' } })).body.data,
    review: async (id) => (await client.request<ReviewData>('GET', `/svc/v1/access-requests/${enc(id)}/review`)).body,
    approve: async (id, body) => (await client.request<ApproveResult>('PUT', `/svc/v1/access-requests/${enc(id)}/approve`, body)).body,
    deny: async (id) => (await client.request<DenyResult>('POST', `/svc/v1/access-requests/${enc(id)}/deny`)).body,
  };
}
