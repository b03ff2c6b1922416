import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * MCP session ids (2025-11-25 era: the server names a session in `Mcp-Session-Id`) as the app
 * sees them. A session is the app's: its stream carries what the server sends that app (answers,
 * sampling and elicitation requests, progress), so another grant that learned the id must not
 * use it, though both may reach the same instance.
 *
 * So the app never gets the server's id. It gets the id wrapped with a MAC over the grant, the
 * instance and the server's id, under a key derived from the master key:
 *
 *   svc1.<the server's id, base64url>.<HMAC-SHA256, 128 bits, base64url>
 *
 * svc unwraps what the app sends and passes the server's id upstream; an id that does not check
 * out for this grant and instance (another grant's, a server's raw id, a forged one) is a session
 * svc does not know, answered 404 as an MCP server answers one, so a client starts its own. Nothing
 * is kept: every replica of a team (one master key) knows every session, a restart forgets none,
 * and no number of sessions grows memory. A session begun before svc wrapped ids is not known,
 * and its client must start a new one.
 *
 * The ids of a stream's events (SSE `id:`, sent back as `Last-Event-ID` to resume the stream) are
 * a way into a session too: a server that keeps every session's events in one store replays any
 * stream to whoever names one of its events. They are wrapped the same way, under a key of their
 * own (MCP_EVENT_IDS_LABEL), so neither kind of id passes for the other.
 */
const PREFIX = 'svc1.';
/** what the MAC key is derived from the master key for */
export const MCP_SESSION_IDS_LABEL = 'svc mcp session ids v1';
/** what the MAC key of event ids is derived from the master key for */
export const MCP_EVENT_IDS_LABEL = 'svc mcp event ids v1';
/** bits of the MAC kept: a forger has one try a request, 2^-128 each */
const MAC_BYTES = 16;
export class SessionIds {
  /** @param key derived from the master key for this purpose alone */
  constructor(private readonly key: string) {}

  private mac(instanceId: string, grantId: string, serverId: string): Buffer {
    return createHmac('sha256', this.key).update(`${instanceId}\n${grantId}\n${serverId}`, 'utf8').digest().subarray(0, MAC_BYTES);
  }

  /** The id the app is given for the session the server named `serverId` in its answer to `grantId`. */
  forApp(instanceId: string, grantId: string, serverId: string): string {
    return `${PREFIX}${Buffer.from(serverId, 'utf8').toString('base64url')}.${this.mac(instanceId, grantId, serverId).toString('base64url')}`;
  }

  /** The server's id of the session `appId` names, or null when it is not a session of `grantId` on `instanceId`. */
  forServer(instanceId: string, grantId: string, appId: string): string | null {
    if (!appId.startsWith(PREFIX)) return null;
    const [wrapped, mac, ...rest] = appId.slice(PREFIX.length).split('.');
    if (rest.length > 0 || !wrapped || !mac || !BASE64URL.test(wrapped) || !BASE64URL.test(mac)) return null;
    const serverId = Buffer.from(wrapped, 'base64url').toString('utf8');
    const given = Buffer.from(mac, 'base64url');
    const expected = this.mac(instanceId, grantId, serverId);
    // the id goes upstream as the server wrote it: one spelling of it, and of its MAC, checks out
    if (given.length !== MAC_BYTES || given.toString('base64url') !== mac || Buffer.from(serverId, 'utf8').toString('base64url') !== wrapped) return null;
    return timingSafeEqual(given, expected) ? serverId : null;
  }
}

const BASE64URL = /^[A-Za-z0-9_-]+$/;
