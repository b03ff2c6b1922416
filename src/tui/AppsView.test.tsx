/** The Apps view of `svc review`: times as people read them, never raw ISO or UTC clock times. */
import { cleanup, render } from 'ink-testing-library';
import { afterEach, describe, expect, it } from 'vitest';
import { AppsView } from './components/AppsView.js';
import type { ActivityEvent, GrantSummary } from './types.js';

const NOW = Date.parse('2026-12-01T12:00:00Z');
const ago = (ms: number) => new Date(NOW - ms).toISOString();

const grant = {
  id: '3f2c9a10-1111-4222-8333-444455556666',
  app_client_id: 'svc-key:0b1c2d3e-1111-4222-8333-444455556666',
  app_name: 'API key "demo"',
  app_registered: true,
  flow_type: 'popup',
  status: 'approved',
  requested_role: 'scope_user_user',
  approved_role: 'scope_user_user',
  requested: { version: '1', mcp_servers: [] },
  approved: { version: '1', mcp_servers: [] },
  created_at: ago(3_600_000),
  expires_at: ago(-3_600_000),
  decided_at: ago(3_600_000),
  usage: { calls: 3, refused: 0, last_used_at: ago(5 * 60_000), today: { calls: 3, tokens: 12 } },
} as unknown as GrantSummary;

const event = { id: '1', time: ago(2 * 60_000), access_request_id: grant.id, app_client_id: grant.app_client_id, user: 'admin', kind: 'chat', endpoint: '/v1/chat/completions', model: 'm', status: 200, outcome: 'ok', duration_ms: 12 } as ActivityEvent;

describe('the Apps view', () => {
  afterEach(() => cleanup());

  it('says when an app was last used and when each event came as "5 min ago", not as an ISO or UTC time', () => {
    const apps = { grants: [grant], loaded: true, cursor: 0, activity: [event], activityOf: grant.id, confirmRevoke: null, edit: null };
    const { lastFrame } = render(<AppsView apps={apps} width={100} height={12} color={false} now={NOW} />);
    const frame = lastFrame() ?? '';
    expect(frame).toContain('5 min ago');
    expect(frame).toContain('2 min ago');
    expect(frame).not.toMatch(/\d{4}-\d\d-\d\d \d\d:\d\d/);
    expect(frame).not.toContain('11:58:00');
  });
});
