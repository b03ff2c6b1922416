import type { DaemonClient } from '../cli/client.js';
import { QUIET_HEADER } from '../daemon-info.js';
import type { ActivityEvent, ApproveResult, DenyResult, GrantSummary, HeldCall, PendingRequest, ReviewClient, ReviewData } from './types.js';

const enc = encodeURIComponent;
/** what the surface polls is asked quietly, so the daemon's log is not filled with it */
const quiet = { headers: { [QUIET_HEADER]: '1' } };

/** The review API over the CLI's daemon connection (the same calls as `svc requests`). */
export function daemonReviewClient(client: Pick<DaemonClient, 'request'>): ReviewClient {
  return {
    // polled every second
    listPending: async () => (await client.request<{ data: PendingRequest[] }>('GET', '/svc/v1/access-requests?status=draft', undefined, quiet)).body.data,
    review: async (id) => (await client.request<ReviewData>('GET', `/svc/v1/access-requests/${enc(id)}/review`)).body,
    approve: async (id, body) => (await client.request<ApproveResult>('PUT', `/svc/v1/access-requests/${enc(id)}/approve`, body)).body,
    deny: async (id) => (await client.request<DenyResult>('POST', `/svc/v1/access-requests/${enc(id)}/deny`)).body,
    listGrants: async () => (await client.request<{ data: GrantSummary[] }>('GET', '/svc/v1/access-requests?status=approved', undefined, quiet)).body.data,
    activity: async (id) => (await client.request<{ data: ActivityEvent[] }>('GET', `/svc/v1/activity?limit=50&grant=${enc(id)}`, undefined, quiet)).body.data,
    revoke: async (id) => void (await client.request('POST', `/svc/v1/access-requests/${enc(id)}/revoke`)),
    setLimits: async (id, limits) => void (await client.request('PUT', `/svc/v1/access-requests/${enc(id)}/limits`, limits)),
    // polled every second, with the pending list
    heldCalls: async () => (await client.request<{ data: HeldCall[] }>('GET', '/svc/v1/calls?status=pending', undefined, quiet)).body.data,
    approveCall: async (id) => (await client.request<HeldCall>('POST', `/svc/v1/calls/${enc(id)}/approve`, {})).body,
    denyCall: async (id) => (await client.request<HeldCall>('POST', `/svc/v1/calls/${enc(id)}/deny`)).body,
    approvedGrants: async () => (await client.request<{ data: PendingRequest[] }>('GET', '/svc/v1/access-requests?status=approved')).body.data,
    setTools: async (id, body) => (await client.request('PUT', `/svc/v1/access-requests/${enc(id)}/tools`, body)).body,
    forgetRemembered: async (id, which) =>
      (await client.request('DELETE', `/svc/v1/access-requests/${enc(id)}/remembered${which ? `?instance_id=${enc(which.instance_id)}&tool=${enc(which.tool)}` : ''}`)).body,
  };
}
