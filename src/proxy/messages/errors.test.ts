import { describe, expect, it } from 'vitest';
import { ERROR_CODES, type ErrorCode } from '../../errors.js';
import { anthropicErrorBody, anthropicErrorType, errorEvent } from './errors.js';

describe('Anthropic error shape', () => {
  it('each of svc\'s codes has the Anthropic type its status and meaning call for', () => {
    const type = (code: ErrorCode, status?: number) => {
      const s = ERROR_CODES[code].status;
      return anthropicErrorType(s === 'upstream' ? status! : s, code);
    };
    expect(type('invalid_body')).toBe('invalid_request_error');
    expect(type('invalid_token')).toBe('authentication_error');
    expect(type('insufficient_scope')).toBe('permission_error');
    expect(type('model_not_found')).toBe('not_found_error');
    expect(type('payload_too_large')).toBe('request_too_large');
    expect(type('grant_rate_limited')).toBe('rate_limit_error');
    expect(type('grant_token_budget_exhausted')).toBe('rate_limit_error');
    expect(type('internal_error')).toBe('api_error');
    expect(type('upstream_unavailable')).toBe('api_error');
    expect(type('upstream_timeout')).toBe('overloaded_error');
    expect(type('upstream_busy')).toBe('overloaded_error');
    expect(type('upstream_rejected', 400)).toBe('invalid_request_error');
    expect(type('upstream_rejected', 404)).toBe('not_found_error');
    expect(type('upstream_rejected', 502)).toBe('api_error');
    expect(anthropicErrorType(529)).toBe('overloaded_error');
    // every code maps to one of Anthropic's types
    const types = new Set(['invalid_request_error', 'authentication_error', 'permission_error', 'not_found_error', 'request_too_large', 'rate_limit_error', 'api_error', 'overloaded_error']);
    for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) expect(types).toContain(type(code, 400));
  });

  it('the body and the stream event', () => {
    expect(anthropicErrorBody('rate_limit_error', 'slow down')).toEqual({ type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } });
    expect(errorEvent('api_error', 'broke "off"')).toBe('event: error\ndata: {"type":"error","error":{"type":"api_error","message":"broke \\"off\\""}}\n\n');
  });
});
