import http from 'node:http';
import https from 'node:https';
import { AppError } from '../errors.js';

const httpAgent = new http.Agent({ keepAlive: true, maxSockets: 256, keepAliveMsecs: 10_000 });
const httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 256, keepAliveMsecs: 10_000 });

export const upstreamUnavailable = (message = 'The upstream server could not be reached.') =>
  new AppError(502, 'upstream_error', 'upstream_unavailable', message);
export const upstreamTimeout = (message = 'The upstream server did not answer in time.') =>
  new AppError(504, 'upstream_error', 'upstream_timeout', message);

export interface UpstreamRequest {
  url: URL;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: Buffer | string;
  /** time allowed until the response headers arrive, and between body chunks */
  timeoutMs: number;
  /** aborts the upstream call, e.g. when the app disconnects */
  signal?: AbortSignal;
}

/**
 * One upstream HTTP call over a keep-alive agent. It resolves with the response as soon as its
 * headers arrive, so a stream can be passed on chunk by chunk. Errors are AppErrors that name
 * neither the upstream URL nor its credentials.
 */
export function callUpstream(req: UpstreamRequest): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const isHttps = req.url.protocol === 'https:';
    const headers: Record<string, string | number> = { ...req.headers };
    if (req.body !== undefined) headers['Content-Length'] = Buffer.byteLength(req.body);
    const outgoing = (isHttps ? https : http).request(req.url, {
      method: req.method,
      headers,
      agent: isHttps ? httpsAgent : httpAgent,
    });
    let settled = false;
    const fail = (err: AppError) => {
      if (settled) return;
      settled = true;
      outgoing.destroy();
      reject(err);
    };
    // Socket inactivity: before the headers it is a 504; after them (a stalled body) the stream is cut.
    outgoing.setTimeout(req.timeoutMs, () => (settled ? outgoing.destroy(new Error('upstream stalled')) : fail(upstreamTimeout())));
    outgoing.on('error', () => fail(req.signal?.aborted ? new AppError(499, 'invalid_request_error', 'client_closed', 'The client went away.') : upstreamUnavailable()));
    outgoing.on('response', (res) => {
      if (settled) {
        res.destroy();
        return;
      }
      settled = true;
      resolve(res);
    });
    if (req.signal) {
      if (req.signal.aborted) outgoing.destroy();
      else req.signal.addEventListener('abort', () => outgoing.destroy(), { once: true });
    }
    outgoing.end(req.body);
  });
}

export async function readBody(res: http.IncomingMessage, limit = 32 * 1024 * 1024): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      res.destroy();
      throw upstreamUnavailable('The upstream answer was too large.');
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** Joins a provider base URL ("http://host/v1") and an OpenAI path ("/chat/completions"). */
export function upstreamUrl(baseUrl: string, path: string): URL {
  return new URL(`${baseUrl.replace(/\/+$/, '')}${path}`);
}
