import type { IncomingMessage } from 'node:http';
import { invalidBody, payloadTooLarge } from '../errors.js';

/** Reads a request body up to `limit` bytes; past it, 413 (before reading, when Content-Length says so). */
export async function readRaw(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) throw payloadTooLarge(limit);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw payloadTooLarge(limit);
    chunks.push(chunk as Buffer);
  }
  return chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
}

/** readRaw, then JSON (400 when it is not); answers the text too, so it can be passed on as it came. */
export async function readJson(req: IncomingMessage, limit: number): Promise<{ raw: string; json: unknown }> {
  const buf = await readRaw(req, limit);
  if (buf.length === 0) throw invalidBody('The request body must be a JSON object.');
  const raw = buf.toString('utf8');
  try {
    return { raw, json: JSON.parse(raw) };
  } catch {
    throw invalidBody('Request body is not valid JSON.');
  }
}
