import { describe, expect, it } from 'vitest';
import { AppError, codesFor, ERROR_CODES } from './errors.js';

describe('the error catalogue', () => {
  it('gives each code one status and type, as docs/decisions.md (Errors) lists them', () => {
    const contract: [string, number, string][] = [
      ['invalid_body', 400, 'invalid_request_error'],
      ['missing_redirect_url', 400, 'invalid_request_error'],
      ['invalid_redirect_url', 400, 'invalid_request_error'],
      ['unsupported_version', 400, 'invalid_request_error'],
      ['not_found', 404, 'not_found_error'],
      ['login_required', 401, 'authentication_error'],
      ['privilege_escalation', 403, 'forbidden_error'],
      ['mcp_instance_not_owned', 403, 'forbidden_error'],
      ['mcp_instance_disabled', 400, 'invalid_request_error'],
      ['already_processed', 409, 'conflict_error'],
      ['expired', 409, 'conflict_error'],
      ['invalid_token', 401, 'authentication_error'],
      ['insufficient_scope', 403, 'forbidden_error'],
      ['payload_too_large', 413, 'invalid_request_error'],
      ['rate_limited', 429, 'rate_limit_error'],
      ['upstream_unavailable', 502, 'upstream_error'],
      ['upstream_timeout', 504, 'upstream_error'],
    ];
    for (const [code, status, type] of contract) {
      const err = new AppError(code as keyof typeof ERROR_CODES, 'x');
      expect([code, err.status, err.type]).toEqual([code, status, type]);
    }
  });

  it('keeps an upstream refusal at the upstream status', () => {
    expect(new AppError('upstream_rejected', 'x', { status: 422, type: 'invalid_request_error' })).toMatchObject({ status: 422, type: 'invalid_request_error' });
    expect(new AppError('upstream_rejected', 'x').status).toBe(502);
  });

  it('lists the codes of a status for the OpenAPI document', () => {
    expect(codesFor(409)).toContain('already_processed');
    expect(codesFor(401)).toEqual(['login_required', 'invalid_credentials', 'invalid_token']);
  });
});
