import type { ClientGone, UpstreamResponse } from '../../upstream/client.js';

/** One proxied request as the proxy hands it to a transport: already checked, rewritten and bounded. */
export interface TransportRequest {
  method: 'GET' | 'POST' | 'DELETE';
  headers: Record<string, string>;
  text?: string;
  /** every answer must start within this */
  timeoutMs: number;
  abort: ClientGone;
}

/**
 * How the proxy reaches an instance's server: over HTTP, or to a process svc runs. The answer has
 * the shape of an HTTP answer either way, so sessions, streams, rewrites and held calls are the
 * proxy's alone and know nothing of the transport.
 */
export interface McpTransport {
  call(req: TransportRequest): Promise<UpstreamResponse>;
}
