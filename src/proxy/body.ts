import type { IncomingMessage } from 'node:http';
import { invalidBody, payloadTooLarge } from '../errors.js';

/** Reads a request body up to `limit` bytes (413 past it) and parses it as JSON (400 if it is not). */
export async function readJson(req: IncomingMessage, limit: number): Promise<unknown> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) throw payloadTooLarge(limit);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) throw payloadTooLarge(limit);
    chunks.push(chunk as Buffer);
  }
  if (size === 0) throw invalidBody('The request body must be a JSON object.');
  try {
    return JSON.parse(chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw invalidBody('Request body is not valid JSON.');
  }
}
