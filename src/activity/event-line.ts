import type { ActivityEvent } from './schemas.js';

// as JSON.stringify writes a value (a field a producer left undefined where it may not be: null)
const str = (v: unknown): string => JSON.stringify(v) ?? 'null';
const num = (n: unknown): string => (typeof n === 'number' ? (Number.isFinite(n) ? String(n) : 'null') : str(n));

/**
 * An event's line in the activity log: the JSON of its fields, in the order the recorder builds
 * them (callEvent), an absent one left out, as JSON.stringify writes such an event. Written field
 * by field, since an event's shape is known: the generic walk took more of recording an event than
 * anything else (a batch's lines are built at once, a hundred at a time). A key outside the
 * event's schema is not written.
 */
export function eventLine(e: ActivityEvent): string {
  let line = `{"id":${str(e.id)},"time":${str(e.time)},"kind":${str(e.kind)},"endpoint":${str(e.endpoint)},"duration_ms":${num(e.duration_ms)},"status":${num(e.status)},"outcome":${str(e.outcome)}`;
  if (e.reason !== undefined) line += `,"reason":${str(e.reason)}`;
  if (e.model !== undefined) line += `,"model":${str(e.model)}`;
  if (e.instance_id !== undefined) line += `,"instance_id":${str(e.instance_id)}`;
  if (e.mcp_method !== undefined) line += `,"mcp_method":${str(e.mcp_method)}`;
  if (e.tool !== undefined) line += `,"tool":${str(e.tool)}`;
  if (e.tokens_in !== undefined) line += `,"tokens_in":${num(e.tokens_in)}`;
  if (e.tokens_out !== undefined) line += `,"tokens_out":${num(e.tokens_out)}`;
  if (e.tokens_estimated !== undefined) line += `,"tokens_estimated":${str(e.tokens_estimated)}`;
  return `${line},"access_request_id":${str(e.access_request_id)},"app_client_id":${str(e.app_client_id)},"user":${str(e.user)}}`;
}
