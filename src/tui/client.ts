import type { DaemonClient } from '../cli/client.js';
import type { ApproveResult, DenyResult, HeldCall, PendingRequest, ReviewClient, ReviewData } from './types.js';

const enc = encodeURIComponent;

/** The review API over the CLI's daemon connection (the same calls as `svc requests`). */
export function daemonReviewClient(client: Pick<DaemonClient, 'request'>): ReviewClient {
  return {
    listPending: async () => (await client.request<{ data: PendingRequest[] }>('GET', '/svc/v1/access-requests?status=draft')).body.data,
    review: async (id) => (await client.request<ReviewData>('GET', `/svc/v1/access-requests/${enc(id)}/review`)).body,
    approve: async (id, body) => (await client.request<ApproveResult>('PUT', `/svc/v1/access-requests/${enc(id)}/approve`, body)).body,
    deny: async (id) => (await client.request<DenyResult>('POST', `/svc/v1/access-requests/${enc(id)}/deny`)).body,
    heldCalls: async () => (await client.request<{ data: HeldCall[] }>('GET', '/svc/v1/calls?status=pending')).body.data,
    approveCall: async (id) => (await client.request<HeldCall>('POST', `/svc/v1/calls/${enc(id)}/approve`, {})).body,
    denyCall: async (id) => (await client.request<HeldCall>('POST', `/svc/v1/calls/${enc(id)}/deny`)).body,
    approvedGrants: async () => (await client.request<{ data: PendingRequest[] }>('GET', '/svc/v1/access-requests?status=approved')).body.data,
    setTools: async (id, body) => (await client.request('PUT', `/svc/v1/access-requests/${enc(id)}/tools`, body)).body,
  };
}
