import type { AccessRequestRecord, UserRecord } from '../../src/store/schema.js';

/**
 * Stored records for tests that write to the repositories directly: complete as the store keeps
 * them, with only what a test is about to be given.
 */

/** An access request as stored: a draft of app `app` made at `now` (ten minutes to decide) unless `over` says otherwise. */
export function accessRequestRecord(over: Partial<AccessRequestRecord> & Pick<AccessRequestRecord, 'id'>, now: number): AccessRequestRecord {
  const at = new Date(now).toISOString();
  return {
    app_client_id: 'app',
    flow_type: 'popup',
    requested_role: 'scope_user_user',
    requested: { version: '1', mcp_servers: [] },
    redirect_url: null,
    status: 'draft',
    created_at: at,
    expires_at: new Date(now + 600_000).toISOString(),
    updated_at: at,
    approved_role: null,
    approved: null,
    user_id: null,
    decided_at: null,
    revoked_at: null,
    revoked_by: null,
    failure_reason: null,
    ...over,
  };
}

/** A user as stored (password hash `x`), made at `now`. */
export const userRecord = (id: string, now: number, over: Partial<UserRecord> = {}): UserRecord => ({
  id,
  username: id,
  role: 'user',
  password_hash: 'x',
  created_at: new Date(now).toISOString(),
  ...over,
});
