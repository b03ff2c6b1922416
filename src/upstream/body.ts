import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import { invalidBody, payloadTooLarge } from '../errors.js';

/**
 * Every chunk of a stream, joined, at most `limit` bytes: past it the stream is destroyed and the
 * call fails with `tooBig()`; a stream that fails or closes before its end fails with its error.
 * Read by its events rather than `for await`, whose iterator, promises and end-of-stream watcher
 * cost each call of the data plane more than the reading itself (one or two chunks).
 */
export function collect(stream: Readable, limit: number, tooBig: () => Error): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    if (stream.readableEnded) return resolve(Buffer.alloc(0));
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    // the error listener stays: a stream destroyed here may still emit one (undici's does), and an
    // error with no listener would end the process
    const settle = (err: Error | null) => {
      if (settled) return;
      settled = true;
      stream.off('data', onData);
      stream.off('end', onEnd);
      stream.off('close', onClose);
      if (err) reject(err);
      else resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, size));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        settle(tooBig());
        stream.destroy();
      } else chunks.push(chunk);
    };
    const onEnd = () => settle(null);
    const onError = (err: Error) => settle(err);
    const onClose = () => settle(Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' }));
    stream.on('data', onData);
    stream.on('end', onEnd);
    stream.on('error', onError);
    stream.on('close', onClose);
    if (stream.destroyed) onClose();
  });
}

/** Reads a request body up to `limit` bytes; past it, 413 (before reading, when Content-Length says so). */
export function readRaw(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) return Promise.reject(payloadTooLarge(limit));
  return collect(req, limit, () => payloadTooLarge(limit));
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
